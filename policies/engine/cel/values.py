"""Runtime values that Python does not have natively: CEL's uint and type values, and value kinds.

Every other CEL value is a plain Python value: int, float, bool, str, bytes, None, list (tuples
are accepted as input), dict, and `policies.engine.quantity.Quantity`.
"""

from __future__ import annotations

from typing import Any

from policies.engine.quantity import Quantity

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
UINT_MAX = 2**64 - 1


class UInt(int):
    """A CEL uint. A distinct type (`type(v) is UInt`), so it is never confused with an int;
    arithmetic on it goes through the runtime, which re-wraps and range-checks results."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"

    __str__ = int.__repr__


class TypeValue:
    """A CEL type value (`type(1)`, `int`), compared by its runtime type name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("TypeValue", self.name))

    def __repr__(self) -> str:
        return self.name


_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null",
    list: "list",
    tuple: "list",
    dict: "map",
    Quantity: "quantity",
    TypeValue: "type",
}

# The name `type(v)` reports for each kind (CEL's runtime type names).
TYPE_NAME_OF_KIND = {
    "bool": "bool",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bytes": "bytes",
    "null": "null_type",
    "list": "list",
    "map": "map",
    "quantity": "Quantity",
    "type": "type",
}


def kind_of(value: Any) -> str:
    """The CEL kind of a runtime value: "int", "uint", "double", "bool", "string", "bytes",
    "null", "list", "map", "quantity", "type", or "object" for anything else (the cluster)."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, dict):
        return "map"
    if isinstance(value, (list, tuple)):
        return "list"
    return "object"


def type_name(value: Any) -> str:
    """The CEL type name of a runtime value, for messages (`int`, `map`, `Quantity`)."""
    kind = kind_of(value)
    return TYPE_NAME_OF_KIND.get(kind, type(value).__name__)


# Any literal with more significant digits than this is out of the 64-bit range anyway; parsing
# it would be wasted work (and Python refuses decimal strings over 4300 digits with ValueError).
_MAX_DIGITS = 32
OUT_OF_RANGE = 2**128


def bounded_int(digits: str, base: int) -> int:
    """int(digits, base), or OUT_OF_RANGE (beyond every CEL integer type) for long inputs."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:
        return OUT_OF_RANGE
    return int(digits, base)


def clip(text: str, limit: int = 64) -> str:
    """`text` shortened for an error message (a message never copies a huge value)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
