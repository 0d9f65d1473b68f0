"""Declarations of every CEL function and operator: overloads with static types, the runtime
implementation, the fast-path form, the cost and the result's size bound.

A fast-path form (`emit`) is a Python expression template over the operands' code, `{0}` being
the receiver or first argument; each placeholder appears at most once so every operand is
evaluated exactly once. Without one the code generator calls `impl`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

from . import bounds as bd
from . import functions as fn
from . import runtime as rt
from . import types as t
from .bounds import Bound
from .cost import Sizes
from .types import (
    BOOL,
    BYTES,
    CLUSTER,
    DOUBLE,
    DYN,
    INT,
    QUANTITY,
    STRING,
    UINT,
    A,
    B,
    Type,
    list_of,
    map_of,
)
from .values import kind_of

CostFn = Callable[["Sizes"], int]
BoundFn = Callable[[Sequence[Bound]], Bound]


def runtime_kind(typ: Type) -> str:
    """The `values.kind_of` a runtime value of static type `typ` has ("any" if unknown)."""
    if typ.kind in ("dyn", "param", "error"):
        return "any"
    if typ.kind in ("map", "resources") or (typ.kind == "object" and typ.fields):
        return "map"
    if typ == QUANTITY:
        return "quantity"
    if typ == CLUSTER:
        return "object"
    if typ.kind == "null_type":
        return "null"
    if typ.kind == "type":
        return "type"
    return typ.kind  # int, uint, double, bool, string, bytes, list


class Overload:
    """One signature of a function; `params` include the receiver of a method first."""

    __slots__ = (
        "bound",
        "cost",
        "emit",
        "function",
        "id",
        "impl",
        "kinds",
        "member",
        "params",
        "result",
    )

    def __init__(
        self,
        id: str,
        function: str,
        params: tuple[Type, ...],
        result: Type,
        *,
        impl: Callable[..., Any],
        member: bool = False,
        emit: str | None = None,
        cost: CostFn | None = None,
        bound: BoundFn | None = None,
    ) -> None:
        self.id = id
        self.function = function
        self.params = params
        self.result = result
        self.impl = impl
        self.member = member
        self.emit = emit
        self.cost = cost
        self.bound = bound
        self.kinds = tuple(runtime_kind(p) for p in params)

    def signature(self) -> str:
        if self.member:
            receiver, *rest = self.params
            return f"{receiver}.{self.function}({', '.join(map(str, rest))})"
        name = rt.OPERATOR_NAMES.get(self.function, self.function)
        return f"{name}({', '.join(map(str, self.params))})"

    def accepts(self, args: Sequence[Any]) -> bool:
        """Whether runtime values fit this overload's parameter kinds."""
        return all(k == "any" or k == kind_of(a) for k, a in zip(self.kinds, args))


FUNCTIONS: dict[str, list[Overload]] = {}
# Functions whose dyn-typed calls use one generic implementation instead of picking an overload
# (ordering compares across int/uint/double at run time; equality is heterogeneous).
GENERIC: dict[str, Callable[..., Any]] = {
    "_==_": rt.equals,
    "_!=_": rt.not_equals,
    "_<_": rt.less,
    "_<=_": rt.less_equal,
    "_>_": rt.greater,
    "_>=_": rt.greater_equal,
    "@in": lambda item, container: rt.contains(container, item),
    "_[_]": rt.index,
    "size": rt.size,
    "math.greatest": fn.math_greatest,
    "math.least": fn.math_least,
    "type": rt.type_value,
    "dyn": lambda x: x,
}
# Methods whose receiver may be a namespace rather than a value (`math.abs(x)`).
NAMESPACES = frozenset(("math",))


def _decl(
    function: str,
    params: Sequence[Type],
    result: Type,
    impl: Callable[..., Any],
    *,
    id: str | None = None,
    member: bool = False,
    emit: str | None = None,
    cost: CostFn | None = None,
    bound: BoundFn | None = None,
) -> None:
    name = id or f"{function}_{'_'.join(p.name for p in params)}"
    ov = Overload(
        name,
        function,
        tuple(params),
        result,
        impl=impl,
        member=member,
        emit=emit,
        cost=cost,
        bound=bound,
    )
    FUNCTIONS.setdefault(function, []).append(ov)


def dispatch(function: str, candidates: Sequence[Overload], args: Sequence[Any]) -> Any:
    """Runs the first candidate whose parameter kinds fit the runtime arguments."""
    generic = GENERIC.get(function)
    if generic is not None:
        return generic(*args)
    for ov in candidates:
        if ov.accepts(args):
            return ov.impl(*args)
    rt.no_overload(function, *args)


# -- cost and bound helpers ------------------------------------------------------------------
# A cost formula takes a `Sizes` (cost.BoundSizes at compile time, cost.ValueSizes at run time):
# one formula, so the estimate and the run-time tracker cannot drift apart.
trav = bd.traversal


def reads(cost: CostFn) -> dict[int, str]:
    """Which operand sizes a cost formula reads: {operand index: "size" | "compare" |
    "longest"}. The fast path guards exactly these (see codegen.plan_guards)."""
    return cost.reads  # type: ignore[attr-defined]


def _charge(cost: CostFn, operands: dict[int, str]) -> CostFn:
    cost.reads = operands  # type: ignore[attr-defined]
    return cost


def _trav(i: int) -> CostFn:
    return _charge(lambda s: trav(s.size(i)), {i: "size"})


def _trav_all(n: int) -> CostFn:
    return _charge(
        lambda s: trav(sum(s.size(i) for i in range(n))), dict.fromkeys(range(n), "size")
    )


def _items(i: int) -> CostFn:
    return _charge(lambda s: s.size(i), {i: "size"})


def _search(s: Sizes) -> int:
    # A substring search (contains, indexOf, replace, split): cel-go's contains, the product of
    # both traversals. CPython's search is O(n x m) in its worst case below 2500 characters (or
    # 30 000 with a needle under 100): 2500 x 2500 took 5 ms here, 62 500 units. An empty
    # needle still scans: it counts as one unit of needle.
    return trav(s.size(0)) * max(1, trav(s.size(1)))


def _replace_cost(s: Sizes) -> int:
    return _search(s) + trav(s.size(2))  # the result is charged too (RESULT_CHARGED)


def _regex_cost(s: Sizes) -> int:
    # Kubernetes: the text's traversal (+1) x (pattern length / 4); an empty pattern counts as
    # one unit (Kubernetes' product is 0 there).
    return trav(s.size(0) + 1) * _pattern_units(s.size(1))


def _pattern_units(chars: int) -> int:
    return max(1, math.ceil(chars * 0.25))


def _find_all_cost(s: Sizes) -> int:
    """findAll: every search it repeats and its result (functions.find_all_metered counts the
    same at run time). Search k starts where match k-1 ended, a position strictly after the
    previous one, and may read to the end of the text (RE2 keeps scanning while a
    higher-priority alternative could still match): the searches read at most the
    traversals of n + 1, n, ... characters, one search per match and one that fails. The
    result: one unit per match (at most n + 1, or the limit) and the traversal of its text."""
    n = s.size(0)
    limit = s.value(2)
    searches = n + 1 if limit is None or limit < 0 else min(limit, n + 1)
    repeats = traversal_sum(n + 1) - traversal_sum(n + 1 - searches)
    return repeats * _pattern_units(s.size(1)) + searches + trav(n)


def traversal_sum(m: int) -> int:
    """sum(ceil(j / 10) for j in 1..m), in closed form: m = 10q + r gives 5q(q + 1) + r(q + 1)."""
    if m <= 0:
        return 0
    q, r = divmod(m, 10)
    return 5 * q * (q + 1) + r * (q + 1)


def _list_search(s: Sizes) -> int:
    # indexOf / lastIndexOf on a list: each element compared with the item, as `in` does
    return s.size(0) * (1 + s.compare(1))


def _list_order(s: Sizes) -> int:
    # isSorted, min, max: each element compared with the next; Kubernetes adds the traversal
    # of string elements the same way
    return s.size(0) * (1 + trav(s.longest(0)))


_charge(_search, {0: "size", 1: "size"})
_charge(_replace_cost, {0: "size", 1: "size", 2: "size"})
_charge(_regex_cost, {0: "size", 1: "size"})
_charge(_find_all_cost, {0: "size", 1: "size"})
_charge(_list_search, {0: "size", 1: "compare"})
_charge(_list_order, {0: "longest"})


def _same(i: int) -> BoundFn:
    return lambda b: b[i]


def _chars(n: int) -> BoundFn:
    return lambda b: bd.string(n)


def _concat_strings(b: Sequence[Bound]) -> Bound:
    return bd.string(b[0].chars + b[1].chars)


def _concat_lists(b: Sequence[Bound]) -> Bound:
    return bd.list_of(b[0].items + b[1].items, bd.join(b[0].element(), b[1].element()))


def _split_bound(b: Sequence[Bound]) -> Bound:
    return bd.list_of(b[0].chars + 1, bd.string(b[0].chars))


def _replace_bound(b: Sequence[Bound]) -> Bound:
    # Worst case: an empty `old` inserts `new` around every character.
    return bd.string(b[0].chars + (b[0].chars + 1) * b[2].chars)


def _join_bound(b: Sequence[Bound]) -> Bound:
    sep = b[1].chars if len(b) > 1 else 0
    return bd.string(b[0].items * (b[0].element().chars + sep))


def _elem_bound(b: Sequence[Bound]) -> Bound:
    return b[0].element()


# -- operators ---------------------------------------------------------------------------------
_NUM = (INT, UINT, DOUBLE)
_ARITH = {
    "_+_": ("add", {INT: rt.add_int, UINT: rt.add_uint, DOUBLE: operator.add}),
    "_-_": ("subtract", {INT: rt.sub_int, UINT: rt.sub_uint, DOUBLE: operator.sub}),
    "_*_": ("multiply", {INT: rt.mul_int, UINT: rt.mul_uint, DOUBLE: operator.mul}),
    "_/_": ("divide", {INT: rt.div_int, UINT: rt.div_uint, DOUBLE: rt.div_double}),
    "_%_": ("modulo", {INT: rt.mod_int, UINT: rt.mod_uint}),
}
for _fn, (_verb, _impls) in _ARITH.items():
    for _typ, _impl in _impls.items():
        _decl(_fn, (_typ, _typ), _typ, _impl, id=f"{_verb}_{_typ.name}")
_decl(
    "_+_",
    (STRING, STRING),
    STRING,
    fn.concat,
    id="add_string",
    emit="({0} + {1})",
    cost=_trav_all(2),
    bound=_concat_strings,
)
_decl(
    "_+_",
    (BYTES, BYTES),
    BYTES,
    fn.concat,
    id="add_bytes",
    emit="({0} + {1})",
    cost=_trav_all(2),
    bound=_concat_strings,
)
_decl(
    "_+_",
    (list_of(A), list_of(A)),
    list_of(A),
    fn.concat,
    id="add_list",
    emit="[*{0}, *{1}]",
    cost=_trav_all(2),
    bound=_concat_lists,
)
_decl("-_", (INT,), INT, rt.neg_int, id="negate_int")
_decl("-_", (DOUBLE,), DOUBLE, operator.neg, id="negate_double", emit="(-{0})")
_decl("!_", (BOOL,), BOOL, operator.not_, id="logical_not", emit="(not {0})")

# Comparisons, `in` and map indexing are charged by what they read (cost.comparison: strings by
# their common length, lists and maps element by element, keys by their characters), outside
# these declarations: the charge depends on both operands' static types, not on one overload.
_decl("_==_", (A, A), BOOL, rt.equals, id="equals")
_decl("_!=_", (A, A), BOOL, rt.not_equals, id="not_equals")
_ORDER = {"_<_": operator.lt, "_<=_": operator.le, "_>_": operator.gt, "_>=_": operator.ge}
for _fn, _op in _ORDER.items():
    for _typ in (INT, UINT, DOUBLE, STRING, BYTES, BOOL):
        _decl(_fn, (_typ, _typ), BOOL, _op, id=f"{_fn.strip('_')}_{_typ.name}")
_decl("@in", (A, list_of(A)), BOOL, lambda x, c: rt.contains(c, x), id="in_list")
_decl("@in", (A, map_of(A, B)), BOOL, lambda x, c: rt.contains(c, x), id="in_map")
_decl("_[_]", (list_of(A), INT), A, rt.list_get, id="index_list", bound=_elem_bound)
_decl("_[_]", (map_of(A, B), A), B, rt.map_get, id="index_map", bound=_elem_bound)

# -- size, conversions, type -------------------------------------------------------------------
for _typ in (STRING, BYTES, list_of(A), map_of(A, B)):
    _decl("size", (_typ,), INT, len, id=f"size_{_typ.kind}", emit="len({0})")
    _decl("size", (_typ,), INT, len, id=f"size_{_typ.kind}_method", member=True, emit="len({0})")

_decl("int", (INT,), INT, lambda x: x, id="int_int", emit="{0}")
_decl("int", (UINT,), INT, rt.to_int, id="int_uint")
_decl("int", (DOUBLE,), INT, rt.to_int, id="int_double")
_decl("int", (STRING,), INT, rt.to_int, id="int_string", cost=_trav(0))
_decl("uint", (UINT,), UINT, lambda x: x, id="uint_uint", emit="{0}")
_decl("uint", (INT,), UINT, rt.to_uint, id="uint_int")
_decl("uint", (DOUBLE,), UINT, rt.to_uint, id="uint_double")
_decl("uint", (STRING,), UINT, rt.to_uint, id="uint_string", cost=_trav(0))
_decl("double", (DOUBLE,), DOUBLE, lambda x: x, id="double_double", emit="{0}")
_decl("double", (INT,), DOUBLE, float, id="double_int", emit="float({0})")
_decl("double", (UINT,), DOUBLE, float, id="double_uint", emit="float({0})")
_decl("double", (STRING,), DOUBLE, rt.to_double, id="double_string", cost=_trav(0))
_decl("string", (STRING,), STRING, lambda x: x, id="string_string", emit="{0}", bound=_same(0))
_decl("string", (INT,), STRING, rt.to_string, id="string_int", emit="str({0})", bound=_chars(20))
_decl("string", (UINT,), STRING, rt.to_string, id="string_uint", bound=_chars(20))
_decl("string", (DOUBLE,), STRING, rt.to_string, id="string_double", bound=_chars(32))
_decl("string", (BOOL,), STRING, rt.to_string, id="string_bool", bound=_chars(5))
_decl("string", (BYTES,), STRING, rt.to_string, id="string_bytes", cost=_trav(0), bound=_same(0))
_decl("bytes", (BYTES,), BYTES, lambda x: x, id="bytes_bytes", emit="{0}", bound=_same(0))
_decl(
    "bytes",
    (STRING,),
    BYTES,
    rt.to_bytes,
    id="bytes_string",
    cost=_trav(0),
    bound=lambda b: bd.string(4 * b[0].chars),
)
_decl("bool", (BOOL,), BOOL, lambda x: x, id="bool_bool", emit="{0}")
_decl("bool", (STRING,), BOOL, rt.to_bool, id="bool_string")
_decl("dyn", (A,), DYN, lambda x: x, id="to_dyn", emit="{0}", bound=_same(0))
_decl("type", (A,), t.type_of(A), rt.type_value, id="type")

# -- strings -----------------------------------------------------------------------------------
_decl(
    "contains",
    (STRING, STRING),
    BOOL,
    lambda s, x: x in s,
    member=True,
    emit="({1} in {0})",
    cost=_search,
)
_decl(
    "startsWith",
    (STRING, STRING),
    BOOL,
    str.startswith,
    member=True,
    emit="{0}.startswith({1})",
    cost=_trav(1),
)
_decl(
    "endsWith",
    (STRING, STRING),
    BOOL,
    str.endswith,
    member=True,
    emit="{0}.endswith({1})",
    cost=_trav(1),
)
_decl("matches", (STRING, STRING), BOOL, fn.matches, member=True, cost=_regex_cost)
_decl("matches", (STRING, STRING), BOOL, fn.matches, id="matches_global", cost=_regex_cost)
_decl("charAt", (STRING, INT), STRING, fn.char_at, member=True, cost=_trav(0), bound=_chars(1))
_decl("indexOf", (STRING, STRING), INT, fn.index_of, member=True, cost=_search)
_decl("indexOf", (STRING, STRING, INT), INT, fn.index_of, member=True, cost=_search)
_decl("lastIndexOf", (STRING, STRING), INT, fn.last_index_of, member=True, cost=_search)
_decl("lastIndexOf", (STRING, STRING, INT), INT, fn.last_index_of, member=True, cost=_search)
_decl("lowerAscii", (STRING,), STRING, fn.lower_ascii, member=True, cost=_trav(0), bound=_same(0))
_decl("upperAscii", (STRING,), STRING, fn.upper_ascii, member=True, cost=_trav(0), bound=_same(0))
_decl(
    "replace",
    (STRING, STRING, STRING),
    STRING,
    fn.replace,
    member=True,
    cost=_replace_cost,
    bound=_replace_bound,
)
_decl(
    "replace",
    (STRING, STRING, STRING, INT),
    STRING,
    fn.replace,
    member=True,
    cost=_replace_cost,
    bound=_replace_bound,
)
_decl(
    "split",
    (STRING, STRING),
    list_of(STRING),
    fn.split,
    member=True,
    cost=_search,
    bound=_split_bound,
)
_decl(
    "split",
    (STRING, STRING, INT),
    list_of(STRING),
    fn.split,
    member=True,
    cost=_search,
    bound=_split_bound,
)
_decl("substring", (STRING, INT), STRING, fn.substring, member=True, cost=_trav(0), bound=_same(0))
_decl(
    "substring",
    (STRING, INT, INT),
    STRING,
    fn.substring,
    member=True,
    cost=_trav(0),
    bound=_same(0),
)
_decl("trim", (STRING,), STRING, fn.trim, member=True, cost=_trav(0), bound=_same(0))
_decl(
    "reverse",
    (STRING,),
    STRING,
    fn.reverse,
    member=True,
    emit="{0}[::-1]",
    cost=_trav(0),
    bound=_same(0),
)
_decl("join", (list_of(STRING),), STRING, fn.join, member=True, cost=_items(0), bound=_join_bound)
_decl(
    "join",
    (list_of(STRING), STRING),
    STRING,
    fn.join,
    member=True,
    cost=_items(0),
    bound=_join_bound,
)

# -- regex (Kubernetes) ------------------------------------------------------------------------
_decl("find", (STRING, STRING), STRING, fn.find, member=True, cost=_regex_cost, bound=_same(0))
_decl(
    "findAll",
    (STRING, STRING),
    list_of(STRING),
    fn.find_all,
    member=True,
    cost=_find_all_cost,
    bound=_split_bound,
)
_decl(
    "findAll",
    (STRING, STRING, INT),
    list_of(STRING),
    fn.find_all,
    member=True,
    cost=_find_all_cost,
    bound=_split_bound,
)

# -- lists (Kubernetes) ------------------------------------------------------------------------
_decl("isSorted", (list_of(A),), BOOL, fn.is_sorted, member=True, cost=_list_order)
_decl("sum", (list_of(A),), A, fn.list_sum, member=True, cost=_items(0))
_decl("min", (list_of(A),), A, fn.list_min, member=True, cost=_list_order, bound=_elem_bound)
_decl("max", (list_of(A),), A, fn.list_max, member=True, cost=_list_order, bound=_elem_bound)
_decl(
    "indexOf",
    (list_of(A), A),
    INT,
    fn.list_index_of,
    member=True,
    id="list_index_of",
    cost=_list_search,
)
_decl(
    "lastIndexOf",
    (list_of(A), A),
    INT,
    fn.list_last_index_of,
    member=True,
    id="list_last_index_of",
    cost=_list_search,
)

# -- math (cel-go ext/math); greatest/least are variadic and typed by the checker ----------------
for _typ in _NUM:
    _decl("math.greatest", (list_of(_typ),), _typ, fn.math_greatest, cost=_items(0))
    _decl("math.least", (list_of(_typ),), _typ, fn.math_least, cost=_items(0))
_decl("math.abs", (INT,), INT, fn.math_abs)
_decl("math.abs", (UINT,), UINT, fn.math_abs, emit="{0}")
_decl("math.abs", (DOUBLE,), DOUBLE, fn.math_abs, emit="abs({0})")
for _typ in _NUM:
    _decl("math.sign", (_typ,), _typ, fn.math_sign)
_decl("math.ceil", (DOUBLE,), DOUBLE, fn.math_ceil)
_decl("math.floor", (DOUBLE,), DOUBLE, fn.math_floor)
_decl("math.round", (DOUBLE,), DOUBLE, fn.math_round)
_decl("math.trunc", (DOUBLE,), DOUBLE, fn.math_trunc)
_decl("math.isNaN", (DOUBLE,), BOOL, fn.math_is_nan)
_decl("math.isInf", (DOUBLE,), BOOL, fn.math_is_inf)
_decl("math.isFinite", (DOUBLE,), BOOL, fn.math_is_finite)

# -- quantity (Kubernetes) ---------------------------------------------------------------------
_quantity_cost = _trav(0)
_decl("quantity", (STRING,), QUANTITY, fn.quantity, cost=_quantity_cost)
_decl("isQuantity", (STRING,), BOOL, fn.is_quantity, cost=_quantity_cost)
_decl("isInteger", (QUANTITY,), BOOL, fn.q_is_integer, member=True)
_decl("asInteger", (QUANTITY,), INT, fn.q_as_integer, member=True)
_decl("asApproximateFloat", (QUANTITY,), DOUBLE, fn.q_as_approximate_float, member=True)
_decl("sign", (QUANTITY,), INT, fn.q_sign, member=True)
_decl("add", (QUANTITY, QUANTITY), QUANTITY, fn.q_add, member=True)
_decl("add", (QUANTITY, INT), QUANTITY, fn.q_add, member=True)
_decl("sub", (QUANTITY, QUANTITY), QUANTITY, fn.q_sub, member=True)
_decl("sub", (QUANTITY, INT), QUANTITY, fn.q_sub, member=True)
_decl("isLessThan", (QUANTITY, QUANTITY), BOOL, fn.q_is_less_than, member=True)
_decl("isGreaterThan", (QUANTITY, QUANTITY), BOOL, fn.q_is_greater_than, member=True)
_decl("compareTo", (QUANTITY, QUANTITY), INT, fn.q_compare_to, member=True)

# -- cluster helpers (schedweb); served from the snapshot's indexes ---------------------------------
_SELECTOR = map_of(STRING, STRING)
_CLUSTER_COST = 10  # a fixed charge per helper call, plus one per selector entry


def _cluster_cost(s: Sizes) -> int:
    return _CLUSTER_COST + s.size(-1)


_charge(_cluster_cost, {-1: "size"})


_decl(
    "countPods", (CLUSTER, STRING, _SELECTOR), INT, fn.count_pods, member=True, cost=_cluster_cost
)
_decl(
    "countPodsOnNode",
    (CLUSTER, STRING, STRING, _SELECTOR),
    INT,
    fn.count_pods_on_node,
    member=True,
    cost=_cluster_cost,
)
_decl(
    "countPodsInDomain",
    (CLUSTER, STRING, STRING, STRING, _SELECTOR),
    INT,
    fn.count_pods_in_domain,
    member=True,
    cost=_cluster_cost,
)
_decl(
    "nodeCount",
    (CLUSTER,),
    INT,
    fn.node_count,
    member=True,
    cost=_charge(lambda s: _CLUSTER_COST, {}),
)


def methods_for(receiver: Type) -> list[str]:
    """Names of methods whose receiver accepts `receiver` (for suggestions)."""
    names = set()
    for name, overloads in FUNCTIONS.items():
        for ov in overloads:
            if ov.member and t.is_assignable(ov.params[0], receiver, {}):
                names.add(name)
    return sorted(names)


def global_functions() -> list[str]:
    names = {ov.function for ovs in FUNCTIONS.values() for ov in ovs if not ov.member}
    return sorted(n for n in names if n[0].isalpha())
