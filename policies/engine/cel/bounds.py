"""Worst-case sizes of values, for the static cost estimate.

A `Bound` says how long a string (or bytes) value can be and how many entries a list or map can
have, recursively for elements, map keys and map values. Declared input bounds follow Kubernetes
validation limits; `DYN` (the raw `object` and anything of unknown size) is the largest bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import types as t


@dataclass(frozen=True, slots=True)
class Bound:
    chars: int = 0  # max length of a string or bytes value
    items: int = 0  # max entries of a list or map
    elem: Bound | None = None  # list elements, map values
    key: Bound | None = None  # map keys

    def element(self) -> Bound:
        return self.elem if self.elem is not None else SCALAR

    def keys(self) -> Bound:
        return self.key if self.key is not None else SCALAR


SCALAR = Bound()
# Unknown-size values (dyn, the raw Kubernetes objects): strings up to 10 000 characters, lists
# and maps up to 1000 entries, nested the same way all the way down.
DYN = Bound(chars=10_000, items=1000)
object.__setattr__(DYN, "elem", DYN)
object.__setattr__(DYN, "key", DYN)


def string(chars: int) -> Bound:
    return Bound(chars=chars)


def list_of(items: int, elem: Bound) -> Bound:
    return Bound(items=items, elem=elem)


def map_of(items: int, key: Bound, value: Bound) -> Bound:
    return Bound(items=items, key=key, elem=value)


def join(a: Bound, b: Bound) -> Bound:
    """A bound covering both (for ternary branches and literal elements)."""
    if a is b or b is SCALAR:
        return a
    if a is SCALAR:
        return b
    if a is DYN or b is DYN:
        return DYN
    elem = _join_opt(a.elem, b.elem)
    key = _join_opt(a.key, b.key)
    return Bound(max(a.chars, b.chars), max(a.items, b.items), elem, key)


def _join_opt(a: Bound | None, b: Bound | None) -> Bound | None:
    if a is None:
        return b
    if b is None:
        return a
    return join(a, b)


def traversal(n: int) -> int:
    """Cost of walking n characters or entries: ceil(n / 10), as Kubernetes' string traversal."""
    return (n + 9) // 10


# -- declared input bounds (Kubernetes validation limits) -----------------------------------
NAME = string(253)  # DNS subdomain names: nodes, pods, owners, scheduler names
LABEL_KEY = string(317)  # 253-character prefix + "/" + 63-character name
LABEL_VALUE = string(63)
SHORT = string(32)  # enumerations: phase, qosClass, effect, operator, condition status
LABELS = map_of(64, LABEL_KEY, LABEL_VALUE)
ANNOTATIONS = map_of(64, LABEL_KEY, string(4096))
CONDITIONS = map_of(64, NAME, SHORT)
RESOURCES = map_of(32, NAME, SCALAR)
TAINT = map_of(3, SHORT, LABEL_KEY)
TOLERATION = map_of(4, SHORT, LABEL_KEY)

FIELD_BOUNDS: dict[str, dict[str, Bound]] = {
    "Pod": {
        "uid": string(36),
        "name": NAME,
        "namespace": LABEL_VALUE,
        "labels": LABELS,
        "annotations": ANNOTATIONS,
        "nodeSelector": LABELS,
        "schedulerName": NAME,
        "qosClass": SHORT,
        "ownerKind": LABEL_VALUE,
        "ownerName": NAME,
        "nodeName": NAME,
        "phase": SHORT,
        "requests": RESOURCES,
        "limits": RESOURCES,
        "tolerations": list_of(64, TOLERATION),
        "object": DYN,
    },
    "Node": {
        "uid": string(36),
        "name": NAME,
        "labels": LABELS,
        "annotations": ANNOTATIONS,
        "taints": list_of(64, TAINT),
        "conditions": CONDITIONS,
        "capacity": RESOURCES,
        "allocatable": RESOURCES,
        "requested": RESOURCES,
        "object": DYN,
    },
    "Namespace": {"name": LABEL_VALUE, "labels": LABELS},
    "Taint": {"key": LABEL_KEY, "value": LABEL_VALUE, "effect": SHORT},
    "Toleration": {"key": LABEL_KEY, "operator": SHORT, "value": LABEL_VALUE, "effect": SHORT},
}


def for_type(typ: t.Type) -> Bound:
    """The bound of a value known only by its type (a declared variable): DYN-sized."""
    if typ.kind in ("string", "bytes", "list", "map", "dyn", "error"):
        return DYN
    if typ.kind == "resources":
        return RESOURCES
    if typ.kind == "object" and typ.fields:
        return DYN
    return SCALAR


def field_bound(owner: t.Type, field: str) -> Bound:
    """The declared bound of `owner.field` (by its type when not declared)."""
    declared = FIELD_BOUNDS.get(owner.name, {}).get(field)
    if declared is not None:
        return declared
    return for_type(owner.fields.get(field, t.DYN))
