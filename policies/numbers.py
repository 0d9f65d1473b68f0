"""One strict parser for every number that comes from a URL, a header or a form.

`str.isdigit` accepts "²" (which int() refuses) and int() accepts " 7", "+7", "7_0" and
Unicode digits; an id beyond int64 overflows SQLite's integer (an OverflowError, a 500) and
PostgreSQL's bigint. Only 1-19 ASCII digits within [minimum, INT64_MAX] are numbers here.
"""

from __future__ import annotations

import re

from policies.errors import InputError

INT64_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")


def number_parse(text: str | None, *, field: str, minimum: int = 0) -> int:
    """`text` as an int in [minimum, INT64_MAX]; InputError naming `field` otherwise."""
    if text is not None and _DIGITS.fullmatch(text):
        value = int(text)
        if minimum <= value <= INT64_MAX:
            return value
    raise InputError(f"{field} must be a whole number from {minimum} to {INT64_MAX}")


def number_or_none(text: str | None, *, minimum: int = 0) -> int | None:
    """`text` as number_parse reads it, or None when it is not one."""
    try:
        return number_parse(text, field="value", minimum=minimum)
    except InputError:
        return None


class IdConverter:
    """The `<id:...>` URL converter: what number_parse accepts (anything else is no match,
    a 404, like a path that names no object)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = number_or_none(value)
        if number is None:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


def id_converter_register() -> None:
    """Registers `<id:...>` once (both URL modules call it; Django warns on a re-registration)."""
    from django.urls import register_converter
    from django.urls.converters import get_converters

    if "id" not in get_converters():
        register_converter(IdConverter, "id")
