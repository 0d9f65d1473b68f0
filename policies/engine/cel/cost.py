"""Static worst-case cost of a checked expression, Kubernetes-style.

Every evaluated node costs 1; a macro costs 1 + cost(range) + size(range) x (1 + cost(body));
functions and operators add what they read and produce, by the sizes of their operands: string
traversal ceil(len/10), a substring search the product of both traversals, a regex the text's
traversal x (pattern length / 4), a comparison of strings their common length, of lists and maps
every element walked (issue 27). Sizes come from the declared input bounds (`bounds`). One
formula serves both times: `Sizes` answers its questions from bounds here and from values in the
interpreter, so on inputs within the declared bounds the actual cost never exceeds this estimate.

Where schedweb differs from cel-go and Kubernetes (checker/cost.go, apiserver/pkg/cel/library/
cost.go): equality of lists and maps walks every element and compares strings at the leaves
(cel-go charges 0.1 per top-level entry); `in` on a list and indexOf on a list charge each
element's comparison; a map lookup charges its string key (hashing and the final comparison);
an empty regex pattern or separator counts as one unit of pattern (cel-go's product is 0 for
an empty pattern); findAll charges its result and every repeated search (see functions.find_all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import ast
from . import bounds as bd
from .bounds import Bound
from .functions import MAX_VALUE_SIZE
from .regex import COMPILE_UNITS
from .types import Type

_SIZED = ("string", "bytes")
_COLLECTIONS = ("list", "map", "resources")


@dataclass(frozen=True)
class Estimate:
    cost: int
    dominant: ast.Node | None  # the macro or call responsible for most of the cost
    bounds: dict[int, Bound]  # id(node) -> the size bound the estimate assumed for its value


def operand_size(bound: Bound, param: Type | None) -> int:
    """The size a cost function sees for an operand: characters or entries by parameter kind."""
    kind = param.kind if param is not None else "dyn"
    if kind in _SIZED:
        return bound.chars
    if kind in _COLLECTIONS or (kind == "object" and param is not None and param.fields):
        return bound.items
    if kind in ("dyn", "param", "error"):
        return max(bound.chars, bound.items)
    return 0


# Functions whose result can be much larger than their operands: charged, besides their own
# cost, the traversal of the value they produce (estimated from its bound, counted at run time).
RESULT_CHARGED = frozenset(("join", "replace", "split", "format"))
# Static kinds whose equality is one Python comparison of fixed cost.
_FLAT_KINDS = frozenset(("int", "uint", "double", "bool", "null_type", "type"))
_TEXT_KINDS = frozenset(("string", "bytes"))
_ANY_KINDS = frozenset(("dyn", "param", "error"))


def walks(static: Type) -> bool:
    """Whether comparing a value of this static type may walk nested lists and maps."""
    return (
        static.kind not in _FLAT_KINDS
        and static.kind not in _TEXT_KINDS
        and static.name != "Quantity"
    )


def _fixed(static: Type) -> bool:
    return static.kind in _FLAT_KINDS or static.name == "Quantity"


def comparison(function: str, static: Sequence[Type]) -> str | None:
    """How an operator reads its operands beyond its unit cost (None: it does not):

    - "walk": `==`/`!=` of lists, maps or dyn values, counted element by element, strings at the
      leaves (runtime.equals_within);
    - "leaf": `==`, `!=` or an ordering of strings or bytes: their common length;
    - "key": `in` a map, a map index: the key's characters (hashing, the final comparison);
    - "list": `in` a list: each element, compared with the item as equality would;
    - "any": `in` or an index on a dyn container: "key" or "list" by its run-time kind.
    """
    if function in ("_==_", "_!=_"):
        if _fixed(static[0]) or _fixed(static[1]):
            return None
        if walks(static[0]) and walks(static[1]):
            return "walk"
        return "leaf"
    if function in _ORDERINGS:
        if _fixed(static[0]) or _fixed(static[1]):
            return None
        return "leaf"
    if function == "@in":
        kind = static[1].kind
        if kind in ("map", "resources"):
            return "key" if not _fixed(static[0]) else None
        if kind == "list":
            return "list"
        return "any" if kind in _ANY_KINDS else None
    if function == "_[_]":
        kind = static[0].kind
        if _fixed(static[1]) or kind == "list":
            return None
        if kind == "map":
            return "key"
        return "any" if kind in _ANY_KINDS else None
    return None


_ORDERINGS = frozenset(("_<_", "_<=_", "_>_", "_>=_"))
REGEX_FUNCTIONS = frozenset(("matches", "find", "findAll"))


def compiles_pattern(node: ast.Call) -> bool:
    """Whether a regex call compiles its pattern when it runs (the pattern is not a literal,
    which the checker compiled): it is then charged regex.COMPILE_UNITS."""
    return (
        node.function in REGEX_FUNCTIONS
        and len(node.operands) >= 2
        and not isinstance(node.operands[1], ast.Literal)
    )


def _varies(node: ast.Node) -> bool:
    """Whether a value may differ between iterations of a macro (it reads a macro variable)."""
    return any(isinstance(n, ast.Ident) and n.binding is not None for n in ast.walk(node))


_COMPARE_CAP = 2**40


def compare_size(bound: Bound) -> int:
    """Units an equality may spend on a value of this bound: one per list element or map entry
    walked (nested ones included), the traversal of each map key looked up and of each string
    or bytes leaf compared. Unknown-size values (dyn) count their top level, as Kubernetes
    does: the run-time tracker counts the rest."""
    if bound is bd.DYN:
        return max(bound.items, bd.traversal(bound.chars))
    if bound.items == 0:
        return bd.traversal(bound.chars)
    key = bd.traversal(bound.key.chars) if bound.key is not None else 0
    inner = compare_size(bound.element())
    return min(_COMPARE_CAP, bound.items * (1 + key + inner))


def operator_charge(function: str, static: Sequence[Type], bounds: Sequence[Bound]) -> int:
    """The estimate of what `comparison` says the operator reads, from the operands' bounds."""
    how = comparison(function, static)
    if how is None:
        return 0
    if how == "walk":
        return min(compare_size(bounds[0]), compare_size(bounds[1]))
    if how == "leaf":
        return bd.traversal(min(bounds[0].chars, bounds[1].chars))
    key, container = (bounds[1], bounds[0]) if function == "_[_]" else (bounds[0], bounds[1])
    if how == "key" or function == "_[_]":
        return bd.traversal(key.chars)
    listed = min(_COMPARE_CAP, container.items * (1 + compare_size(key)))
    return listed if how == "list" else max(listed, bd.traversal(key.chars))


def runtime_size(value: object) -> int:
    """The run-time counterpart of `operand_size`: len() of strings, bytes, lists and maps."""
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return len(value)
    return 0


class BoundSizes:
    """What a cost formula may ask of its operands, answered at compile time from the bounds
    the estimate assumed (`ValueSizes` answers the same questions from values at run time)."""

    __slots__ = ("bounds", "literals", "params")

    def __init__(self, bounds: Sequence[Bound], params: Sequence[Type], literals=()) -> None:
        self.bounds = bounds
        self.params = params
        self.literals = literals  # int literals among the operands (findAll's limit)

    def size(self, i: int) -> int:
        """Characters of a string or bytes operand, entries of a list or map."""
        return operand_size(self.bounds[i], self.params[i])

    def compare(self, i: int) -> int:
        """What an equality walking operand i may spend (compare_size)."""
        return compare_size(self.bounds[i])

    def longest(self, i: int) -> int:
        """Characters of the longest string or bytes element of list operand i."""
        return self.bounds[i].element().chars

    def value(self, i: int) -> int | None:
        """An int operand's value when it is known (a literal), else None."""
        return self.literals[i] if i < len(self.literals) else None


class ValueSizes:
    """The run-time answers to BoundSizes' questions, from the operands' values."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[object]) -> None:
        self.values = values

    def size(self, i: int) -> int:
        return runtime_size(self.values[i])

    def compare(self, i: int) -> int:
        return value_compare_size(self.values[i], _COMPARE_CAP)

    def longest(self, i: int) -> int:
        items = self.values[i]
        if not isinstance(items, (list, tuple)):
            return 0
        return max((len(x) for x in items if isinstance(x, (str, bytes))), default=0)

    def value(self, i: int) -> int | None:
        v = self.values[i] if i < len(self.values) else None
        return v if type(v) is int else None


# What cost formulas (library.CostFn) are given: the same questions at both times.
Sizes = BoundSizes | ValueSizes


def value_compare_size(value: object, cap: int) -> int:
    """compare_size of a value: what an equality walking it may spend (at most `cap` + 1: the
    walk stops once it passes the cap)."""
    if isinstance(value, (str, bytes)):
        return bd.traversal(len(value))
    if not isinstance(value, (list, tuple, dict)):
        return 0
    total = 0
    stack = [value]
    while stack and total <= cap:
        v = stack.pop()
        if isinstance(v, dict):
            total += len(v)
            for k, item in v.items():
                if isinstance(k, str):
                    total += bd.traversal(len(k))
                stack.append(item)
        elif isinstance(v, (list, tuple)):
            total += len(v)
            stack.extend(v)
        elif isinstance(v, (str, bytes)):
            total += bd.traversal(len(v))
    return total


class Estimator:
    def __init__(
        self,
        variable_bounds: dict[str, Bound],
        field_bounds: dict[str, dict[str, Bound]] | None = None,
    ) -> None:
        self.variable_bounds = variable_bounds
        self.field_bounds = field_bounds or {}  # object type name -> field -> declared bound
        self.var_bounds: dict[int, Bound] = {}  # comprehension slot -> variable bound
        self.costs: dict[int, int] = {}  # id(node) -> subtree cost, for the dominant node
        self.bounds: dict[int, Bound] = {}
        # charged once per evaluation, not per iteration: compiling a pattern that is the same
        # in every iteration (the cache then holds it; see compiles_pattern)
        self.once = 0
        self.once_at: dict[int, int] = {}  # id(call) -> what of `once` it charged

    def run(self, root: ast.Node) -> Estimate:
        total, _ = self.visit(root)
        total += self.once
        return Estimate(total, self._dominant(root, total), self.bounds)

    def visit(self, node: ast.Node) -> tuple[int, Bound]:
        cost, bound = getattr(self, "_" + type(node).__name__.lower())(node)
        self.costs[id(node)] = cost
        self.bounds[id(node)] = bound
        return cost, bound

    def _dominant(self, root: ast.Node, total: int) -> ast.Node | None:
        best = None
        for node in ast.walk(root):
            heavy = isinstance(node, ast.Comprehension) or (
                isinstance(node, ast.Call) and any(ov.cost for ov in node.overloads)
            )
            cost = self.costs.get(id(node), 0) + self.once_at.get(id(node), 0)
            if heavy and cost * 2 >= total:
                best = node  # walk is parent-first, so the deepest such node wins
        return best

    def _literal(self, node: ast.Literal) -> tuple[int, Bound]:
        v = node.value
        if isinstance(v, (str, bytes)):
            return 1, bd.string(len(v))
        return 1, bd.SCALAR

    def _ident(self, node: ast.Ident) -> tuple[int, Bound]:
        if node.binding is not None:
            return 1, self.var_bounds.get(node.binding.slot, bd.DYN)
        if node.name in self.variable_bounds:
            return 1, self.variable_bounds[node.name]
        return 1, bd.for_type(node.type) if node.type is not None else bd.DYN

    def _select(self, node: ast.Select) -> tuple[int, Bound]:
        cost, bound = self.visit(node.operand)
        owner = node.operand.type
        if owner is not None and owner.kind == "object" and owner.fields:
            declared = self.field_bounds.get(owner.name or "", {}).get(node.field)
            return cost + 1, declared or bd.field_bound(owner, node.field)
        if owner is not None and owner.kind == "resources":
            return cost + 1, bd.SCALAR
        return cost + 1, bound.element()

    def _has(self, node: ast.Has) -> tuple[int, Bound]:
        cost, _ = self.visit(node.operand)
        return cost + 1, bd.SCALAR

    def _and(self, node: ast.And) -> tuple[int, Bound]:
        left, _ = self.visit(node.left)
        right, _ = self.visit(node.right)
        return 1 + left + right, bd.SCALAR

    _or = _and

    def _conditional(self, node: ast.Conditional) -> tuple[int, Bound]:
        cond, _ = self.visit(node.cond)
        a, ba = self.visit(node.if_true)
        b, bb = self.visit(node.if_false)
        return 1 + cond + max(a, b), bd.join(ba, bb)

    def _listlit(self, node: ast.ListLit) -> tuple[int, Bound]:
        cost, elem = 1, bd.SCALAR
        for e in node.elements:
            c, b = self.visit(e)
            cost += c
            elem = bd.join(elem, b)
        return cost, bd.list_of(len(node.elements), elem)

    def _maplit(self, node: ast.MapLit) -> tuple[int, Bound]:
        cost, key, value = 1, bd.SCALAR, bd.SCALAR
        for k, v in node.entries:
            ck, bk = self.visit(k)
            cv, bv = self.visit(v)
            cost += ck + cv
            key, value = bd.join(key, bk), bd.join(value, bv)
        return cost, bd.map_of(len(node.entries), key, value)

    def _comprehension(self, node: ast.Comprehension) -> tuple[int, Bound]:
        range_cost, rng = self.visit(node.iter_range)
        rtype = node.iter_range.type
        is_map = rtype is not None and rtype.kind in ("map", "resources")
        var = rng.keys() if is_map else rng.element()
        if rtype is not None and rtype.is_dyn:
            var = bd.DYN
        self.var_bounds[node.slot] = var
        body = 1
        result = bd.SCALAR
        if node.predicate is not None:
            body += self.visit(node.predicate)[0]
        if node.transform is not None:
            c, result = self.visit(node.transform)
            body += c
        cost = 1 + range_cost + rng.items * body
        if node.kind == "map":
            return cost, bd.list_of(rng.items, result)
        if node.kind == "filter":
            return cost, bd.list_of(rng.items, var)
        return cost, bd.SCALAR

    def _call(self, node: ast.Call) -> tuple[int, Bound]:
        cost = 1
        arg_bounds = []
        for operand in node.operands:
            c, b = self.visit(operand)
            cost += c
            arg_bounds.append(b)
        if not node.overloads:  # variadic math.greatest / math.least
            return cost + len(arg_bounds), bd.SCALAR
        literals = [
            o.value if isinstance(o, ast.Literal) and type(o.value) is int else None
            for o in node.operands
        ]
        cost += call_charge(node.overloads, lambda ov: BoundSizes(arg_bounds, ov.params, literals))
        cost += operator_charge(node.function, [o.type for o in node.operands], arg_bounds)
        if compiles_pattern(node):
            if _varies(node.operands[1]):
                cost += COMPILE_UNITS
            else:
                self.once += COMPILE_UNITS
                self.once_at[id(node)] = COMPILE_UNITS
        # With several candidates (dyn arguments) any of them may run: cover them all.
        result = bd.SCALAR
        for ov in node.overloads:
            if ov.bound is not None:
                result = bd.join(result, ov.bound(arg_bounds))
            elif _sized(ov.result) or _sized(node.type):
                result = bd.DYN
        if node.function in RESULT_CHARGED:
            # join() and replace() refuse results over MAX_VALUE_SIZE before building them.
            cost += bd.traversal(min(result.chars + result.items, MAX_VALUE_SIZE))
        return cost, result


def _sized(typ: Type | None) -> bool:
    return typ is not None and (
        typ.kind in _SIZED or typ.kind in _COLLECTIONS or typ.is_dyn or typ.kind == "param"
    )


def call_charge(overloads, sizes) -> int:
    """The size-dependent charge of a call: the largest over its candidate overloads, each
    formula fed `sizes(overload)` (BoundSizes at compile time, ValueSizes at run time)."""
    charge = 0
    for o in overloads:
        if o.cost is not None:
            charge = max(charge, o.cost(sizes(o)))
    return charge


def describe(node: ast.Node, *, limit: int = 40) -> str:
    """Short source-like text of a node, for messages ("node.object.spec...")."""
    text = _text(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(node: ast.Node) -> str:
    if isinstance(node, ast.Ident):
        return node.name
    if isinstance(node, ast.Select):
        return f"{_text(node.operand)}.{node.field}"
    if isinstance(node, ast.Literal):
        return repr(node.value)
    if isinstance(node, ast.Comprehension):
        return f"{_text(node.iter_range)}.{node.kind}(...)"
    if isinstance(node, ast.Call):
        if node.function == "_[_]":
            return f"{_text(node.args[0])}[{_text(node.args[1])}]"
        if node.target is not None:
            return f"{_text(node.target)}.{node.function}(...)"
        return f"{node.function}(...)"
    return "(...)"
