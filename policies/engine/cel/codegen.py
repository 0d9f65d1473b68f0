"""The fast path: a checked expression written out as one Python expression.

Static types drive the translation: `node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu`
becomes plain subscripts, one range check on the subtraction (int64 overflow) and a comparison.
Values whose static type is dyn go through the runtime helpers, which implement full CEL
semantics. The contract (see `Program.emit`): whenever CEL yields a value the emitted code yields
exactly that value; whenever CEL yields an error it raises. It may also raise where CEL would
absorb an error (`error || true`): the caller then re-runs the exact path.

Generated names start with `_cel` (globals `_cel<N>_<what>`, walrus temporaries `_celt<N>`,
macro variables `_celv<N>`), so they never collide with the caller's names.
"""

from __future__ import annotations

import functools
import io
import math
import re
import tokenize
from collections.abc import Callable
from typing import Any

from policies.engine.inputs import resource_key
from policies.engine.quantity import Quantity

from . import ast
from . import functions as fn
from . import runtime as rt
from .bounds import Bound
from .cost import (
    BoundSizes,
    compare_size,
    comparison,
    operand_size,
    operator_charge,
    value_compare_size,
    walks,
)
from .errors import CelCostError, CelEvalError
from .interpreter import Compiler, run, type_value_of
from .library import GENERIC, Overload, dispatch, reads
from .regex import RegexError, compile_regex
from .types import CLUSTER, TYPE_NAMES, Type
from .values import INT_MAX, INT_MIN, TypeValue, UInt

Interval = tuple[int, int]
FULL: Interval = (INT_MIN, INT_MAX)
_SIZE: Interval = (0, 2**48)  # lengths and counts: far below 2^63 on any real machine
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Python's parser refuses more than 200 nested parentheses; deeper output runs the exact path.
_MAX_NESTING = 150
_MAX_INLINE = 1024  # longest string or bytes literal written into generated source
_FOLDABLE = (int, float, str, bytes, bool, type(None), UInt, Quantity, TypeValue)
_SCALAR_EQ = frozenset(("int", "uint", "double", "string", "bytes", "bool", "null_type", "type"))
_ORDERED = frozenset(("int", "uint", "double", "string", "bytes", "bool"))
_SIZED_KINDS = frozenset(("string", "bytes", "list", "map", "resources"))
_TEXT_KINDS = frozenset(("string", "bytes"))
# Code that may begin with a literal (Python warns when a literal is subscripted by a string).
_LITERAL_START = re.compile(r"[\[('\"0-9-]|b['\"]|(?:True|False|None)\b")
_PY_ORDER = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_GENERIC_ORDER = {
    "_<_": rt.less,
    "_<=_": rt.less_equal,
    "_>_": rt.greater,
    "_>=_": rt.greater_equal,
}


class CodegenContext:
    """Where emitted code finds its inputs (`names`: "pod", "node", "cluster", "variables.<name>"
    -> Python expression) and collects the globals it needs (`globals`), unique across emits."""

    def __init__(
        self,
        names: dict[str, str],
        *,
        cost_limit: int | None = None,
        fold_constants: bool = True,
        hoist: tuple[str, ...] = (),
        track_cost: bool = True,
    ) -> None:
        self.names = dict(names)
        self.cost_limit = cost_limit
        # Precompute input-free subexpressions; tests turn it off to exercise the operators.
        self.fold_constants = fold_constants
        # Count the walks of ==, != and `in` over lists and maps (off only in the benchmark).
        self.track_cost = track_cost
        self.globals: dict[str, Any] = {}
        self._counter = 0
        self._by_identity: dict[int, str] = {}
        # Inputs whose infallible reads (see `hoisted`) become shared locals.
        self.hoist = frozenset(hoist)
        self.hoisted: dict[str, dict[str, str]] = {name: {} for name in hoist}
        self._hoisted_names: dict[str, str] = {}  # local -> input it reads from

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def constant(self, value: Any, hint: str) -> str:
        """A global name bound to `value` (functions and other shared objects are reused)."""
        key = id(value)
        shared = callable(value) or isinstance(value, (re.Pattern, frozenset))
        if shared and key in self._by_identity:
            return self._by_identity[key]
        name = f"_cel{self._next()}_{hint}"
        self.globals[name] = value
        if shared:
            self._by_identity[key] = name
        return name

    def temp(self) -> str:
        """A fresh name for a walrus temporary."""
        return f"_celt{self._next()}"

    def local(self) -> str:
        """A fresh name for a macro variable."""
        return f"_celv{self._next()}"

    def read(self, input_name: str, code: str) -> str:
        """A local holding `code`, a read of input `input_name` that cannot fail on a real view
        (a declared field of pod or node, a resource of a resource map). The caller assigns
        every `hoisted[input_name]` entry, in order, once per input value: a policy's rules then
        share one subscript where each used to repeat it."""
        reads = self.hoisted[input_name]
        local = reads.get(code)
        if local is None:
            local = reads[code] = f"_celh{self._next()}"
            self._hoisted_names[local] = input_name
        return local

    def hoisted_from(self, code: str) -> str | None:
        """The input a hoisted local reads from, or None if `code` is not one."""
        return self._hoisted_names.get(code)

    def input(self, name: str) -> str:
        try:
            code = self.names[name]
        except KeyError:
            raise ValueError(
                f"CodegenContext has no Python expression for CEL input '{name}'"
            ) from None
        return code if _IDENT.fullmatch(code) else f"({code})"


def emit_program(program: Any, ctx: CodegenContext) -> str:
    """The fast-path expression for a Program (see module docstring)."""
    if ctx.cost_limit is not None and program.cost > ctx.cost_limit:
        return _delegate(program, ctx, ctx.cost_limit)
    code = _Gen(ctx, program._bounds, budget=program.cost).emit_root(program._root)
    if _nesting(code) > _MAX_NESTING:
        # Without a limit from the caller, the estimate itself is the limit: an input larger
        # than declared then raises, and the caller's exact path decides with its own budget.
        limit = ctx.cost_limit if ctx.cost_limit is not None else program.cost
        return _delegate(program, ctx, limit)
    return code


def _delegate(program: Any, ctx: CodegenContext, cost_limit: int) -> str:
    """Code that runs the exact path: for costs that must be counted, or unwieldy nesting."""
    evaluate = functools.partial(program.evaluate, cost_limit=cost_limit)
    fname = ctx.constant(evaluate, "exact")
    entries = []
    variables = []
    for ref in sorted(program.references):
        if ref.startswith("variables."):
            variables.append(f"{ref[10:]!r}: {ctx.input(ref)}")
        else:
            entries.append(f"{ref!r}: {ctx.input(ref)}")
    if variables:
        entries.append(f"'variables': {{{', '.join(variables)}}}")
    return f"{fname}({{{', '.join(entries)}}})"


def _nesting(code: str) -> int:
    """How deeply brackets nest in Python source (brackets inside string literals ignored)."""
    depth = deepest = 0
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
    return deepest


def _raise_overflow() -> None:
    rt.overflow()


def _raise_index(i: int) -> None:
    rt.fail(f"index out of range: index {i}")


_CONCAT = frozenset(("add_string", "add_bytes", "add_list"))


class _TooLarge(Exception):
    """An input larger than its declared size: the exact path must count the cost."""


class _ExactOnly(Exception):
    """A construct the fast path leaves to the exact path (a bare `variables`)."""


def _exact_only() -> None:
    raise _ExactOnly


def _eq_within(a: Any, b: Any, limit: int) -> bool:
    """CEL equality that walks at most `limit` elements (what the estimate assumed)."""
    try:
        return rt.equals_within(a, b, limit)[0]
    except CelCostError:
        raise _TooLarge from None


def _in_within(item: Any, container: Any, limit: int) -> bool:
    try:
        return rt.contains_within(container, item, limit)[0]
    except CelCostError:
        raise _TooLarge from None


def _too_large() -> None:
    raise _TooLarge


def _within(value: Any, limit: int) -> Any:
    if isinstance(value, (str, bytes, list, tuple, dict)) and len(value) > limit:
        raise _TooLarge
    return value


def _within_kind(value: Any, chars: int, items: int) -> Any:
    if isinstance(value, (str, bytes)):
        if len(value) > chars:
            raise _TooLarge
    elif isinstance(value, (list, tuple, dict)) and len(value) > items:
        raise _TooLarge
    return value


def _within_compare(value: Any, limit: int) -> Any:
    if value_compare_size(value, limit) > limit:
        raise _TooLarge
    return value


def _within_list(value: Any, items: int, chars: int) -> Any:
    """A list no longer than `items` whose strings are no longer than `chars` (isSorted)."""
    if isinstance(value, (list, tuple)) and (
        len(value) > items or any(isinstance(x, (str, bytes)) and len(x) > chars for x in value)
    ):
        raise _TooLarge
    return value


def _findall_within(s: Any, pattern: Any, *rest: Any) -> list[str]:
    """findAll counting its searches against `limit`, what the estimate allowed it."""
    *n, limit = rest
    try:
        return fn.find_all_metered(s, pattern, *n, budget=limit)[0]
    except CelCostError:
        raise _TooLarge from None


def _range_within(value: Any, limit: int) -> Any:
    rt.iter_range(value)
    if len(value) > limit:
        raise _TooLarge
    return value


def _strict_bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    rt.fail(f"expected a bool, got {rt.type_name(value)}")


def _make_map(*pairs: tuple[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in pairs:
        if rt.kind_of(k) not in ("int", "uint", "bool", "string"):
            rt.fail(f"map keys must be int, uint, bool or string, got {rt.type_name(k)}")
        if rt.map_find(out, k)[0] or k in out:
            rt.fail(f"duplicate map key {rt.format_value(k)}")
        out[k] = v
    return out


def _raiser(error: CelEvalError) -> Callable[[], None]:
    def raise_error() -> None:
        raise CelEvalError(error.message)

    return raise_error


class _Gen:
    def __init__(self, ctx: CodegenContext, bounds: dict[int, Bound], *, budget: int) -> None:
        self.ctx = ctx
        self.budget = budget  # constant folding runs under the expression's estimate
        self.locals: dict[int, str] = {}  # comprehension slot -> Python variable
        self.intervals: dict[int, Interval] = {}
        self.constants: set[int] = set()  # ids of input-free nodes, filled by emit_root
        self.bounds = bounds  # the size bounds the cost estimate assumed, by node id
        # node id -> size its value must not exceed, or (chars, items) for a dyn value
        self.guards: dict[int, int | tuple[int, int]] = {}

    def emit_root(self, root: ast.Node) -> str:
        _mark_constants(root, self.constants)
        return self.emit(root)

    def g(self, value: Any, hint: str) -> str:
        return self.ctx.constant(value, hint)

    # -- entry -----------------------------------------------------------------------------------
    def emit(self, node: ast.Node) -> str:
        code = self.fold(node)
        if code is None:
            code = getattr(self, "_" + type(node).__name__.lower())(node)
        limit = self.guards.get(id(node))
        if limit is not None:
            code = self.within(node, code, limit)
        return code

    # -- size guards --------------------------------------------------------------------------------
    # The fast path does not count cost: the estimate, computed from declared input sizes, is
    # within the budget. An input larger than declared could still make the actual cost pass
    # the budget, so wherever the estimate relied on a size - a macro's range, the operands of
    # a size-charged function - values that depend on inputs are checked against that size, and
    # the fast path raises (the exact path then counts) if one is larger.
    def within(self, node: ast.Node, code: str, limit: Any) -> str:
        if isinstance(limit, tuple) and isinstance(limit[0], str):
            helper = _within_compare if limit[0] == "compare" else _within_list
            args = ", ".join(map(str, limit[1:]))
            return f"{self.g(helper, 'within')}({code}, {args})"
        if isinstance(limit, tuple):
            return f"{self.g(_within_kind, 'within')}({code}, {limit[0]}, {limit[1]})"
        if node.type.kind in _SIZED_KINDS:
            t = self.ctx.temp()
            return f"({t} if len({t} := {code}) <= {limit} else {self.g(_too_large, 'toolarge')}())"
        return f"{self.g(_within, 'within')}({code}, {limit})"

    def plan_guards(self, node: ast.Call) -> None:
        self.plan_operator_guards(node)
        charged = [ov for ov in node.overloads if ov.cost is not None]
        if not charged or id(node) in self.constants or self.metered(node):
            return
        operands = node.operands
        wanted: dict[int, set[str]] = {}
        for ov in charged:
            for i, what in reads(ov.cost).items():  # type: ignore[arg-type]
                wanted.setdefault(i % len(operands), set()).add(what)
        for i, whats in wanted.items():
            operand = operands[i]
            bound = self.bounds.get(id(operand))
            if id(operand) in self.constants or bound is None:
                continue
            if operand.type.kind not in _SIZED_KINDS and not operand.type.is_dyn:
                continue
            if "longest" in whats:  # isSorted, min, max: its length and its longest element
                self.guards[id(operand)] = ("list", bound.items, bound.element().chars)
            elif "compare" in whats and operand.type.kind not in _TEXT_KINDS:
                self.guards[id(operand)] = ("compare", compare_size(bound))
            elif operand.type.is_dyn:
                # several overloads may run, each measuring its own kind: check the value by
                # its kind against the bound (a string against chars, a list against items)
                self.guards[id(operand)] = (bound.chars, bound.items)
            else:
                self.guards[id(operand)] = min(operand_size(bound, ov.params[i]) for ov in charged)

    def metered(self, node: ast.Call) -> bool:
        """findAll counts its own searches against the estimate (see find_all): no guards."""
        return (
            node.function == "findAll"
            and self.ctx.track_cost
            and len(node.overloads) == 1
            and not any(o.type.is_dyn for o in node.operands)
        )

    def plan_operator_guards(self, node: ast.Call) -> None:
        """Guards for the operators the fast path runs uncounted (cost.comparison): a string
        comparison reads at most the shorter operand, so the operand with the smaller bound is
        checked; a map lookup reads its key; `in` on a list in Python reads the list and the
        item. Nothing is checked when a side is a constant (its size is known) or the
        comparison is counted anyway (lists and maps walked by _eq_within / _in_within)."""
        if not self.ctx.track_cost or id(node) in self.constants:
            return
        static = [o.type for o in node.operands]
        how = comparison(node.function, static)
        if how in (None, "walk") or (how == "any" and node.function == "@in"):
            return  # counted (_eq_within, _in_within)
        operands = node.operands
        if how == "leaf":
            if any(id(o) in self.constants for o in operands):
                return
            bounds = [self.bounds.get(id(o)) for o in operands]
            if None in bounds:
                return
            side = 0 if bounds[0].chars <= bounds[1].chars else 1
            self.guard_chars(operands[side], bounds[side])
            return
        key = operands[1] if node.function == "_[_]" else operands[0]
        if how == "list":
            if not self.python_in(node):
                return  # counted by _in_within
            container = operands[1]
            bound = self.bounds.get(id(container))
            if id(container) not in self.constants and bound is not None:
                self.guards[id(container)] = bound.items
        if id(key) not in self.constants and key.type.kind in _TEXT_KINDS | {"dyn"}:
            bound = self.bounds.get(id(key))
            if bound is not None:
                self.guard_chars(key, bound)

    def guard_chars(self, operand: ast.Node, bound: Bound) -> None:
        if operand.type.kind in _TEXT_KINDS:
            self.guards[id(operand)] = bound.chars
        elif operand.type.is_dyn:
            self.guards[id(operand)] = (bound.chars, bound.items)

    def python_in(self, node: ast.Call) -> bool:
        """Whether `membership` writes `in` on a list as Python's own (strings or ints)."""
        item_t, cont_t = (o.type for o in node.operands)
        return cont_t.kind == "list" and item_t.kind in ("string", "int") and cont_t.elem == item_t

    def interval(self, node: ast.Node) -> Interval:
        return self.intervals.get(id(node), FULL)

    def fold(self, node: ast.Node) -> str | None:
        """Constant subtrees (no inputs) become precomputed scalars, or a raising call."""
        if not self.ctx.fold_constants or isinstance(node, ast.Literal):
            return None
        if id(node) not in self.constants:
            return None
        try:
            value = run(
                Compiler().compile(node), {}, cost_limit=self.budget, nslots=_max_slot(node) + 1
            )
        except CelEvalError as e:
            return f"{self.g(_raiser(e), 'raise')}()"
        if type(value) in (list, dict):
            # Kept by name (never written out): the subtree is evaluated once, not again for
            # each constant child. Emitted code never mutates a value it did not build.
            return self.g(value, "k")
        if type(value) not in _FOLDABLE:
            return None
        if type(value) is int:
            self.intervals[id(node)] = (value, value)
        return self.literal(value)

    def literal(self, value: Any) -> str:
        tv = type(value)
        if tv is bool or value is None:
            return repr(value)
        if tv is int:
            return repr(value) if value >= 0 else f"({value})"
        if tv is float:
            if math.isfinite(value) and value != 0.0:
                return repr(value) if value > 0 else f"({value!r})"
            return self.g(value, "f")
        if tv is str or tv is bytes:
            # Large values stay out of the generated source, referenced by name.
            return repr(value) if len(value) <= _MAX_INLINE else self.g(value, "s")
        return self.g(value, "k")

    # -- leaves --------------------------------------------------------------------------------
    def _literal(self, node: ast.Literal) -> str:
        if type(node.value) is int:
            self.intervals[id(node)] = (node.value, node.value)
        return self.literal(node.value)

    def _ident(self, node: ast.Ident) -> str:
        if node.binding is not None:
            return self.locals[node.binding.slot]
        if node.type is not None and node.type.kind == "type" and node.name in TYPE_NAMES:
            return self.g(type_value_of(TYPE_NAMES[node.name]), "type")
        if node.name == "variables" and "variables" not in self.ctx.names:
            # All variables as one map: rare, and as large as the policy - the exact path
            # computes it lazily instead of a map literal in generated source.
            return f"{self.g(_exact_only, 'exactonly')}()"
        return self.ctx.input(node.name)

    # -- selection -----------------------------------------------------------------------------
    def _select(self, node: ast.Select) -> str:
        # Objects, resources, maps and dyn values are all dicts at run time: a subscript raises
        # where CEL fails (missing key, not a map), and ResourceMap reads absent keys as 0.
        operand = node.operand
        if (
            isinstance(operand, ast.Ident)
            and operand.binding is None
            and operand.name == "variables"
            and "variables" not in self.ctx.names
        ):
            return self.ctx.input(f"variables.{node.field}")
        if (
            isinstance(operand, ast.Ident)
            and operand.binding is None
            and operand.name in self.ctx.hoist
            and operand.type.kind == "object"
            and node.field in operand.type.fields
        ):
            # Views carry every declared field, so this read cannot fail on a real one (on a
            # hand-made dict it raises where used, and the caller runs the exact path).
            return self.ctx.read(operand.name, f"{self.ctx.input(operand.name)}[{node.field!r}]")
        code = self.emit(operand)
        source = self.ctx.hoisted_from(code)
        if source is not None and operand.type.kind == "resources":
            return self.ctx.read(source, f"{code}[{node.field!r}]")  # absent resources read 0
        if _LITERAL_START.match(code):
            # Python warns (SyntaxWarning) about subscripting a literal with a string.
            return f"{self.g(rt.select, 'select')}({code}, {node.field!r})"
        return f"{code}[{node.field!r}]"

    def _has(self, node: ast.Has) -> str:
        owner = node.operand.type
        if owner.kind == "object" and owner.fields:
            if _infallible(node.operand):
                return "True"
            return f"({self.emit(node.operand)} is not None or True)"
        if owner.kind in ("map", "resources"):
            return f"({node.field!r} in {self.emit(node.operand)})"
        return f"{self.g(rt.has_field, 'has')}({self.emit(node.operand)}, {node.field!r})"

    # -- logic -----------------------------------------------------------------------------------
    def boolean(self, node: ast.Node) -> str:
        code = self.emit(node)
        if node.type.is_dyn:
            return f"{self.g(_strict_bool, 'bool')}({code})"
        return code

    def _and(self, node: ast.And) -> str:
        return f"({self.boolean(node.left)} and {self.boolean(node.right)})"

    def _or(self, node: ast.Or) -> str:
        return f"({self.boolean(node.left)} or {self.boolean(node.right)})"

    def _conditional(self, node: ast.Conditional) -> str:
        a, b = self.emit(node.if_true), self.emit(node.if_false)
        if node.type.kind == "int":
            lo1, hi1 = self.interval(node.if_true)
            lo2, hi2 = self.interval(node.if_false)
            self.intervals[id(node)] = (min(lo1, lo2), max(hi1, hi2))
        return f"({a} if {self.boolean(node.cond)} else {b})"

    # -- literals ------------------------------------------------------------------------------
    def _listlit(self, node: ast.ListLit) -> str:
        return "[" + ", ".join(self.emit(e) for e in node.elements) + "]"

    def _maplit(self, node: ast.MapLit) -> str:
        keys_constant = all(isinstance(k, ast.Literal) for k, _ in node.entries)
        if keys_constant:  # the checker rejected bad kinds and duplicates already
            return "{" + ", ".join(f"{self.emit(k)}: {self.emit(v)}" for k, v in node.entries) + "}"
        pairs = ", ".join(f"({self.emit(k)}, {self.emit(v)})" for k, v in node.entries)
        return f"{self.g(_make_map, 'map')}({pairs})"

    # -- macros ----------------------------------------------------------------------------------
    def _comprehension(self, node: ast.Comprehension) -> str:
        rng = self.emit(node.iter_range)
        bound = self.bounds.get(id(node.iter_range))
        trusted = id(node.iter_range) in self.constants or bound is None
        if not trusted:
            # the estimate assumed at most `bound.items` iterations (see within())
            rng = f"{self.g(_range_within, 'range')}({rng}, {bound.items})"
        elif node.iter_range.type.is_dyn:
            rng = f"{self.g(rt.iter_range, 'range')}({rng})"
        var = self.ctx.local()
        self.locals[node.slot] = var
        pred = self.boolean(node.predicate) if node.predicate is not None else None
        transform = self.emit(node.transform) if node.transform is not None else None
        hoisted = None
        if ":=" in rng:
            # Python forbids assignment expressions in a comprehension's iterable: bind the range
            # to a temporary first.
            hoisted = self.ctx.temp()
            rng, hoisted_code = hoisted, rng
        kind = node.kind
        if kind == "all":
            code = f"all({pred} for {var} in {rng})"
        elif kind == "exists":
            code = f"any({pred} for {var} in {rng})"
        elif kind == "exists_one":
            code = f"(sum(1 for {var} in {rng} if {pred}) == 1)"
        elif kind == "filter":
            code = f"[{var} for {var} in {rng} if {pred}]"
        elif pred is not None:
            code = f"[{transform} for {var} in {rng} if {pred}]"
        else:
            code = f"[{transform} for {var} in {rng}]"
        if hoisted is not None:
            code = f"({code} if (({hoisted} := {hoisted_code}) is not None or True) else None)"
        return code

    # -- calls ------------------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> str:
        self.plan_guards(node)
        function = node.function
        operands = node.operands
        static = [o.type for o in operands]
        dyn = any(s.is_dyn for s in static)
        candidates: list[Overload] = node.overloads

        if function in ("math.greatest", "math.least"):
            return self.extreme(node, static)
        if candidates and candidates[0].id == "index_resources":
            return self.resource_index(node)
        if function == "type" and static[0].kind == "object" and static[0].fields:
            value = self.g(TypeValue(static[0].name), "type")
            if _infallible(operands[0]):
                return value
            return f"({self.emit(operands[0])}, {value})[1]"
        if function == "matches" and isinstance(operands[1], ast.Literal) and not dyn:
            try:
                pattern = compile_regex(operands[1].value)
            except RegexError:
                pass
            else:
                return f"({self.g(pattern, 're')}.search({self.emit(operands[0])}) is not None)"

        if self.metered(node):
            return self.find_all(node)
        if dyn or len(candidates) != 1:
            return self.generic(node)
        ov = candidates[0]
        special = getattr(self, "op_" + ov.id, None)
        if special is not None:
            return special(node, operands)
        if function in ("_==_", "_!=_"):
            return self.equality(node, operands, static)
        if function in _PY_ORDER:
            return self.ordering(node, operands, static)
        if function == "@in":
            return self.membership(node, operands, static)
        args = [self.emit(o) for o in operands]
        if ov.id in _CONCAT and not self.within_value_size(node):
            # a result the estimate lets grow past MAX_VALUE_SIZE: fn.concat refuses it
            return f"{self.g(ov.impl, 'concat')}({', '.join(args)})"
        if ov.emit is not None:
            return ov.emit.format(*args)
        self.note_result_interval(node, ov)
        return f"{self.g(ov.impl, _hint(ov.function))}({', '.join(args)})"

    def find_all(self, node: ast.Call) -> str:
        """findAll counted search by search against what the estimate charged this call: an
        input larger than declared hands the node to the exact path (_TooLarge)."""
        ov = node.overloads[0]
        bounds = [self.bounds.get(id(o)) for o in node.operands]
        if None in bounds:
            limit = self.budget
        else:
            literals = [
                o.value if isinstance(o, ast.Literal) and type(o.value) is int else None
                for o in node.operands
            ]
            limit = ov.cost(BoundSizes(bounds, ov.params, literals))  # type: ignore[misc]
        args = ", ".join(self.emit(o) for o in node.operands)
        return f"{self.g(_findall_within, 'findall')}({args}, {limit})"

    def within_value_size(self, node: ast.Node) -> bool:
        """Whether the estimate bounds `node`'s value to MAX_VALUE_SIZE characters or items
        (its operands are guarded to their bounds: see plan_guards)."""
        bound = self.bounds.get(id(node))
        return bound is not None and max(bound.chars, bound.items) <= fn.MAX_VALUE_SIZE

    def note_result_interval(self, node: ast.Call, ov: Overload) -> None:
        if ov.function in ("countPods", "countPodsOnNode", "countPodsInDomain", "nodeCount"):
            self.intervals[id(node)] = _SIZE  # functions._count enforces it
        elif ov.function in ("indexOf", "lastIndexOf"):
            self.intervals[id(node)] = (-1, _SIZE[1])
        elif ov.function in ("math.sign", "compareTo", "sign") and node.type.kind == "int":
            self.intervals[id(node)] = (-1, 1)

    def generic(self, node: ast.Call) -> str:
        """Full runtime dispatch on the operands' runtime kinds (dyn operands)."""
        function = node.function
        static = [o.type for o in node.operands]
        if self.ctx.track_cost and function in ("_==_", "_!=_", "@in") and len(static) == 2:
            if function == "@in" and walks(static[1]) and static[1].kind != "map":
                return self.membership(node, node.operands, static)
            if function != "@in" and walks(static[0]) and walks(static[1]):
                return self.equality(node, node.operands, static)
        args = ", ".join(self.emit(o) for o in node.operands)
        if function in GENERIC:
            return f"{self.g(GENERIC[function], _hint(function))}({args})"
        helper = functools.partial(_dispatch_args, function, tuple(node.overloads))
        return f"{self.g(helper, _hint(function))}({args})"

    def extreme(self, node: ast.Call, static: list[Type]) -> str:
        greatest = node.function == "math.greatest"
        args = [self.emit(o) for o in node.operands]
        kinds = {s.kind for s in static}
        if len(args) == 1 and static[0].kind == "list":
            elem = static[0].elem.kind
            if elem in ("int", "uint", "double"):
                return f"{'max' if greatest else 'min'}({args[0]})"
        elif len(kinds) == 1 and kinds <= {"int", "uint", "double"}:
            if kinds == {"int"}:
                ivs = [self.interval(o) for o in node.operands]
                pick = max if greatest else min
                self.intervals[id(node)] = (pick(i[0] for i in ivs), pick(i[1] for i in ivs))
            if len(args) == 1:
                return args[0]
            # Python's max/min keep the first of equal values and skip NaN the way CEL does.
            return f"{'max' if greatest else 'min'}({', '.join(args)})"
        impl = fn.math_greatest if greatest else fn.math_least
        return f"{self.g(impl, 'extreme')}({', '.join(args)})"

    def resource_index(self, node: ast.Call) -> str:
        r, key = node.args[0], node.args[1]
        rc = self.emit(r)
        if isinstance(key, ast.Literal) and isinstance(key.value, str):
            source = self.ctx.hoisted_from(rc)
            if source is not None:  # a ResourceMap reads an absent resource as 0: no failure
                return self.ctx.read(source, f"{rc}[{key.value!r}]")
            return f"{rc}[{key.value!r}]"
        kc = self.emit(key)
        if key.type.is_dyn:
            kc = f"{self.g(_resource_name, 'rkey')}({kc})"
        else:
            kc = f"{self.g(resource_key, 'rkey')}({kc})"
        return f"{self.g(rt.resource_get, 'resource')}({rc}, {kc})"

    # -- equality, ordering, membership ---------------------------------------------------------
    def equality(self, node: ast.Call, operands: list[ast.Node], static: list[Type]) -> str:
        negate = node.function == "_!=_"
        a, b = (self.emit(o) for o in operands)
        ka, kb = static[0].kind, static[1].kind
        if ka == "null_type" or kb == "null_type":
            other = b if ka == "null_type" else a
            return f"({other} is {'not ' if negate else ''}None)"
        if ka == kb and ka in _SCALAR_EQ:
            return f"({a} {'!=' if negate else '=='} {b})"
        if static[0] == static[1] and static[0].name == "Quantity":
            return f"({a} {'!=' if negate else '=='} {b})"
        if self.ctx.track_cost and walks(static[0]) and walks(static[1]):
            limit = min(self.walk_limit(operands[0]), self.walk_limit(operands[1]))
            code = f"{self.g(_eq_within, 'eq')}({a}, {b}, {limit})"
            return f"(not {code})" if negate else code
        helper = self.g(rt.not_equals if negate else rt.equals, "ne" if negate else "eq")
        return f"{helper}({a}, {b})"

    def ordering(self, node: ast.Call, operands: list[ast.Node], static: list[Type]) -> str:
        a, b = (self.emit(o) for o in operands)
        if static[0].kind == static[1].kind and static[0].kind in _ORDERED:
            return f"({a} {_PY_ORDER[node.function]} {b})"
        return f"{self.g(_GENERIC_ORDER[node.function], 'cmp')}({a}, {b})"

    def membership(self, node: ast.Call, operands: list[ast.Node], static: list[Type]) -> str:
        item_node, container_node = operands
        item_t, cont_t = static
        item = self.emit(item_node)
        if cont_t.kind in ("map", "resources"):
            if item_t.kind == "string" and cont_t.key.kind == "string":
                return f"({item} in {self.emit(container_node)})"
        elif cont_t.kind == "list" and item_t.kind in ("string", "int") and cont_t.elem == item_t:
            if isinstance(container_node, ast.ListLit) and all(
                isinstance(e, ast.Literal) for e in container_node.elements
            ):
                values = frozenset(e.value for e in container_node.elements)
                return f"({item} in {self.g(values, 'set')})"
            return f"({item} in {self.emit(container_node)})"
        if self.ctx.track_cost and walks(cont_t) and cont_t.kind != "map":
            bounds = [self.bounds.get(id(o)) for o in operands]
            limit = 0 if None in bounds else operator_charge("@in", static, bounds)
            return f"{self.g(_in_within, 'in')}({item}, {self.emit(container_node)}, {limit})"
        return f"{self.g(GENERIC['@in'], 'in')}({item}, {self.emit(container_node)})"

    def walk_limit(self, node: ast.Node) -> int:
        """What the estimate let an equality spend walking `node`'s value."""
        bound = self.bounds.get(id(node))
        return compare_size(bound) if bound is not None else 0

    # -- int arithmetic with overflow checks (special forms by overload id) -----------------------
    def checked(self, node: ast.Node, code: str, lo: int, hi: int) -> str:
        if lo >= INT_MIN and hi <= INT_MAX:
            self.intervals[id(node)] = (lo, hi)
            return f"({code})"
        t = self.ctx.temp()
        ovf = self.g(_raise_overflow, "overflow")
        return f"({t} if {INT_MIN} <= ({t} := {code}) <= {INT_MAX} else {ovf}())"

    def op_add_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        a, b = (self.emit(o) for o in operands)
        (l1, h1), (l2, h2) = self.interval(operands[0]), self.interval(operands[1])
        return self.checked(node, f"{a} + {b}", l1 + l2, h1 + h2)

    def op_subtract_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        a, b = (self.emit(o) for o in operands)
        (l1, h1), (l2, h2) = self.interval(operands[0]), self.interval(operands[1])
        return self.checked(node, f"{a} - {b}", l1 - h2, h1 - l2)

    def op_multiply_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        a, b = (self.emit(o) for o in operands)
        (l1, h1), (l2, h2) = self.interval(operands[0]), self.interval(operands[1])
        products = (l1 * l2, l1 * h2, h1 * l2, h1 * h2)
        return self.checked(node, f"{a} * {b}", min(products), max(products))

    def op_divide_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        return self.truncating(node, operands, "//", rt.div_int)

    def op_modulo_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        return self.truncating(node, operands, "%", rt.mod_int)

    def truncating(self, node: ast.Call, operands: list[ast.Node], op: str, exact: Any) -> str:
        """Python's // and % floor; CEL truncates toward zero. They agree when the dividend is
        >= 0 and the divisor > 0, so that case is inline and the rest calls the runtime."""
        a, b = (self.emit(o) for o in operands)
        (l1, h1), (l2, h2) = self.interval(operands[0]), self.interval(operands[1])
        helper = self.g(exact, "div" if op == "//" else "mod")
        if l2 > 0 and l2 == h2:  # a positive constant divisor
            c = l2
            if op == "//":
                self.intervals[id(node)] = (_trunc_div(l1, c), _trunc_div(h1, c))
            else:
                self.intervals[id(node)] = (0 if l1 >= 0 else -(c - 1), c - 1)
            if l1 >= 0:
                return f"({a} {op} {b})"
            t = self.ctx.temp()
            return f"({t} {op} {b} if ({t} := {a}) >= 0 else {helper}({t}, {b}))"
        t1, t2 = self.ctx.temp(), self.ctx.temp()
        return f"({t1} {op} {t2} if (({t1} := {a}) >= 0) & (({t2} := {b}) > 0) else {helper}({t1}, {t2}))"

    def op_negate_int(self, node: ast.Call, operands: list[ast.Node]) -> str:
        a = self.emit(operands[0])
        lo, hi = self.interval(operands[0])
        if lo > INT_MIN:
            self.intervals[id(node)] = (-hi, -lo)
            return f"(-{a})"
        return f"{self.g(rt.neg_int, 'neg')}({a})"

    def op_index_list(self, node: ast.Call, operands: list[ast.Node]) -> str:
        items, index = operands
        ic = self.emit(index)
        lo, _ = self.interval(index)
        lc = self.emit(items)
        if lo >= 0:
            return f"{lc}[{ic}]"
        # A negative index would count from the end in Python; CEL reports an error instead.
        t = self.ctx.temp()
        return f"({lc}[{t}] if ({t} := {ic}) >= 0 else {self.g(_raise_index, 'badindex')}({t}))"

    def op_index_map(self, node: ast.Call, operands: list[ast.Node]) -> str:
        m, k = operands
        key_kind, map_key_kind = k.type.kind, m.type.as_map().key.kind
        # Python's dict would let True find the key 1; only same-kind keys are looked up directly.
        if key_kind == "string" or (
            key_kind in ("int", "uint") and map_key_kind in ("int", "uint")
        ):
            return f"{self.emit(m)}[{self.emit(k)}]"
        return f"{self.g(rt.map_get, 'get')}({self.emit(m)}, {self.emit(k)})"

    def op_size_string(self, node: ast.Call, operands: list[ast.Node]) -> str:
        self.intervals[id(node)] = _SIZE
        return f"len({self.emit(operands[0])})"

    op_size_bytes = op_size_list = op_size_map = op_size_string
    op_size_string_method = op_size_bytes_method = op_size_list_method = op_size_map_method = (
        op_size_string
    )

    def op_type(self, node: ast.Call, operands: list[ast.Node]) -> str:
        return f"{self.g(rt.type_value, 'type')}({self.emit(operands[0])})"


def _trunc_div(a: int, c: int) -> int:
    return a // c if a >= 0 else -(-a // c)


def _dispatch_args(function: str, candidates: tuple[Overload, ...], *args: Any) -> Any:
    return dispatch(function, candidates, args)


def _resource_name(key: Any) -> str:
    if type(key) is not str:
        rt.fail(f"resource names are strings, got {rt.type_name(key)}")
    return resource_key(key)


def _hint(function: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9]", "", function.split(".")[-1])
    return cleaned or "op"


def _mark_constants(node: ast.Node, constants: set[int]) -> tuple[bool, set[int]]:
    """Adds the ids of input-free subtrees to `constants`. Returns (depends on an input,
    slots of the macros whose variables the subtree uses): a subtree is constant when it uses
    no input and no variable of an enclosing macro."""
    uses_input = False
    free: set[int] = set()
    if isinstance(node, ast.Ident):
        if node.binding is not None:
            free.add(node.binding.slot)
        elif not (node.type is not None and node.type.kind == "type" and node.name in TYPE_NAMES):
            uses_input = True
    for child in node.children():
        child_input, child_free = _mark_constants(child, constants)
        uses_input = uses_input or child_input
        free |= child_free
    if isinstance(node, ast.Comprehension):
        free.discard(node.slot)
    if isinstance(node, ast.Call) and node.target is not None and node.target.type == CLUSTER:
        uses_input = True
    if not uses_input and not free:
        constants.add(id(node))
    return uses_input, free


def _max_slot(node: ast.Node) -> int:
    return max((n.slot for n in ast.walk(node) if isinstance(n, ast.Comprehension)), default=0)


def _infallible(node: ast.Node) -> bool:
    """An input or a field path over inputs' declared fields: evaluating it cannot fail."""
    while (
        isinstance(node, ast.Select)
        and node.operand.type.kind == "object"
        and node.operand.type.fields
    ):
        node = node.operand
    return isinstance(node, ast.Ident) and node.binding is None
