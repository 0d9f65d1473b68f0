"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3"), exactly as apimachinery parses them.

Values are kept as exact fractions. Conversions round up like `resource.Quantity.Value()` and
`MilliValue()` do, so a pod requesting "0.1m" CPU counts as 1 millicore, as in kube-scheduler.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
# sign, digits with optional fraction, then a binary suffix, a decimal suffix or an exponent.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Significant digits a quantity may have (leading zeros aside). int64 has 19 and nano-units 9
# more; 5000 digits showed Python's "Exceeds the limit (4300 digits)" instead (issue 27).
MAX_DIGITS = 64


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message says why."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string, or QuantityError."""
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string, got {type(text).__name__}")
    match = _QUANTITY.match(text.strip()) if text.strip() == text else None
    if match is None:
        raise QuantityError(
            f"invalid quantity {_clip(text)!r}: expected a number with an optional suffix such as m, Ki, Mi, Gi, k, M, G or e3"
        )
    num = match["num"]
    sign = "-" if num.startswith("-") else ""
    whole, _, fraction = num.lstrip("+-").partition(".")
    whole = whole.lstrip("0")
    if len(whole) + len(fraction) > MAX_DIGITS:
        raise QuantityError(
            f"invalid quantity {_clip(text)!r}: {len(whole) + len(fraction)} digits, "
            f"at most {MAX_DIGITS}"
        )
    number = Fraction(f"{sign}{whole or 0}.{fraction or 0}")
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if match["exp"]:
        exponent_digits = match["exp"][1:].lstrip("+-").lstrip("0")
        exponent = int(match["exp"][1:]) if len(exponent_digits) <= 2 else 100
        if abs(exponent) > 64:
            raise QuantityError(f"invalid quantity {_clip(text)!r}: exponent out of range")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["dec"] or ""]


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ceil_int(value: Fraction) -> int:
    """Rounds up to an integer, as Quantity.Value() does."""
    return math.ceil(value)


def to_millis(text: str) -> int:
    """Millicores (or milli-units) of a quantity string, rounded up: "100m" -> 100, "2" -> 2000."""
    return math.ceil(parse_quantity(text) * 1000)


def to_units(text: str) -> int:
    """Whole units of a quantity string, rounded up: "1Gi" -> 1073741824, "1.5" -> 2."""
    return math.ceil(parse_quantity(text))


class Quantity:
    """A quantity value for CEL's Kubernetes quantity library (`quantity("1Gi")`)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Fraction, text: str | None = None) -> None:
        self.value = value
        self.text = text if text is not None else format_quantity(value)

    @classmethod
    def parse(cls, text: str) -> Quantity:
        return cls(parse_quantity(text), text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"


def format_quantity(value: Fraction) -> str:
    """A canonical-enough string for a computed quantity (used in messages only)."""
    if value.denominator == 1:
        return str(value.numerator)
    millis = value * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    return str(float(value))
