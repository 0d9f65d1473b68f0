"""`{{ value|printable }}`: control, format and bidi characters as visible escapes
(policies/engine/printable.py). The engine escapes the filter messages and errors it emits;
pages apply this to what was stored before it did (decisions) or comes from elsewhere."""

from __future__ import annotations

from django import template

from policies.formatting import printable as _printable

register = template.Library()


@register.filter
def printable(value: object) -> str:
    """The text with every non-printable character escaped ("\\x1b", "\\u202e")."""
    return _printable(str(value)) if value is not None else ""
