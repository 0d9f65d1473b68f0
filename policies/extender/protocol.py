"""kube-scheduler's extender wire format (../shared/extender-protocol.md), parsed and built.

Requests arrive as Go's encoding/json writes them: PascalCase keys without omitempty (nil
pointers as null), Kubernetes objects in camelCase inside. Go decodes keys case-insensitively,
so we accept any casing of the top-level keys and always answer in PascalCase. Scores are
integers (a 7.0 makes Go discard the whole prioritize response, section 2.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


class ProtocolError(ValueError):
    """A request body that is not what kube-scheduler sends; answered with HTTP 400."""


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"the body must be a JSON object, got {type(data).__name__}")
    # Go matches field names case-insensitively; so do we (the first spelling wins on clashes).
    folded: dict[str, Any] = {}
    for key, value in data.items():
        folded.setdefault(key.lower(), value)
    return folded


def _pod(data: dict[str, Any]) -> dict[str, Any]:
    pod = data.get("pod")
    if not isinstance(pod, dict):
        raise ProtocolError("Pod is missing or not an object")
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise ProtocolError("Pod.metadata.name is missing")
    return pod


@dataclass(slots=True)
class ExtenderArgs:
    """Filter and prioritize requests: the pod and its candidate nodes (names, or full Nodes)."""

    pod: dict[str, Any]
    node_names: list[str]
    nodes: list[dict[str, Any]] | None  # the full objects when nodeCacheCapable is false

    @property
    def cache_capable(self) -> bool:
        return self.nodes is None


def parse_extender_args(body: bytes) -> ExtenderArgs:
    """ExtenderArgs: {"Pod": {...}, "Nodes": NodeList|null, "NodeNames": [..]|null}."""
    data = _object(body)
    pod = _pod(data)
    names = data.get("nodenames")
    node_list = data.get("nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ProtocolError("NodeNames must be a list of strings")
        return ExtenderArgs(pod=pod, node_names=names, nodes=None)
    if node_list is not None:
        items = node_list.get("items") if isinstance(node_list, dict) else None
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ProtocolError("Nodes.items must be a list")
        node_names = []
        for index, item in enumerate(items):
            name = item.get("metadata", {}).get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                raise ProtocolError(f"Nodes.items[{index}].metadata.name is missing")
            node_names.append(name)
        return ExtenderArgs(pod=pod, node_names=node_names, nodes=items)
    # Both null: the scheduler never sends this, but an empty candidate list is well defined.
    return ExtenderArgs(pod=pod, node_names=[], nodes=None)


@dataclass(slots=True)
class PreemptionArgs:
    """Preempt requests: the preemptor and candidate nodes with their victims (UIDs or full Pods)."""

    pod: dict[str, Any]
    victims: dict[str, dict[str, Any]]  # node -> {"Pods": [{"UID": ...}], "NumPDBViolations": n}


def parse_preemption_args(body: bytes) -> PreemptionArgs:
    data = _object(body)
    pod = _pod(data)
    meta = data.get("nodenametometavictims")
    full = data.get("nodenametovictims")
    victims: dict[str, dict[str, Any]] = {}
    source = meta if meta is not None else full
    if source is None:
        return PreemptionArgs(pod=pod, victims={})
    if not isinstance(source, dict):
        raise ProtocolError("NodeNameToMetaVictims/NodeNameToVictims must be an object")
    for node, entry in source.items():
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise ProtocolError(f"victims of node {node} must be an object")
        entry = {k.lower(): v for k, v in entry.items()}
        pods = entry.get("pods") or []
        if not isinstance(pods, list):
            raise ProtocolError(f"victims of node {node}: Pods must be a list")
        uids = []
        for pod_entry in pods:
            if not isinstance(pod_entry, dict):
                raise ProtocolError(f"victims of node {node}: each pod must be an object")
            if meta is not None:
                uid = {k.lower(): v for k, v in pod_entry.items()}.get("uid")
            else:
                uid = (pod_entry.get("metadata") or {}).get("uid")
            if not isinstance(uid, str):
                raise ProtocolError(f"victims of node {node}: a pod without a UID")
            uids.append({"UID": uid})
        pdb = entry.get("numpdbviolations") or 0
        if not isinstance(pdb, int) or isinstance(pdb, bool):
            raise ProtocolError(f"victims of node {node}: NumPDBViolations must be an integer")
        victims[node] = {"Pods": uids, "NumPDBViolations": pdb}
    return PreemptionArgs(pod=pod, victims=victims)


@dataclass(slots=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def parse_binding_args(body: bytes) -> BindingArgs:
    """{"PodName", "PodNamespace", "PodUID", "Node"}, all strings."""
    data = _object(body)
    values = {}
    for key, field in (
        ("podname", "PodName"),
        ("podnamespace", "PodNamespace"),
        ("poduid", "PodUID"),
        ("node", "Node"),
    ):
        value = data.get(key)
        if not isinstance(value, str) or (key != "poduid" and not value):
            raise ProtocolError(f"{field} must be a non-empty string")
        values[key] = value
    return BindingArgs(values["podname"], values["podnamespace"], values["poduid"], values["node"])


def filter_result(
    *,
    passed: list[str],
    failed: dict[str, str],
    unresolvable: dict[str, str],
    nodes: list[dict[str, Any]] | None,
    error: str = "",
) -> bytes:
    """ExtenderFilterResult. Cache-capable: names; otherwise the unmodified Node objects."""
    result: dict[str, Any] = {
        "NodeNames": passed if nodes is None else None,
        "Nodes": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }
    if nodes is not None:
        keep = set(passed)
        result["Nodes"] = {
            "metadata": {},
            "items": [n for n in nodes if n["metadata"]["name"] in keep],
        }
    return orjson.dumps(result)


def host_priority_list(scores: list[tuple[str, int]]) -> bytes:
    """HostPriorityList: a bare JSON array of {"Host", "Score"} with integer scores."""
    return orjson.dumps([{"Host": host, "Score": int(score)} for host, score in scores])


def preemption_result(victims: dict[str, dict[str, Any]]) -> bytes:
    """ExtenderPreemptionResult: always NodeNameToMetaVictims (section 2.4)."""
    return orjson.dumps({"NodeNameToMetaVictims": victims})


def binding_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def error_body(message: str, *, code: str = "bad_request") -> bytes:
    """The JSON error of a non-200 answer, in the API's shape: {"error": code, "detail": ...}."""
    return orjson.dumps({"error": code, "detail": message})
