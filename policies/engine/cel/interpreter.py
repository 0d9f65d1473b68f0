"""The exact path: a checked tree compiled to Python closures with full CEL semantics.

Errors are `CelEvalError`s, absorbed as CEL requires (`false && error` is false, `error || true`
is true, `all`/`exists` likewise); dyn operands are dispatched on their runtime kinds. The actual
cost is counted in the units of `cost` and checked against the budget at every macro iteration
and costly call, and once more at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from policies.engine.inputs import resource_key

from . import ast
from . import functions as fn
from . import runtime as rt
from .bounds import traversal
from .cost import RESULT_CHARGED, ValueSizes, comparison, compiles_pattern, runtime_size
from .deadline import CHECK_EVERY, deadline_get, deadline_passed, now
from .errors import CelCostError, CelEvalError
from .library import GENERIC, dispatch
from .regex import COMPILE_UNITS, is_compiled
from .types import TYPE_NAMES, Type
from .values import TypeValue, clip, kind_of

Eval = Callable[["Frame"], Any]


class Frame:
    """One evaluation: the activation, macro variable slots and the running cost."""

    __slots__ = ("act", "cost", "deadline", "limit", "mark", "slots")

    def __init__(self, act: Mapping[str, Any], limit: int, nslots: int) -> None:
        self.act = act
        self.cost = 0
        self.limit = limit
        self.slots: list[Any] = [None] * nslots
        # `mark`: the cost at which `tick` runs next - the limit, or sooner under a deadline
        self.deadline = deadline_get()
        self.mark = limit if self.deadline is None else min(limit, CHECK_EVERY)

    def over_budget(self) -> CelCostError:
        return CelCostError(f"cost budget exceeded: {self.cost} > {self.limit}")

    def tick(self) -> None:
        """Called when `cost` passes `mark`: a CelCostError over the limit, EvaluationTimeout
        past the deadline (deadline.py), else the next mark."""
        if self.cost > self.limit:
            raise self.over_budget()
        if self.deadline is not None:
            if now() > self.deadline:
                deadline_passed()
            self.mark = min(self.limit, self.cost + CHECK_EVERY)


def type_value_of(typ: Type) -> TypeValue:
    """The runtime type value for a static type named in an expression (`int`, `list`)."""
    if typ.kind == "null_type":
        return TypeValue("null_type")
    if typ.kind in ("list", "map", "type"):
        return TypeValue(typ.kind)
    return TypeValue(typ.name)


class Compiler:
    """Turns checked nodes into closures `f(frame) -> value`. With `track` off (benchmarks
    only) comparisons and large results are not counted: the seed cost of each node still is."""

    def __init__(self, *, track: bool = True) -> None:
        self.track = track

    def compile(self, node: ast.Node) -> Eval:
        return getattr(self, "_" + type(node).__name__.lower())(node)

    # -- leaves --------------------------------------------------------------------------------
    def _literal(self, node: ast.Literal) -> Eval:
        value = node.value

        def literal(fr: Frame) -> Any:
            fr.cost += 1
            return value

        return literal

    def _ident(self, node: ast.Ident) -> Eval:
        if node.binding is not None:
            slot = node.binding.slot

            def local(fr: Frame) -> Any:
                fr.cost += 1
                return fr.slots[slot]

            return local
        name = node.name
        if node.type is not None and node.type.kind == "type" and name in TYPE_NAMES:
            value = type_value_of(TYPE_NAMES[name])

            def type_name(fr: Frame) -> Any:
                fr.cost += 1
                return value

            return type_name

        def variable(fr: Frame) -> Any:
            fr.cost += 1
            try:
                value = fr.act[name]
            except KeyError:
                raise CelEvalError(f"no value for input '{name}' in the activation") from None
            if isinstance(value, CelEvalError):
                raise value
            return value

        return variable

    # -- selection -----------------------------------------------------------------------------
    def _select(self, node: ast.Select) -> Eval:
        path = _input_path(node)
        if path is not None:
            return self._input_path(*path)
        operand = self.compile(node.operand)
        field = node.field
        owner = node.operand.type
        if owner.kind == "object" and owner.fields:
            what = owner.name

            def field_of(fr: Frame) -> Any:
                obj = operand(fr)
                fr.cost += 1
                try:
                    value = obj[field]
                except (KeyError, TypeError):
                    raise CelEvalError(f"{what} value has no field '{field}'") from None
                if isinstance(value, CelEvalError):  # a variable whose evaluation failed
                    raise value
                return value

            return field_of
        if owner.kind == "resources":

            def resource(fr: Frame) -> Any:
                r = operand(fr)
                fr.cost += 1
                return rt.resource_get(r, field)

            return resource

        def select(fr: Frame) -> Any:
            value = operand(fr)
            fr.cost += 1
            return rt.select(value, field)

        return select

    def _input_path(
        self, name: str, fields: list[str], what: list[str], resource: str | None
    ) -> Eval:
        """`node.allocatable.cpu` in one closure: an input, declared object fields, and
        optionally a resource (the commonest shape of all, so it is worth a fused form)."""
        cost = 1 + len(fields) + (resource is not None)

        def failure(fr: Frame) -> CelEvalError:
            # Walk again to say which step failed (or which variable carries an error).
            if name not in fr.act:
                return CelEvalError(f"no value for input '{name}' in the activation")
            value = fr.act[name]
            for field, owner in zip(fields, what):
                if isinstance(value, CelEvalError):
                    return value
                if not isinstance(value, Mapping) or field not in value:
                    return CelEvalError(f"{owner} value has no field '{field}'")
                value = value[field]
            return value if isinstance(value, CelEvalError) else CelEvalError("bad input")

        def input_path(fr: Frame) -> Any:
            fr.cost += cost
            try:
                value = fr.act[name]
                for field in fields:
                    value = value[field]
            except (KeyError, TypeError, IndexError):
                raise failure(fr) from None
            if isinstance(value, CelEvalError):  # a variable whose evaluation failed
                raise value
            if resource is not None:
                return rt.resource_get(value, resource)
            return value

        return input_path

    def _has(self, node: ast.Has) -> Eval:
        operand = self.compile(node.operand)
        field = node.field
        owner = node.operand.type
        if owner.kind == "object" and owner.fields:

            def has_declared(fr: Frame) -> bool:
                operand(fr)
                fr.cost += 1
                return True

            return has_declared

        def has(fr: Frame) -> bool:
            value = operand(fr)
            fr.cost += 1
            return rt.has_field(value, field)

        return has

    # -- logic ---------------------------------------------------------------------------------
    def _and(self, node: ast.And) -> Eval:
        return self._logic(node, absorbing=False, function="_&&_")

    def _or(self, node: ast.Or) -> Eval:
        return self._logic(node, absorbing=True, function="_||_")

    def _logic(self, node: ast.And, *, absorbing: bool, function: str) -> Eval:
        # `absorbing` is the value that decides the result whatever the other side is: false
        # for &&, true for ||. Errors and non-bools lose to it, in either order.
        left, right = self.compile(node.left), self.compile(node.right)

        def side(fr: Frame, f: Eval) -> Any:
            try:
                v = f(fr)
            except CelCostError:
                raise
            except CelEvalError as e:
                return e
            except Exception as e:  # CEL absorbs every evaluation error, whatever raised it
                return foreign_error(function, e)
            if v is True or v is False:
                return v
            return CelEvalError(
                f"operands of '{function[1:-1]}' must be bool, got {rt.type_name(v)}"
            )

        def logic(fr: Frame) -> bool:
            fr.cost += 1
            a = side(fr, left)
            if a is absorbing:
                return absorbing
            b = side(fr, right)
            if b is absorbing:
                return absorbing
            if isinstance(a, CelEvalError):
                raise a
            if isinstance(b, CelEvalError):
                raise b
            return not absorbing

        return logic

    def _conditional(self, node: ast.Conditional) -> Eval:
        cond = self.compile(node.cond)
        if_true, if_false = self.compile(node.if_true), self.compile(node.if_false)

        def conditional(fr: Frame) -> Any:
            fr.cost += 1
            c = cond(fr)
            if c is True:
                return if_true(fr)
            if c is False:
                return if_false(fr)
            rt.fail(f"the condition of '?:' must be bool, got {rt.type_name(c)}")

        return conditional

    # -- literals ------------------------------------------------------------------------------
    def _listlit(self, node: ast.ListLit) -> Eval:
        elements = [self.compile(e) for e in node.elements]

        def list_literal(fr: Frame) -> list[Any]:
            fr.cost += 1
            return [e(fr) for e in elements]

        return list_literal

    def _maplit(self, node: ast.MapLit) -> Eval:
        entries = [(self.compile(k), self.compile(v)) for k, v in node.entries]

        def map_literal(fr: Frame) -> dict[Any, Any]:
            fr.cost += 1
            out: dict[Any, Any] = {}
            for kf, vf in entries:
                k = kf(fr)
                if kind_of(k) not in ("int", "uint", "bool", "string"):
                    rt.fail(f"map keys must be int, uint, bool or string, got {rt.type_name(k)}")
                if rt.map_find(out, k)[0] or (k in out):
                    rt.fail(f"duplicate map key {rt.format_value(k)}")
                out[k] = vf(fr)
            return out

        return map_literal

    # -- macros ----------------------------------------------------------------------------------
    def _comprehension(self, node: ast.Comprehension) -> Eval:
        rng = self.compile(node.iter_range)
        pred = self.compile(node.predicate) if node.predicate is not None else None
        transform = self.compile(node.transform) if node.transform is not None else None
        slot = node.slot
        kind = node.kind
        macro = f"{kind}()"

        def start(fr: Frame) -> Any:
            fr.cost += 1
            return rt.iter_range(rng(fr))

        def step(fr: Frame, x: Any) -> None:
            fr.cost += 1
            if fr.cost > fr.mark:
                fr.tick()
            fr.slots[slot] = x

        def not_bool(v: Any) -> CelEvalError:
            return CelEvalError(f"the condition of {macro} must be bool, got {rt.type_name(v)}")

        if kind in ("all", "exists"):
            decisive = kind == "exists"  # all stops at false, exists at true
            assert pred is not None

            def quantifier(fr: Frame) -> bool:
                error: CelEvalError | None = None
                for x in start(fr):
                    step(fr, x)
                    try:
                        v = pred(fr)
                    except CelCostError:
                        raise
                    except CelEvalError as e:
                        error = error or e
                        continue
                    except Exception as e:  # absorbed like any CEL error
                        error = error or foreign_error(macro, e)
                        continue
                    if v is decisive:
                        return decisive
                    if v is not (not decisive):
                        error = error or not_bool(v)
                if error is not None:
                    raise error
                return not decisive

            return quantifier

        if kind == "exists_one":
            assert pred is not None

            def exists_one(fr: Frame) -> bool:
                count = 0
                for x in start(fr):
                    step(fr, x)
                    v = pred(fr)
                    if v is True:
                        count += 1
                    elif v is not False:
                        raise not_bool(v)
                return count == 1

            return exists_one

        def collect(fr: Frame) -> list[Any]:
            out = []
            for x in start(fr):
                step(fr, x)
                if pred is not None:
                    v = pred(fr)
                    if v is False:
                        continue
                    if v is not True:
                        raise not_bool(v)
                out.append(transform(fr) if transform is not None else x)
            return out

        return collect

    # -- calls ------------------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> Eval:
        operands = [self.compile(o) for o in node.operands]
        if self.track and compiles_pattern(node):
            operands[1] = _compile_charged(operands[1])
        function = node.function
        candidates = node.overloads
        static = [o.type for o in node.operands]
        charged = any(ov.cost is not None for ov in candidates)

        if function in ("math.greatest", "math.least") and not candidates:
            impl = fn.math_greatest if function == "math.greatest" else fn.math_least
            n = len(operands)

            def variadic(fr: Frame) -> Any:
                args = [o(fr) for o in operands]
                fr.cost += 1 + n
                return impl(*args)

            return variadic

        if function == "type" and static[0].kind == "object" and static[0].fields:
            value = TypeValue(static[0].name)

            def object_type(fr: Frame) -> Any:
                operands[0](fr)
                fr.cost += 1
                return value

            return object_type

        if candidates and candidates[0].id == "index_resources":

            def resource_index(fr: Frame) -> Any:
                r = operands[0](fr)
                k = operands[1](fr)
                fr.cost += 1
                if type(k) is not str:
                    rt.no_overload("_[_]", r, k)
                return rt.resource_get(r, resource_key(k))

            return resource_index

        how = comparison(function, static) if self.track else None
        if how == "walk":
            return self._counted_equality(operands, negate=function == "_!=_")
        if how is not None and function == "@in":
            return self._counted_membership(operands)

        if len(candidates) == 1 and not any(s.is_dyn for s in static):
            impl = candidates[0].impl
        elif function in GENERIC:
            impl = GENERIC[function]
        else:

            def impl(*args: Any) -> Any:
                return dispatch(function, candidates, args)

        if self.track and function == "findAll":
            return _find_all(operands, candidates[0])

        def size_of(*args: Any) -> int:
            return _charge_of(candidates, args)

        if how is not None:  # "leaf" (strings compared), "key" or "any" (a map index): call2
            charged, size_of = True, rt.leaf_charge if how == "leaf" else _index_charge

        if not charged and len(operands) == 2:
            a, b = operands

            def plain2(fr: Frame) -> Any:
                x = a(fr)
                y = b(fr)
                fr.cost += 1
                try:
                    return impl(x, y)
                except CelEvalError:
                    raise
                except Exception as e:
                    raise foreign_error(function, e) from None

            return plain2
        if not charged and len(operands) == 1:
            (a,) = operands

            def plain1(fr: Frame) -> Any:
                x = a(fr)
                fr.cost += 1
                try:
                    return impl(x)
                except CelEvalError:
                    raise
                except Exception as e:
                    raise foreign_error(function, e) from None

            return plain1
        if len(operands) == 1:
            (a,) = operands

            def call1(fr: Frame) -> Any:
                x = a(fr)
                fr.cost += 1
                if charged:
                    fr.cost += size_of(x)
                    if fr.cost > fr.mark:
                        fr.tick()
                try:
                    return impl(x)
                except CelEvalError:
                    raise
                except Exception as e:
                    raise foreign_error(function, e) from None

            if not (self.track and function in RESULT_CHARGED):
                return call1
        if len(operands) == 2:
            a, b = operands

            def call2(fr: Frame) -> Any:
                x = a(fr)
                y = b(fr)
                fr.cost += 1
                if charged:
                    fr.cost += size_of(x, y)
                    if fr.cost > fr.mark:
                        fr.tick()
                try:
                    return impl(x, y)
                except CelEvalError:
                    raise
                except Exception as e:
                    raise foreign_error(function, e) from None

            if not (self.track and function in RESULT_CHARGED):
                return call2

        def call(fr: Frame) -> Any:
            args = [o(fr) for o in operands]
            fr.cost += 1
            if charged:
                fr.cost += size_of(*args)
                if fr.cost > fr.mark:
                    fr.tick()
            try:
                return impl(*args)
            except CelEvalError:
                raise
            except Exception as e:
                raise foreign_error(function, e) from None

        if self.track and function in RESULT_CHARGED:
            return (
                _charge_result(call)
                if len(operands) > 2
                else _charge_result(call2 if len(operands) == 2 else call1)
            )
        return call

    def _counted_equality(self, operands: list[Eval], *, negate: bool) -> Eval:
        a, b = operands
        return _counted_walk(a, b, rt.equals_within, flip=negate)

    def _counted_membership(self, operands: list[Eval]) -> Eval:
        a, b = operands
        return _counted_walk(a, b, lambda x, c, limit: rt.contains_within(c, x, limit))


def _counted_walk(
    a: Eval, b: Eval, walk: Callable[[Any, Any, int], tuple[bool, int]], *, flip: bool = False
) -> Eval:
    """A comparison that walks values (`==`, `!=`, `in`), charged 1 plus every element it
    walked; `walk(x, y, limit)` -> (result, walked) raises CelCostError past `limit`."""

    def counted(fr: Frame) -> bool:
        x = a(fr)
        y = b(fr)
        fr.cost += 1
        try:
            result, walked = walk(x, y, max(0, fr.limit - fr.cost))
        except CelCostError:
            fr.cost = fr.limit + 1
            raise fr.over_budget() from None
        fr.cost += walked
        return result is not flip

    return counted


def _compile_charged(pattern: Eval) -> Eval:
    """A regex call's pattern operand, charged regex.COMPILE_UNITS when it is not compiled yet
    (before the call compiles it; cost.compiles_pattern is the estimate's side)."""

    def compiled_pattern(fr: Frame) -> Any:
        value = pattern(fr)
        if type(value) is str and not is_compiled(value):
            fr.cost += COMPILE_UNITS
            if fr.cost > fr.mark:
                fr.tick()
        return value

    return compiled_pattern


def _charge_of(candidates: list, args: tuple) -> int:
    """The size-dependent charge of a call on these values (cost.call_charge at run time)."""
    sizes = ValueSizes(args)
    return max(ov.cost(sizes) for ov in candidates if ov.cost is not None)


def _index_charge(container: Any, key: Any) -> int:
    return rt.key_charge(key) if kind_of(container) == "map" else 0


def _find_all(operands: list[Eval], overload: Any) -> Eval:
    """findAll counted search by search against the budget left (functions.find_all_metered)."""

    def find_all(fr: Frame) -> Any:
        args = [o(fr) for o in operands]
        fr.cost += 1
        if not overload.accepts(args):
            rt.no_overload("findAll", *args)
        try:
            value, units = fn.find_all_metered(*args, budget=max(0, fr.limit - fr.cost))
        except CelCostError:
            fr.cost = fr.limit + 1
            raise fr.over_budget() from None
        except CelEvalError:
            raise
        except Exception as e:
            raise foreign_error("findAll", e) from None
        fr.cost += units
        if fr.cost > fr.mark:
            fr.tick()
        return value

    return find_all


def _charge_result(f: Eval) -> Eval:
    """`f` charged the traversal of the value it produces (see RESULT_CHARGED)."""

    def charged_result(fr: Frame) -> Any:
        value = f(fr)
        fr.cost += traversal(runtime_size(value))
        if fr.cost > fr.mark:
            fr.tick()
        return value

    return charged_result


def _input_path(node: ast.Select) -> tuple[str, list[str], list[str], str | None] | None:
    """(input, fields, owner type names, resource) when `node` is such a path, else None."""
    resource = None
    if node.operand.type.kind == "resources":
        resource = node.field
        node = node.operand  # type: ignore[assignment]
        if not isinstance(node, ast.Select):
            return None
    fields: list[str] = []
    owners: list[str] = []
    current: ast.Node = node
    while isinstance(current, ast.Select):
        owner = current.operand.type
        if owner.kind != "object" or not owner.fields:
            return None
        fields.append(current.field)
        owners.append(owner.name)
        current = current.operand
    if not isinstance(current, ast.Ident) or current.binding is not None:
        return None
    return current.name, fields[::-1], owners[::-1], resource


def foreign_error(where: str, e: Exception) -> CelEvalError:
    """A Python exception raised while evaluating (huge values, malformed inputs) as the CEL
    error it stands for, so `||`, `&&`, `all` and `exists` absorb it like any other."""
    if isinstance(e, CelEvalError):
        return e
    if isinstance(e, RecursionError):
        return CelEvalError("evaluation nested too deeply")
    if isinstance(e, MemoryError):
        return CelEvalError(f"{where}: out of memory")
    return CelEvalError(f"{where}: evaluation failed: {type(e).__name__}: {clip(str(e), 200)}")


def run(root: Eval, activation: Mapping[str, Any], *, cost_limit: int, nslots: int) -> Any:
    """Evaluates a compiled tree; every failure becomes a CelEvalError."""
    fr = Frame(activation, cost_limit, nslots)
    try:
        value = root(fr)
    except CelEvalError:
        raise
    except RecursionError:
        raise CelEvalError("evaluation nested too deeply") from None
    except Exception as e:  # malformed input values: report, never crash the caller
        raise foreign_error("expression", e) from None
    if fr.cost > cost_limit:
        raise fr.over_budget()
    return value
