"""Numbers, resource quantities and text as people read them, the same on every page and in the
terminal: scores and totals (`number_format`), CPU (`cpu_format`), bytes (`bytes_format`), a
named resource (`quantity_format`) and text from documents, pods and clusters with its control,
format and bidi characters escaped (`printable`, the engine's: it escapes what it emits too).

Plain string formatting, not template filters: the preview and the decision pages format every
cell of tables with up to 1000 rows, where a filter per cell dominated the render time.
"""

from __future__ import annotations

import math
from typing import Any

from policies.engine.printable import printable

__all__ = ["bytes_format", "cpu_format", "number_format", "printable", "quantity_format"]

DASH = "—"  # a missing value on a page; the terminal passes missing="-"
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_BYTE_RESOURCES = ("memory", "ephemeral_storage")


def number_format(value: Any, *, places: int = 2, missing: str = DASH) -> str:
    """A number with at most `places` decimals and no trailing zeros: 12 -> "12",
    12.0 -> "12", 12.5 -> "12.5", 12.3456 -> "12.35". None and booleans are `missing`; any
    other value (a CEL string score) is shown as it is."""
    if value is None or isinstance(value, bool):
        return missing
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        text = f"{value:.{places}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text == "-0" else text
    return str(value)


def cpu_format(millis: int) -> str:
    """Millicores as CPUs, exactly: 250 -> "250m CPU", 4000 -> "4 CPU", 3500 -> "3.5 CPU"."""
    if millis % 1000 == 0:
        return f"{millis // 1000} CPU"
    if abs(millis) < 1000:
        return f"{millis}m CPU"
    return f"{number_format(millis / 1000, places=3)} CPU"


def bytes_format(n: int) -> str:
    """Bytes in binary units, one decimal below 100: 512 -> "512 B", 1536 -> "1.5 KiB",
    134217728 -> "128 MiB", 1610612736 -> "1.5 GiB"."""
    value = float(n)
    unit = _BYTE_UNITS[0]
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            break
        value /= 1024
    if unit == "B":
        return f"{n} B"
    return f"{number_format(value, places=1 if abs(value) < 100 else 0)} {unit}"


def quantity_format(*, resource: str, value: int) -> str:
    """An amount of a resource as the engine names it (pod.requests keys): "4 CPU",
    "128 MiB memory", "1 GiB ephemeral-storage", "2 nvidia_com_gpu"."""
    if resource == "cpu":
        return cpu_format(value)
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages_"):
        return f"{bytes_format(value)} {resource.replace('_', '-')}"
    return f"{value} {resource}"
