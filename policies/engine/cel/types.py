"""CEL static types: primitives, lists, maps, `type`, `dyn`, and the object types of schedweb's inputs.

Types are immutable values compared by structure (object types by name). `DYN` accepts and is
accepted by everything; `RESOURCES` is a `map(string, int)` whose field names are checked and whose
absent keys read as 0.
"""

from __future__ import annotations

from collections.abc import Mapping


class Type:
    """A CEL type. Build with the module constants and `list_of`, `map_of`, `type_of`, `object_type`."""

    __slots__ = ("fields", "kind", "name", "params")

    def __init__(
        self,
        kind: str,
        *,
        params: tuple[Type, ...] = (),
        name: str = "",
        fields: Mapping[str, Type] | None = None,
    ) -> None:
        self.kind = kind
        self.params = params
        self.name = name or kind
        self.fields: dict[str, Type] = dict(fields or {})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Type):
            return NotImplemented
        return self.kind == other.kind and self.name == other.name and self.params == other.params

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.params))

    def __repr__(self) -> str:
        return f"Type({self})"

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        return self.name

    # -- structure -------------------------------------------------------------------------
    @property
    def elem(self) -> Type:
        """Element type of a list, value type of a map (int for resources)."""
        if self.kind == "resources":
            return INT
        return self.params[-1] if self.params else DYN

    @property
    def key(self) -> Type:
        """Key type of a map (string for resources)."""
        if self.kind == "resources":
            return STRING
        return self.params[0] if self.params else DYN

    def as_map(self) -> Type:
        """`map(string, int)` for resources, self otherwise: resources flow where maps are expected."""
        return RESOURCE_MAP if self.kind == "resources" else self

    @property
    def is_dyn(self) -> bool:
        return self.kind in ("dyn", "error")

    def is_assignable_to(self, other: Type) -> bool:
        """True when a value of this static type may be used where `other` is expected."""
        return is_assignable(other, self, {})


def is_assignable(target: Type, source: Type, bindings: dict[str, Type]) -> bool:
    """Whether `source` flows into `target`, binding `target`'s type parameters in `bindings`.

    `dyn` (and the checker's error type) are compatible with everything in both directions, so an
    expression over `dyn` values type-checks and is checked again at run time.
    """
    if target.kind == "param":
        bound = bindings.get(target.name)
        if bound is None:
            bindings[target.name] = source
            return True
        if is_assignable(bound, source, {}):
            if source.is_dyn and not bound.is_dyn:
                bindings[target.name] = DYN
            return True
        if is_assignable(source, bound, {}):
            bindings[target.name] = source
            return True
        return False
    if source.is_dyn:
        _bind_all(target, bindings)
        return True
    if target.is_dyn:
        return True
    target, source = target.as_map(), source.as_map()
    if target.kind != source.kind or target.name != source.name:
        return False
    if target.kind == "type":
        return True  # type values of any type compare (`type(1) == string` is false, not an error)
    return all(
        is_assignable(t, s, bindings) for t, s in zip(target.params, source.params, strict=True)
    )


def _bind_all(target: Type, bindings: dict[str, Type]) -> None:
    # A dyn argument binds every still-free parameter it reaches to dyn.
    if target.kind == "param":
        bindings.setdefault(target.name, DYN)
    for p in target.params:
        _bind_all(p, bindings)


def substitute(t: Type, bindings: Mapping[str, Type]) -> Type:
    """`t` with its type parameters replaced by their bindings (unbound ones by dyn)."""
    if t.kind == "param":
        return bindings.get(t.name, DYN)
    if not t.params:
        return t
    return Type(t.kind, params=tuple(substitute(p, bindings) for p in t.params), name=t.name)


def join(a: Type, b: Type) -> Type | None:
    """The common type of two branches or literal elements: equal types, else dyn if one is dyn,
    else None (incompatible)."""
    if a == b:
        return a
    if a.is_dyn or b.is_dyn:
        return DYN
    a2, b2 = a.as_map(), b.as_map()
    if a2.kind == b2.kind == "type":
        return TYPE
    if a2.kind == b2.kind and a2.kind in ("list", "map"):
        params = []
        for pa, pb in zip(a2.params, b2.params, strict=True):
            j = join(pa, pb)
            if j is None:
                return None
            params.append(j)
        return Type(a2.kind, params=tuple(params))
    return None


def most_general(types: list[Type]) -> Type:
    """Element type of a list literal: the common type, or dyn when elements differ (as cel-cpp)."""
    if not types:
        return DYN
    result = types[0]
    for t in types[1:]:
        j = join(result, t)
        result = j if j is not None else DYN
    return result


# -- constructors ----------------------------------------------------------------------------
def list_of(elem: Type) -> Type:
    """`list(elem)`."""
    return Type("list", params=(elem,))


def map_of(key: Type, value: Type) -> Type:
    """`map(key, value)`."""
    return Type("map", params=(key, value))


def type_of(t: Type) -> Type:
    """`type(t)`: the static type of a type value denoting `t`."""
    return Type("type", params=(t,))


def param(name: str) -> Type:
    """A type parameter used in function declarations (`A` in `list(A).size()`)."""
    return Type("param", name=name)


def object_type(name: str, fields: Mapping[str, Type]) -> Type:
    """An object type with named fields (runtime values are dicts keyed by field name)."""
    return Type("object", name=name, fields=fields)


# -- constants --------------------------------------------------------------------------------
INT = Type("int")
UINT = Type("uint")
DOUBLE = Type("double")
BOOL = Type("bool")
STRING = Type("string")
BYTES = Type("bytes")
NULL = Type("null_type")
DYN = Type("dyn")
TYPE = Type("type")
ERROR = Type("error")  # the checker's type for an expression that already has an issue
A = param("A")
B = param("B")

QUANTITY = Type("object", name="Quantity")
CLUSTER = Type("object", name="Cluster")
RESOURCES = Type("resources", name="Resources")
RESOURCE_MAP = map_of(STRING, INT)

TAINT = object_type("Taint", {"key": STRING, "value": STRING, "effect": STRING})
TOLERATION = object_type(
    "Toleration", {"key": STRING, "operator": STRING, "value": STRING, "effect": STRING}
)
_LABELS = map_of(STRING, STRING)
# `namespaceObject` in a queue expression: the pod's Namespace (its labels from the snapshot).
NAMESPACE = object_type("Namespace", {"name": STRING, "labels": map_of(STRING, STRING)})
POD = object_type(
    "Pod",
    {
        "uid": STRING,
        "name": STRING,
        "namespace": STRING,
        "labels": _LABELS,
        "annotations": _LABELS,
        "nodeSelector": _LABELS,
        "schedulerName": STRING,
        "qosClass": STRING,
        "ownerKind": STRING,
        "ownerName": STRING,
        "nodeName": STRING,
        "phase": STRING,
        "priority": INT,
        "requests": RESOURCES,
        "limits": RESOURCES,
        "tolerations": list_of(TOLERATION),
        "object": DYN,
    },
)
NODE = object_type(
    "Node",
    {
        "uid": STRING,
        "name": STRING,
        "labels": _LABELS,
        "annotations": _LABELS,
        "taints": list_of(TAINT),
        "unschedulable": BOOL,
        "conditions": _LABELS,
        "capacity": RESOURCES,
        "allocatable": RESOURCES,
        "requested": RESOURCES,
        "podCount": INT,
        "object": DYN,
    },
)

# Names usable as type values in expressions (`type(x) == int`).
TYPE_NAMES: dict[str, Type] = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "bool": BOOL,
    "string": STRING,
    "bytes": BYTES,
    "null_type": NULL,
    "list": list_of(DYN),
    "map": map_of(DYN, DYN),
    "type": TYPE,
}
