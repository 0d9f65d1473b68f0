"""Implementations of CEL's extension libraries as Kubernetes enables them: strings, lists,
regex, quantity and math, plus the schedweb cluster helpers. Plain functions over runtime
values that raise `CelEvalError`; declared (types, costs, fast-path forms) in `library`."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import re2
from re2 import _re2

from policies.engine.quantity import Quantity, QuantityError, parse_quantity

from .bounds import traversal
from .deadline import deadline_get, deadline_passed, now
from .errors import CelCostError
from .regex import RegexError, compile_regex
from .runtime import NUMERIC, compare, equals, fail, no_overload, overflow
from .values import INT_MAX, INT_MIN, UINT_MAX, UInt, kind_of

_UNANCHORED = re2._Anchor.UNANCHORED

# -- strings (cel-go ext/strings, cel-cpp extensions/strings) --------------------------------
_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_UPPER = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}
# Go's unicode.IsSpace, used by strings.TrimSpace (Python's strip() also strips \x1c-\x1f).
_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def char_at(s: str, i: int) -> str:
    if i < 0:
        fail(f"charAt({i}): index is negative")
    if i > len(s):
        fail(f"charAt({i}): index is greater than the string's length {len(s)}")
    return s[i : i + 1]


def index_of(s: str, sub: str, offset: int = 0) -> int:
    if offset < 0 or offset > len(s):
        fail(f"indexOf(): index out of range: {offset}")
    return s.find(sub, offset)


def last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return s.rfind(sub)
    if offset < 0 or offset > len(s):
        fail(f"lastIndexOf(): index out of range: {offset}")
    # The last occurrence that starts at or before `offset`.
    return s.rfind(sub, 0, offset + len(sub))


def lower_ascii(s: str) -> str:
    return s.lower() if s.isascii() else s.translate(_LOWER)


def upper_ascii(s: str) -> str:
    return s.upper() if s.isascii() else s.translate(_UPPER)


# The largest string or list a library function may build (characters or items). Checked
# before the work is done: replace("", s) grew quadratically and nested join() built 1 GB per
# node while the estimate charged by item count (issue 15).
MAX_VALUE_SIZE = 1_000_000


def _check_size(size: int, function: str) -> None:
    if size > MAX_VALUE_SIZE:
        fail(
            f"{function}(): the result would have {size} elements, over the limit {MAX_VALUE_SIZE}"
        )


def concat(a: Any, b: Any) -> Any:
    """`a + b` for strings, bytes and lists, refusing results over MAX_VALUE_SIZE: 15 variables
    each doubling or copying a list reached 8 million items and 1 GB per node (issue 15)."""
    size = len(a) + len(b)
    if size > MAX_VALUE_SIZE:
        fail(f"+: the result would have {size} elements, over the limit {MAX_VALUE_SIZE}")
    if type(a) is list or type(a) is tuple:
        return [*a, *b]
    return a + b


def replace(s: str, old: str, new: str, n: int = -1) -> str:
    if len(new) > len(old):
        count = len(s) + 1 if old == "" else s.count(old)
        if n >= 0:
            count = min(count, n)
        _check_size(len(s) + count * (len(new) - len(old)), "replace")
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's strings.SplitN: n < 0 all parts, n == 0 none, n > 0 at most n parts; an empty
    separator splits into characters."""
    if n == 0:
        return []
    if sep == "":
        if s == "":
            return [""]  # as cel-cpp (Go's strings.Split would give [])
        chars = list(s)
        if 0 < n < len(chars):
            return [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    return s.split(sep, n - 1 if n > 0 else -1)


def substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0:
            fail(f"substring({start}): start is negative")
        if start > len(s):
            fail(f"substring({start}): start is greater than the string's length {len(s)}")
        return s[start:]
    if start < 0:
        fail(f"substring({start}, {end}): start is negative")
    if end < start:
        fail(f"substring({start}, {end}): end is less than start")
    if end > len(s):
        fail(f"substring({start}, {end}): end is greater than the string's length {len(s)}")
    return s[start:end]


def trim(s: str) -> str:
    return s.strip(_SPACE)


def join(items: Any, sep: str = "") -> str:
    size = len(sep) * max(len(items) - 1, 0)
    for item in items:
        if type(item) is not str:
            no_overload("join", items, sep)
        size += len(item)
    _check_size(size, "join")
    return sep.join(items)


def reverse(s: str) -> str:
    return s[::-1]


# -- regex (CEL matches, Kubernetes regex library) -------------------------------------------
def _regex(pattern: str):
    try:
        return compile_regex(pattern)
    except RegexError as e:
        fail(str(e))


def matches(s: str, pattern: str) -> bool:
    return _regex(pattern).search(s) is not None


def find(s: str, pattern: str) -> str:
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    """Go's FindAllString: an empty match right after the previous match is skipped."""
    return find_all_metered(s, pattern, n)[0]


# A deadline is looked at every this many searches of findAll (2**6: a search is at least a
# microsecond, so a look costs under 2% of the loop).
_DEADLINE_EVERY = 63


def find_all_metered(
    s: str, pattern: str, n: int = -1, budget: int | None = None
) -> tuple[list[str], int]:
    """findAll and what it cost, counted as library._find_all_cost estimates it: each search
    the traversal of the text left from where it starts (+1) x the pattern's units, then one
    unit per match and the traversal of the matches' text. CelCostError before a search that
    would take the count past `budget`; the request's deadline (deadline.py) is looked at
    every 64 searches, so neither a long loop of matches nor a quadratic one outlives them.

    A search can read far past its match (RE2 keeps scanning while a higher-priority
    alternative of the pattern could still match: `a.*?b|a` over n a's reads to the end each
    time, n^2/2 characters in all; Go's and Rust's regexp iterate the same way), so repeats
    are charged the whole remainder: 1 M characters took about 13 minutes per node before
    this was counted (issue 27). Matches are found with the binding's Match directly, one
    UTF-8 encoding of the text in all, at the cost of re2's finditer (0.9 us a match here)."""
    if n == 0:
        return [], 0
    regexp = _regex(pattern)._regexp
    units = _pattern_units(len(pattern))
    encoded = s.encode("utf-8")
    size, end = len(s), len(encoded)
    ascii_text = size == end
    at_byte, at_char = 0, 0  # the last byte offset converted to characters, and its result

    def chars(offset: int) -> int:
        nonlocal at_byte, at_char
        if ascii_text:
            return offset
        if offset != at_byte:
            at_char += _re2.BytesToCharLen(encoded, at_byte, offset)
            at_byte = offset
        return at_char

    dl = deadline_get()
    out: list[str] = []
    spent = searched = matched_chars = 0
    pos = 0  # byte offset where the next search starts
    prev_end = -1
    while True:
        charge = traversal(size - chars(pos) + 1) * units
        if budget is not None and spent + charge > budget:
            raise CelCostError(f"cost budget exceeded: findAll() passed {budget}")
        spent += charge
        searched += 1
        if dl is not None and not searched & _DEADLINE_EVERY and now() > dl:
            deadline_passed()
        start, stop = regexp.Match(_UNANCHORED, encoded, pos, end)[0]
        if start < 0:
            break
        if stop == pos:  # an empty match here: never right after the previous match (Go)
            if start != prev_end:
                out.append("")
            if pos == end:
                break
            pos += _re2.CharLenToBytes(encoded, pos, 1)
        else:
            first = chars(start)
            text = s[first : chars(stop)]
            matched_chars += len(text)
            out.append(text)
            pos = stop
        prev_end = stop
        if 0 < n <= len(out):
            break
    spent += len(out) + traversal(matched_chars)
    if budget is not None and spent > budget:
        raise CelCostError(f"cost budget exceeded: findAll() passed {budget}")
    return out, spent


def _pattern_units(chars: int) -> int:
    """A pattern's units in a regex's cost: its length / 4, at least 1 (library._regex_cost)."""
    return max(1, -(-chars // 4))


# -- lists (Kubernetes lists library) ---------------------------------------------------------
def _check_comparable(items: Any, function: str) -> None:
    for item in items:
        if kind_of(item) not in ("int", "uint", "double", "string", "bytes", "bool"):
            no_overload(function, items)


def is_sorted(items: Any) -> bool:
    _check_comparable(items, "isSorted")
    return all(
        compare("isSorted", items[i], items[i + 1]) in (-1, 0) for i in range(len(items) - 1)
    )


def list_sum(items: Any) -> Any:
    if not items:
        return 0
    kinds = {kind_of(x) for x in items}
    if kinds == {"int"}:
        total = sum(items)
        if not INT_MIN <= total <= INT_MAX:
            overflow()
        # Partial sums could overflow even when the total fits; CEL adds left to right.
        acc = 0
        for x in items:
            acc += x
            if not INT_MIN <= acc <= INT_MAX:
                overflow()
        return total
    if kinds == {"uint"}:
        total = sum(int(x) for x in items)
        if total > UINT_MAX:
            fail("unsigned integer overflow")
        return UInt(total)
    if kinds == {"double"}:
        acc = 0.0
        for x in items:
            acc += x
        return acc
    no_overload("sum", items)


def list_min(items: Any) -> Any:
    return _extreme(items, "min", -1)


def list_max(items: Any) -> Any:
    return _extreme(items, "max", 1)


def _extreme(items: Any, function: str, direction: int) -> Any:
    if not items:
        fail(f"{function}() called on an empty list")
    _check_comparable(items, function)
    best = items[0]
    for item in items[1:]:
        if compare(function, item, best) == direction:
            best = item
    return best


def list_index_of(items: Any, value: Any) -> int:
    for i, item in enumerate(items):
        if equals(item, value):
            return i
    return -1


def list_last_index_of(items: Any, value: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if equals(items[i], value):
            return i
    return -1


# -- math (cel-go ext/math) ----------------------------------------------------------------------
def math_greatest(*args: Any) -> Any:
    return _math_extreme(args, "math.greatest", 1)


def math_least(*args: Any) -> Any:
    return _math_extreme(args, "math.least", -1)


def _math_extreme(args: tuple[Any, ...], function: str, direction: int) -> Any:
    values = args
    if len(args) == 1 and kind_of(args[0]) == "list":
        values = tuple(args[0])
        if not values:
            fail(f"{function}() argument must not be empty")
    best = values[0]
    for value in values:
        if kind_of(value) not in NUMERIC:
            no_overload(function, *values)
    for value in values[1:]:
        if compare(function, value, best) == direction:
            best = value
    return best


def math_abs(x: Any) -> Any:
    kind = kind_of(x)
    if kind == "int":
        if x == INT_MIN:
            overflow()
        return abs(x)
    if kind == "uint":
        return x
    if kind == "double":
        return abs(x)
    no_overload("math.abs", x)


def math_sign(x: Any) -> Any:
    kind = kind_of(x)
    if kind == "int":
        return (x > 0) - (x < 0)
    if kind == "uint":
        return UInt(1 if x > 0 else 0)
    if kind == "double":
        if x != x:
            return x
        return 1.0 if x > 0 else -1.0 if x < 0 else 0.0
    no_overload("math.sign", x)


# C's ceil/floor/trunc keep the sign of a zero result (ceil(-0.5) is -0.0); Python's int-based
# math.ceil would not, hence copysign.
def math_ceil(x: float) -> float:
    return math.copysign(float(math.ceil(x)), x) if math.isfinite(x) else x


def math_floor(x: float) -> float:
    return math.copysign(float(math.floor(x)), x) if math.isfinite(x) else x


def math_round(x: float) -> float:
    """Rounds half away from zero (C's round), not to even like Python's round()."""
    if not math.isfinite(x):
        return x
    whole = math.trunc(x)
    if abs(x - whole) >= 0.5:  # x - trunc(x) is exact in binary floating point
        whole += 1 if x > 0 else -1
    return math.copysign(float(whole), x)


def math_trunc(x: float) -> float:
    return math.copysign(float(math.trunc(x)), x) if math.isfinite(x) else x


def math_is_nan(x: float) -> bool:
    return x != x


def math_is_inf(x: float) -> bool:
    return x in (math.inf, -math.inf)


def math_is_finite(x: float) -> bool:
    return math.isfinite(x)


# -- quantity (Kubernetes quantity library) -----------------------------------------------------
def quantity(text: str) -> Quantity:
    try:
        return Quantity(parse_quantity(text), text)
    except QuantityError as e:
        fail(str(e))


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _fits_int64(value: Fraction) -> bool:
    return value.denominator == 1 and INT_MIN <= value.numerator <= INT_MAX


def q_is_integer(q: Quantity) -> bool:
    return _fits_int64(q.value)


def q_as_integer(q: Quantity) -> int:
    if not _fits_int64(q.value):
        fail(f"cannot convert quantity {q.text!r} to an int64 without losing precision")
    return q.value.numerator


def q_as_approximate_float(q: Quantity) -> float:
    return float(q.value)


def q_sign(q: Quantity) -> int:
    return (q.value > 0) - (q.value < 0)


def q_add(q: Quantity, other: Any) -> Quantity:
    return Quantity(q.value + (other.value if isinstance(other, Quantity) else other))


def q_sub(q: Quantity, other: Any) -> Quantity:
    return Quantity(q.value - (other.value if isinstance(other, Quantity) else other))


def q_compare_to(q: Quantity, other: Quantity) -> int:
    return (q.value > other.value) - (q.value < other.value)


def q_is_less_than(q: Quantity, other: Quantity) -> bool:
    return q.value < other.value


def q_is_greater_than(q: Quantity, other: Quantity) -> bool:
    return q.value > other.value


# -- cluster helpers (schedweb) -----------------------------------------------------------------
_MAX_COUNT = 2**48  # the fast path relies on counts being far from int64 overflow


def _count(value: Any, function: str) -> int:
    if type(value) is not int or not 0 <= value <= _MAX_COUNT:
        fail(f"cluster.{function}() returned {value!r}, expected a count (an int >= 0)")
    return value


def count_pods(cluster: Any, namespace: str, selector: Any) -> int:
    return _count(cluster.count_pods(namespace, selector), "countPods")


def count_pods_on_node(cluster: Any, node_name: str, namespace: str, selector: Any) -> int:
    return _count(cluster.count_pods_on_node(node_name, namespace, selector), "countPodsOnNode")


def count_pods_in_domain(
    cluster: Any, topology_key: str, value: str, namespace: str, selector: Any
) -> int:
    result = cluster.count_pods_in_domain(topology_key, value, namespace, selector)
    return _count(result, "countPodsInDomain")


def node_count(cluster: Any) -> int:
    return _count(cluster.node_count(), "nodeCount")
