"""Static worst-case cost of a checked expression, Kubernetes-style.

Every evaluated node costs 1; a macro costs 1 + cost(range) + size(range) x (1 + cost(body));
library functions add a size-dependent charge (string traversal ceil(len/10), regex length, list
length). Sizes come from the declared input bounds (`bounds`). The interpreter counts the same
units at run time, so on inputs within the declared bounds the actual cost never exceeds this
estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ast
from . import bounds as bd
from .bounds import Bound
from .functions import MAX_VALUE_SIZE
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
# Static kinds whose equality is one Python comparison; others walk lists and maps.
_FLAT_KINDS = frozenset(("int", "uint", "double", "string", "bytes", "bool", "null_type", "type"))


def walks(static: Type) -> bool:
    """Whether comparing a value of this static type may walk nested lists and maps."""
    return static.kind not in _FLAT_KINDS and static.name != "Quantity"


_WALK_CAP = 2**40


def walk_size(bound: Bound) -> int:
    """Elements and entries an equality may walk in a value of this bound, nested ones
    included. Unknown-size values (dyn) count their top level, as Kubernetes does: the run-time
    tracker counts the rest."""
    if bound.items == 0:
        return 0
    if bound is bd.DYN:
        return bound.items
    inner = walk_size(bound.element())
    return min(_WALK_CAP, bound.items * (1 + inner))


def runtime_size(value: object) -> int:
    """The run-time counterpart of `operand_size`: len() of strings, bytes, lists and maps."""
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return len(value)
    return 0


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

    def run(self, root: ast.Node) -> Estimate:
        total, _ = self.visit(root)
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
            if heavy and self.costs.get(id(node), 0) * 2 >= total:
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
        cost += call_charge(node.overloads, arg_bounds, operand_size)
        cost += walk_charge(node, arg_bounds)
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


def walk_charge(node: ast.Call, arg_bounds: list[Bound]) -> int:
    """What `==`, `!=` and `in` may walk beyond their unit cost (see runtime.equals_within)."""
    static = [o.type for o in node.operands]
    if node.function in ("_==_", "_!=_") and walks(static[0]) and walks(static[1]):
        return min(walk_size(arg_bounds[0]), walk_size(arg_bounds[1]))
    if node.function == "@in" and walks(static[1]) and static[1].kind != "map":
        return walk_size(arg_bounds[1])
    return 0


def _sized(typ: Type | None) -> bool:
    return typ is not None and (
        typ.kind in _SIZED or typ.kind in _COLLECTIONS or typ.is_dyn or typ.kind == "param"
    )


def call_charge(overloads, operands, size_of) -> int:
    """The size-dependent charge of a call: the largest over its candidate overloads, each fed
    `size_of(operand, param)` (bounds at compile time, values at run time)."""
    charge = 0
    for o in overloads:
        if o.cost is not None:
            charge = max(charge, o.cost([size_of(x, p) for x, p in zip(operands, o.params)]))
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
