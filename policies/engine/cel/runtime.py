"""CEL's core runtime semantics, shared by the exact path (interpreter) and the fast path (codegen).

Every function takes plain runtime values and returns one, or raises `CelEvalError` with a
message that says what went wrong. Semantics follow cel-cpp (`cel-expr-python`), checked by
tests/engine/test_cel_differential.py: 64-bit ints and uints with overflow errors, truncating
division, heterogeneous numeric equality and ordering (an int compared with a double is converted
to double), and cel-cpp's number formatting and string parsing.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, NoReturn

from policies.engine.inputs import ResourceMap
from policies.engine.quantity import Quantity

from .bounds import traversal
from .errors import CelCostError, CelEvalError
from .values import (
    INT_MAX,
    INT_MIN,
    OUT_OF_RANGE,
    UINT_MAX,
    TypeValue,
    UInt,
    bounded_int,
    clip,
    kind_of,
    type_name,
)

NUMERIC = frozenset(("int", "uint", "double"))
# x86's default NaN has its sign bit set; cel-cpp prints it as "-nan", so 0.0/0.0 produces it too.
NAN = math.inf - math.inf
OPERATOR_NAMES = {
    "_+_": "+",
    "_-_": "-",
    "_*_": "*",
    "_/_": "/",
    "_%_": "%",
    "-_": "unary -",
    "!_": "!",
    "_==_": "==",
    "_!=_": "!=",
    "_<_": "<",
    "_<=_": "<=",
    "_>_": ">",
    "_>=_": ">=",
    "@in": "in",
    "_[_]": "[]",
    "_&&_": "&&",
    "_||_": "||",
    "_?_:_": "?:",
}


def fail(message: str) -> NoReturn:
    raise CelEvalError(message)


def no_overload(function: str, *args: Any) -> NoReturn:
    name = OPERATOR_NAMES.get(function, function)
    kinds = ", ".join(type_name(a) for a in args)
    raise CelEvalError(f"no matching overload for '{name}' applied to ({kinds})")


def overflow() -> NoReturn:
    raise CelEvalError("integer overflow")


def uint_overflow() -> NoReturn:
    raise CelEvalError("unsigned integer overflow")


# -- int ----------------------------------------------------------------------------------
def check_int(value: int) -> int:
    """`value` if it fits in int64, else the overflow error."""
    if INT_MIN <= value <= INT_MAX:
        return value
    overflow()


def add_int(a: int, b: int) -> int:
    r = a + b
    if INT_MIN <= r <= INT_MAX:
        return r
    overflow()


def sub_int(a: int, b: int) -> int:
    r = a - b
    if INT_MIN <= r <= INT_MAX:
        return r
    overflow()


def mul_int(a: int, b: int) -> int:
    r = a * b
    if INT_MIN <= r <= INT_MAX:
        return r
    overflow()


def div_int(a: int, b: int) -> int:
    """Division truncating toward zero (Go and C++), unlike Python's floor division."""
    if b == 0:
        fail("division by zero")
    if a >= 0 and b > 0:
        return a // b
    if a == INT_MIN and b == -1:
        overflow()
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def mod_int(a: int, b: int) -> int:
    """Remainder with the sign of the dividend (truncated division)."""
    if b == 0:
        fail("modulus by zero")
    if a >= 0 and b > 0:
        return a % b
    if a == INT_MIN and b == -1:
        overflow()
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def neg_int(a: int) -> int:
    if a == INT_MIN:
        overflow()
    return -a


# -- uint ---------------------------------------------------------------------------------
def add_uint(a: int, b: int) -> UInt:
    r = a + b
    if r > UINT_MAX:
        uint_overflow()
    return UInt(r)


def sub_uint(a: int, b: int) -> UInt:
    r = a - b
    if r < 0:
        uint_overflow()
    return UInt(r)


def mul_uint(a: int, b: int) -> UInt:
    r = a * b
    if r > UINT_MAX:
        uint_overflow()
    return UInt(r)


def div_uint(a: int, b: int) -> UInt:
    if b == 0:
        fail("division by zero")
    return UInt(a // b)


def mod_uint(a: int, b: int) -> UInt:
    if b == 0:
        fail("modulus by zero")
    return UInt(a % b)


# -- double -------------------------------------------------------------------------------
def div_double(a: float, b: float) -> float:
    """IEEE division: x/0 is +-inf, 0/0 is NaN (Python would raise)."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return NAN
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


# -- equality and ordering ----------------------------------------------------------------
_SCALAR_TYPES = frozenset((int, float, str, bytes, bool, type(None), UInt, Quantity, TypeValue))


def equals(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: numbers compare by value across int/uint/double, lists and maps
    element-wise, values of different kinds are unequal (never an error)."""
    ta = type(a)
    if ta is type(b) and ta in _SCALAR_TYPES:
        return a == b
    ka, kb = kind_of(a), kind_of(b)
    if ka in NUMERIC and kb in NUMERIC:
        if ka == "double" or kb == "double":
            return float(a) == float(b)
        return int(a) == int(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(equals(x, y) for x, y in zip(a, b))
    if ka == "map":
        if len(a) != len(b):
            return False
        for key, value in a.items():
            found, other = map_find(b, key)
            if not found or not equals(value, other):
                return False
        return True
    if ka == "object":
        return a is b
    return a == b


def compare(function: str, a: Any, b: Any) -> int | None:
    """-1, 0 or 1 ordering `a` against `b`, None when unordered (NaN); errors for other kinds."""
    ka, kb = kind_of(a), kind_of(b)
    if ka in NUMERIC and kb in NUMERIC:
        if ka == "double" or kb == "double":
            a, b = float(a), float(b)
        else:
            a, b = int(a), int(b)
    elif ka != kb or ka not in ("string", "bytes", "bool"):
        no_overload(function, a, b)
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        return 0
    return None


def less(a: Any, b: Any) -> bool:
    return compare("_<_", a, b) == -1


def less_equal(a: Any, b: Any) -> bool:
    return compare("_<=_", a, b) in (-1, 0)


def greater(a: Any, b: Any) -> bool:
    return compare("_>_", a, b) == 1


def greater_equal(a: Any, b: Any) -> bool:
    return compare("_>=_", a, b) in (1, 0)


def not_equals(a: Any, b: Any) -> bool:
    return not equals(a, b)


def equals_within(a: Any, b: Any, budget: int) -> tuple[bool, int]:
    """`equals` that counts the work it does (cost.compare_size is its estimate): one unit per
    list element or map entry walked (shared subtrees count every time they are walked), the
    traversal of each string map key looked up, and of the common length of each pair of
    strings or bytes compared. Walking more than `budget` raises CelCostError. Returns
    (equal, units walked)."""
    left = budget

    def spend(units: int) -> None:
        nonlocal left
        left -= units
        if left < 0:
            raise CelCostError(f"cost budget exceeded: comparing walked over {budget} elements")

    def eq(x: Any, y: Any) -> bool:
        tx = type(x)
        if tx is type(y) and tx in _SCALAR_TYPES:
            if tx is str or tx is bytes:
                spend(traversal(min(len(x), len(y))))
            return x == y
        kx = kind_of(x)
        if kx in ("list", "map") and kx == kind_of(y):
            n = len(x)
            if n != len(y):
                return False
            spend(n)
            if kx == "list":
                return all(eq(p, q) for p, q in zip(x, y))
            for key, value in x.items():
                if type(key) is str:
                    spend(traversal(len(key)))
                found, other = map_find(y, key)
                if not found or not eq(value, other):
                    return False
            return True
        return equals(x, y)

    result = eq(a, b)
    return result, budget - left


def contains_within(container: Any, item: Any, budget: int) -> tuple[bool, int]:
    """`contains` counting its work as `equals_within`: each element of a list compared with
    the item, or the item's characters when it is looked up as a map key."""
    kind = kind_of(container)
    if kind == "map":
        units = key_charge(item)
        if units > budget:
            raise CelCostError(f"cost budget exceeded: 'in' walked over {budget} elements")
        return map_find(container, item)[0], units
    if kind != "list":
        return contains(container, item), 0
    walked = len(container)
    if walked > budget:
        raise CelCostError(f"cost budget exceeded: 'in' walked over {budget} elements")
    for x in container:
        found, units = equals_within(item, x, budget - walked)
        walked += units
        if found:
            return True, walked
    return False, walked


def key_charge(key: Any) -> int:
    """What looking up `key` in a map reads: a string key's characters (hashing it, comparing
    it with the key found)."""
    return traversal(len(key)) if type(key) is str else 0


def leaf_charge(a: Any, b: Any) -> int:
    """What comparing two strings (or two bytes) reads: their common length."""
    ta = type(a)
    if ta is type(b) and (ta is str or ta is bytes):
        return traversal(min(len(a), len(b)))
    return 0


# -- maps, lists, selection ---------------------------------------------------------------
def map_find(m: Any, key: Any) -> tuple[bool, Any]:
    """(found, value) for a CEL map lookup: numeric keys match across int/uint/integral double,
    bools only match bools (Python would let True find the key 1)."""
    tk = type(key)
    if tk is str:
        if key in m:
            return True, m[key]
        return False, None
    if tk is bool:
        for k in m:
            if type(k) is bool and k == key:
                return True, m[k]
        return False, None
    if tk is float:
        if not key.is_integer():
            return False, None
        key = int(key)
    elif tk is not int and tk is not UInt:
        return False, None
    if key not in m:
        return False, None
    if key == 0 or key == 1:  # the stored key may be the bool False or True
        for k in m:
            if type(k) is not bool and k == key:
                return True, m[k]
        return False, None
    return True, m[key]


def _key_repr(key: Any) -> str:
    return f"'{key}'" if isinstance(key, str) else format_value(key)


def map_get(m: Any, key: Any) -> Any:
    found, value = map_find(m, key)
    if found:
        return value
    if isinstance(m, ResourceMap) and type(key) is str:
        return 0
    fail(f"no such key: {_key_repr(key)}")


def list_get(items: Any, index: Any) -> Any:
    ti = type(index)
    if ti is int or ti is UInt:
        i = index
    elif ti is float and index.is_integer():
        i = int(index)
    else:
        fail(f"list index must be an integer, got {type_name(index)} {format_value(index)}")
    if 0 <= i < len(items):
        return items[i]
    fail(f"index out of range: index {i}, size {len(items)}")


def index(container: Any, key: Any) -> Any:
    """`container[key]` on a list or map value of any static type."""
    kind = kind_of(container)
    if kind == "map":
        return map_get(container, key)
    if kind == "list":
        return list_get(container, key)
    no_overload("_[_]", container, key)


def select(value: Any, field: str) -> Any:
    """`value.field` where the static type is dyn or a map: a key lookup."""
    if isinstance(value, dict):
        try:
            return value[field]
        except KeyError:
            fail(f"no such key: '{field}'")
    fail(f"cannot select field '{field}' from a value of type {type_name(value)}")


def has_field(value: Any, field: str) -> bool:
    """`has(value.field)` where the static type is dyn or a map: key presence."""
    if isinstance(value, dict):
        return field in value
    fail(f"has() cannot test field '{field}' on a value of type {type_name(value)}")


def resource_get(resources: Any, name: str) -> int:
    """A resource amount; absent resources read as 0 (plain dicts are accepted too)."""
    if isinstance(resources, dict):
        return resources.get(name, 0)
    fail(f"expected a resource map, got {type_name(resources)}")


def contains(container: Any, item: Any) -> bool:
    """`item in container` for a list (CEL equality) or a map (key presence)."""
    kind = kind_of(container)
    if kind == "list":
        return any(equals(item, x) for x in container)
    if kind == "map":
        return map_find(container, item)[0]
    no_overload("@in", item, container)


def size(value: Any) -> int:
    if kind_of(value) in ("string", "bytes", "list", "map"):
        return len(value)
    no_overload("size", value)


def as_bool(value: Any, function: str) -> bool:
    """The value if it is a bool, else the no-overload error CEL gives for `&&`, `||`, `?:`."""
    if value is True or value is False:
        return value
    no_overload(function, value)


def iter_range(value: Any) -> Any:
    """The iteration range of a macro: a list, or a map's keys."""
    kind = kind_of(value)
    if kind == "list" or kind == "map":
        return value
    fail(f"macros iterate over a list or a map, not {type_name(value)}")


# -- conversions --------------------------------------------------------------------------
_WS = " \t\n\v\f\r"
_INT_TEXT = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)[ \t\n\v\f\r]*")
_UINT_TEXT = re.compile(r"[ \t\n\v\f\r]*\+?([0-9]+)[ \t\n\v\f\r]*")
_DOUBLE_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    r"|(?i:inf|infinity|nan))"
)
_BOOL_TEXT = {
    "1": True,
    "t": True,
    "T": True,
    "true": True,
    "TRUE": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "false": False,
    "FALSE": False,
    "False": False,
}
# int(double) accepts -2^63 < v < 2^63 (cel-cpp excludes -2^63 itself).
_TWO_63 = 2.0**63
_TWO_64 = 2.0**64


def to_int(value: Any) -> int:
    kind = kind_of(value)
    if kind == "int":
        return value
    if kind == "uint":
        if value > INT_MAX:
            fail("uint value out of int64 range")
        return int(value)
    if kind == "double":
        if -_TWO_63 < value < _TWO_63:
            return int(value)
        fail(f"double value {format_double(value)} out of int64 range")
    if kind == "string":
        m = _INT_TEXT.fullmatch(value)
        if m is None:
            fail(f"cannot convert string '{clip(value)}' to int")
        digits = m.group(1)
        sign = -1 if digits.startswith("-") else 1
        return check_int_text(sign * bounded_int(digits.lstrip("+-"), 10), value)
    no_overload("int", value)


def check_int_text(number: int, text: str) -> int:
    if INT_MIN <= number <= INT_MAX:
        return number
    fail(f"cannot convert string '{clip(text)}' to int: out of int64 range")


def to_uint(value: Any) -> UInt:
    kind = kind_of(value)
    if kind == "uint":
        return value
    if kind == "int":
        if value < 0:
            fail("int value out of uint64 range")
        return UInt(value)
    if kind == "double":
        if 0.0 <= value < _TWO_64:
            return UInt(int(value))
        fail(f"double value {format_double(value)} out of uint64 range")
    if kind == "string":
        m = _UINT_TEXT.fullmatch(value)
        number = bounded_int(m.group(1), 10) if m is not None else OUT_OF_RANGE
        if number > UINT_MAX:
            fail(f"cannot convert string '{clip(value)}' to uint")
        return UInt(number)
    no_overload("uint", value)


def to_double(value: Any) -> float:
    kind = kind_of(value)
    if kind == "double":
        return value
    if kind == "int" or kind == "uint":
        return float(value)
    if kind == "string":
        text = value.strip(_WS)
        if _DOUBLE_TEXT.fullmatch(text) is None:
            fail(f"cannot convert string '{clip(value)}' to double")
        if "x" in text or "X" in text:
            return float.fromhex(text)
        return float(text)
    no_overload("double", value)


def to_string(value: Any) -> str:
    kind = kind_of(value)
    if kind == "string":
        return value
    if kind == "int" or kind == "uint":
        return int.__repr__(value)
    if kind == "double":
        return format_double(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "bytes":
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            fail("bytes are not valid UTF-8")
    no_overload("string", value)


def to_bytes(value: Any) -> bytes:
    kind = kind_of(value)
    if kind == "bytes":
        return value
    if kind == "string":
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            fail("string is not valid Unicode")
    no_overload("bytes", value)


def to_bool(value: Any) -> bool:
    kind = kind_of(value)
    if kind == "bool":
        return value
    if kind == "string":
        result = _BOOL_TEXT.get(value)
        if result is None:
            fail(f"cannot convert string '{value}' to bool")
        return result
    no_overload("bool", value)


def type_value(value: Any) -> TypeValue:
    """`type(value)` from the runtime value (object-typed values are given their static type)."""
    return TypeValue(type_name(value) if kind_of(value) != "null" else "null_type")


def format_double(value: float) -> str:
    """cel-cpp's string(double): shortest round-trip digits in %g style (exponent form when the
    decimal exponent is < -4 or >= 6, at least two exponent digits): 1e+06, 123456.7, 1e-05."""
    if value != value:
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if value in (math.inf, -math.inf):
        return "inf" if value > 0 else "-inf"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent += len(digits) - len(text)  # now value = int(text) * 10**exponent
    point = len(text) + exponent  # position of the decimal point after text's first digit
    exp10 = point - 1
    prefix = "-" if sign else ""
    if -4 <= exp10 < 6:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        if point >= len(text):
            return f"{prefix}{text}{'0' * (point - len(text))}"
        return f"{prefix}{text[:point]}.{text[point:]}"
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{prefix}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"


def format_value(value: Any) -> str:
    """A value as CEL source text, for messages."""
    kind = kind_of(value)
    if kind == "string":
        return repr(value)
    if kind == "uint":
        return f"{int(value)}u"
    if kind == "double":
        return format_double(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "null":
        return "null"
    if kind == "list":
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if kind == "map":
        return (
            "{" + ", ".join(f"{format_value(k)}: {format_value(v)}" for k, v in value.items()) + "}"
        )
    if kind == "bytes":
        return "b" + repr(value)[1:]
    return repr(value)
