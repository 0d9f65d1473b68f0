"""The CEL editor's completion schema: the engine's declared input types
(policies/engine/cel/types.py), so the editor offers exactly the fields the type checker accepts,
plus what a page knows beyond the types: the resources present in the cluster snapshot and the
draft's variables. The playground and the DEBUG gallery (policies/ui/gallery.py) both use it."""

from __future__ import annotations

import functools
from typing import Any

from policies.engine.cel import types as cel_types
from policies.engine.cel.library import methods_for
from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile

_POD_DOCS = {
    "uid": "the pod's UID",
    "name": "metadata.name",
    "namespace": "metadata.namespace",
    "labels": "metadata.labels",
    "annotations": "metadata.annotations",
    "nodeSelector": "spec.nodeSelector",
    "schedulerName": "spec.schedulerName",
    "qosClass": "Guaranteed, Burstable or BestEffort",
    "ownerKind": 'kind of the controller owner ("" when none)',
    "ownerName": "name of the controller owner",
    "nodeName": 'spec.nodeName ("" while pending)',
    "phase": "status.phase",
    "priority": "spec.priority",
    "requests": "effective requests: containers, init containers and overhead",
    "limits": "effective limits",
    "tolerations": "spec.tolerations",
    "object": "the raw Pod object",
}
_NODE_DOCS = {
    "uid": "the node's UID",
    "name": "metadata.name",
    "labels": "metadata.labels",
    "annotations": "metadata.annotations",
    "taints": "spec.taints",
    "unschedulable": "spec.unschedulable (cordoned)",
    "conditions": 'condition type -> status, e.g. conditions["Ready"] == "True"',
    "capacity": "status.capacity",
    "allocatable": "status.allocatable",
    "requested": "sum of the requests of non-terminated pods bound to this node",
    "podCount": "number of non-terminated pods bound to this node",
    "object": "the raw Node object",
}
_RESOURCES = [
    {"name": "cpu", "type": "int", "doc": "millicores (1 CPU = 1000)"},
    {"name": "memory", "type": "int", "doc": "bytes"},
    {"name": "ephemeral_storage", "type": "int", "doc": "bytes (ephemeral-storage)"},
    {"name": "pods", "type": "int", "doc": "pod slots"},
    {"name": "nvidia_com_gpu", "type": "int", "doc": "nvidia.com/gpu devices"},
    {"name": "hugepages_2Mi", "type": "int", "doc": "bytes of 2 MiB huge pages"},
]
_CLUSTER = [
    (
        "countPods",
        "(namespace, selector) int",
        'pods in namespace ("" = all) whose labels contain selector',
    ),
    ("countPodsOnNode", "(node, namespace, selector) int", "the same, bound to one node"),
    (
        "countPodsInDomain",
        "(key, value, namespace, selector) int",
        "the same, on nodes labelled key=value",
    ),
    ("nodeCount", "() int", "nodes in the snapshot"),
]
_MACROS = [
    ("all", "(x, predicate) bool", "true when the predicate holds for every element"),
    ("exists", "(x, predicate) bool", "true when the predicate holds for some element"),
    ("exists_one", "(x, predicate) bool", "true when it holds for exactly one element"),
    ("map", "(x, expr) list", "transform each element"),
    ("filter", "(x, predicate) list", "keep matching elements"),
]


def _fields(*, typ: cel_types.Type, docs: dict[str, str]) -> list[dict[str, str]]:
    return [
        {"name": name, "type": str(ftype), "doc": docs.get(name, "")}
        for name, ftype in typ.fields.items()
    ]


def _methods(*, receiver: cel_types.Type) -> list[dict[str, str]]:
    return [
        {"name": n, "type": "method", "kind": "function"} for n in sorted(methods_for(receiver))
    ]


def cel_completions() -> dict[str, Any]:
    """The editor's completion schema, read from the engine's declared input types so the
    editor offers exactly the fields the type checker accepts."""
    macros = [{"name": n, "type": sig, "kind": "macro", "doc": d} for n, sig, d in _MACROS]
    object_types = {
        "Taint": cel_types.TAINT,
        "Toleration": cel_types.TOLERATION,
    }
    return {
        "pod": _fields(typ=cel_types.POD, docs=_POD_DOCS),
        "node": _fields(typ=cel_types.NODE, docs=_NODE_DOCS),
        "resources": _RESOURCES,
        "cluster": [
            {"name": n, "type": sig, "kind": "function", "doc": d} for n, sig, d in _CLUSTER
        ],
        "variables": [],  # the editor adds the variables the document declares
        "functions": [
            {"name": n, "type": "function", "kind": "function"}
            for n in ("has", "size", "string", "int", "double", "matches", "quantity")
        ],
        "types": {
            "string": _methods(receiver=cel_types.STRING),
            "list": macros + _methods(receiver=cel_types.list_of(cel_types.DYN)),
            "map": macros[:3] + _methods(receiver=cel_types.map_of(cel_types.DYN, cel_types.DYN)),
            **{name: _fields(typ=typ, docs={}) for name, typ in object_types.items()},
        },
    }


@functools.cache
def _base() -> dict[str, Any]:
    return cel_completions()


def _snapshot_resources(*, nodes: list[dict[str, Any]], known: set[str]) -> list[dict[str, str]]:
    """Extended resources the snapshot's nodes report (e.g. example_com_fpga) not listed yet."""
    seen: set[str] = set()
    for node in nodes[:2000]:  # enough to see every resource kind on a real cluster
        seen.update(node["allocatable"].keys())
    return [
        {"name": name, "type": "int", "doc": "reported by nodes in the snapshot"}
        for name in sorted(seen - known)
    ]


def _variables(*, document: str) -> list[dict[str, str]]:
    """The draft's variables with their checked CEL types (when the draft compiles)."""
    try:
        compiled = policy_compile(document)  # the installation's budget, as publish
    except PolicyInvalid:
        return []
    return [
        {"name": name, "type": str(rule.program.type), "kind": "variable", "doc": "variable"}
        for name, rule in compiled.variables.items()
    ]


def policy_completions(*, document: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Completion data for `pod.`, `node.`, `variables.`, `cluster.` and resource maps."""
    base = _base()
    resources = list(base["resources"])
    resources += _snapshot_resources(nodes=nodes, known={r["name"] for r in resources})
    return {**base, "resources": resources, "variables": _variables(document=document)}
