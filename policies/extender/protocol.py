"""kube-scheduler's extender wire format (../shared/extender-protocol.md), parsed and built.

Requests arrive as Go's encoding/json writes them: PascalCase keys without omitempty (nil
pointers as null), Kubernetes objects in camelCase inside. Go decodes keys case-insensitively,
so we accept any casing of the top-level keys and always answer in PascalCase. Scores are
integers (a 7.0 makes Go discard the whole prioritize response, section 2.3).
"""

from __future__ import annotations

from collections.abc import Iterable
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


# Bounds on the identities a request carries. Kubernetes names are DNS subdomains (253) and
# namespaces DNS labels (63); a uid is a 36-character UUID (128 leaves room for other clusters).
# The extender keeps some of these (the requeue hash, decision records): an anonymous 1 MB uid
# must not become 1 MB of Redis.
MAX_NAME = 253
MAX_NAMESPACE = 63
MAX_UID = 128


def _string(value: Any, field: str, *, limit: int, optional: bool = False) -> str:
    """`value` as a bounded string, or a ProtocolError naming `field`."""
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(f"{field} must be a string, got {_kind(value)}")
    if len(value) > limit:
        raise ProtocolError(f"{field} is longer than {limit} characters")
    return value


def _bounded_strings(values: list[Any], limit: int) -> bool:
    """Whether every item is a str of at most `limit` characters: checked in C (map, set, max)
    rather than item by item in Python, which was a quarter of a 500-name request's time."""
    return set(map(type, values)) == {str} and max(map(len, values)) <= limit


def _kind(value: Any) -> str:
    """A JSON type name for error messages (never the value: it may be huge)."""
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number"
    )


def _mapping(value: Any, field: str, *, optional: bool = False) -> dict[str, Any]:
    """`value` as a JSON object (null allowed when `optional`: Go writes nil as null)."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{field} must be an object, got {_kind(value)}")
    return value


def _pod(data: dict[str, Any], field: str = "Pod") -> dict[str, Any]:
    """The pod, with the fields the extender reads before conversion checked: metadata.name,
    namespace, uid, resourceVersion (bounded strings), spec and status (objects or null) and
    spec.schedulerName (a string or null). The rest is checked by the conversion."""
    pod = _mapping(data.get("pod"), field)
    metadata = _mapping(pod.get("metadata"), f"{field}.metadata")
    name = _string(metadata.get("name"), f"{field}.metadata.name", limit=MAX_NAME)
    if not name:
        raise ProtocolError(f"{field}.metadata.name must not be empty")
    _string(
        metadata.get("namespace"), f"{field}.metadata.namespace", limit=MAX_NAMESPACE, optional=True
    )
    _string(metadata.get("uid"), f"{field}.metadata.uid", limit=MAX_UID, optional=True)
    _string(
        metadata.get("resourceVersion"),
        f"{field}.metadata.resourceVersion",
        limit=MAX_NAME,
        optional=True,
    )
    spec = _mapping(pod.get("spec"), f"{field}.spec", optional=True)
    _string(spec.get("schedulerName"), f"{field}.spec.schedulerName", limit=MAX_NAME, optional=True)
    _mapping(pod.get("status"), f"{field}.status", optional=True)
    return pod


def scheduler_name(pod: dict[str, Any]) -> str:
    """The pod's schedulerName (checked by _pod), kube-scheduler's default when unset."""
    return (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"


@dataclass(slots=True)
class ExtenderArgs:
    """Filter and prioritize requests: the pod and its candidate nodes (names, or full Nodes)."""

    pod: dict[str, Any]
    node_names: list[str]
    nodes: list[dict[str, Any]] | None  # the full objects when nodeCacheCapable is false
    pod_key: bytes | None = None  # the pod as JSON, once a cache needs it (pods.pod_key)

    @property
    def cache_capable(self) -> bool:
        return self.nodes is None


# The most candidates a request may name (kube-scheduler's own cap on a cluster's nodes is far
# higher than Kubernetes' documented 5000; 100 000 bounds a worker's loop over a 64 MB body).
MAX_CANDIDATES = 100_000


class TooMuchWork(Exception):
    """The request has more items than the caller's inline limits: answer it elsewhere (a
    worker process), not on the listener's event loop. Raised before any item is checked."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How many items a request answered inline may carry (issue 27: work grows with items, not
    bytes; 130 KB holds 4000 minimal Node objects): full objects (Nodes.items, victim Pods) and
    node names."""

    objects: int
    names: int


# Before parsing a body under Limits: parsing is itself the cost that grows with the objects
# (orjson.loads of 130 KB holding 4000 Node objects: about 3 ms here). JSON has at least one "{"
# per object, so a body with more than PRESCAN_OBJECTS of these bytes (a pod as kube-scheduler
# sends it has a few hundred objects at most) is left to a worker without being parsed here.
# kube-scheduler's nodeCacheCapable requests (the hot path) name their nodes in a "NodeNames"
# array, which our parse takes over any "Nodes": their objects cost only the parse, bounded by
# the byte limit, and their names are counted after it. Finding that key stops right after the
# pod; counting the braces of a 5000-name body would cost 20-40 us of each filter call.
PRESCAN_OBJECTS = 2000
_NAMES_ARRAY = b'"NodeNames":['


def _prescan(body: bytes) -> None:
    if _NAMES_ARRAY not in body and body.count(b"{") > PRESCAN_OBJECTS:
        raise TooMuchWork("the body")


def _count(items: Any, field: str, *, limit: int | None) -> None:
    """Items of a list at most MAX_CANDIDATES (ProtocolError) and at most `limit` (TooMuchWork);
    anything but a list is left to the field's own check."""
    if isinstance(items, list | dict):
        if len(items) > MAX_CANDIDATES:
            raise ProtocolError(f"{field} has {len(items)} entries; at most {MAX_CANDIDATES}")
        if limit is not None and len(items) > limit:
            raise TooMuchWork(field)


def parse_extender_args(body: bytes, limits: Limits | None = None) -> ExtenderArgs:
    """ExtenderArgs: {"Pod": {...}, "Nodes": NodeList|null, "NodeNames": [..]|null}; with
    `limits`, TooMuchWork for a request with more items (or more bytes that could be items:
    _prescan), found before anything is checked."""
    if limits is not None:
        _prescan(body)
    data = _object(body)
    names = data.get("nodenames")
    node_list = data.get("nodes")
    if names is not None:
        _count(names, "NodeNames", limit=limits and limits.names)
    elif isinstance(node_list, dict):
        _count(node_list.get("items"), "Nodes.items", limit=limits and limits.objects)
    pod = _pod(data)
    if names is not None:
        if not isinstance(names, list):
            raise ProtocolError(f"NodeNames must be an array, got {_kind(names)}")
        if names and not _bounded_strings(names, MAX_NAME):
            for index, name in enumerate(names):  # the first offender, named
                _string(name, f"NodeNames[{index}]", limit=MAX_NAME)
        return ExtenderArgs(pod=pod, node_names=names, nodes=None)
    if node_list is not None:
        items = _mapping(node_list, "Nodes").get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ProtocolError(f"Nodes.items must be an array, got {_kind(items)}")
        node_names = []
        for index, item in enumerate(items):
            where = f"Nodes.items[{index}]"
            metadata = _mapping(_mapping(item, where).get("metadata"), f"{where}.metadata")
            node_names.append(
                _string(metadata.get("name"), f"{where}.metadata.name", limit=MAX_NAME)
            )
        return ExtenderArgs(pod=pod, node_names=node_names, nodes=items)
    # Both null: the scheduler never sends this, but an empty candidate list is well defined.
    return ExtenderArgs(pod=pod, node_names=[], nodes=None)


@dataclass(slots=True)
class PreemptionArgs:
    """Preempt requests: the preemptor and candidate nodes with their victims (UIDs or full Pods)."""

    pod: dict[str, Any]
    victims: dict[str, dict[str, Any]]  # node -> {"Pods": [{"UID": ...}], "NumPDBViolations": n}
    pod_key: bytes | None = None  # as ExtenderArgs.pod_key


def parse_preemption_args(body: bytes, limits: Limits | None = None) -> PreemptionArgs:
    """ExtenderPreemptionArgs; with `limits`, TooMuchWork for more candidate nodes than
    `limits.names` or (NodeNameToVictims) more victim Pod objects than `limits.objects`."""
    if limits is not None:
        _prescan(body)
    data = _object(body)
    meta = data.get("nodenametometavictims")
    full = data.get("nodenametovictims")
    source = meta if meta is not None else full
    field = "NodeNameToMetaVictims" if meta is not None else "NodeNameToVictims"
    _count(source, field, limit=limits and limits.names)
    if meta is None and isinstance(full, dict) and limits is not None:
        pods = sum(
            len(value)
            for entry in full.values()
            if isinstance(entry, dict)
            for key, value in entry.items()
            if isinstance(value, list) and key.lower() == "pods"
        )
        if pods > limits.objects:
            raise TooMuchWork(field)
    pod = _pod(data)
    victims: dict[str, dict[str, Any]] = {}
    if source is None:
        return PreemptionArgs(pod=pod, victims={})
    source = _mapping(source, field)
    for node, entry in source.items():
        _string(node, f"{field} key", limit=MAX_NAME)
        where = f"{field}[{node}]"
        if entry is None:
            continue
        entry = {k.lower(): v for k, v in _mapping(entry, where).items()}
        pods = entry.get("pods") or []
        if not isinstance(pods, list):
            raise ProtocolError(f"{where}.Pods must be an array, got {_kind(pods)}")
        uids = []
        for index, pod_entry in enumerate(pods):
            at = f"{where}.Pods[{index}]"
            pod_entry = _mapping(pod_entry, at)
            if meta is not None:
                uid = {k.lower(): v for k, v in pod_entry.items()}.get("uid")
                uid = _string(uid, f"{at}.UID", limit=MAX_UID)
            else:
                metadata = _mapping(pod_entry.get("metadata"), f"{at}.metadata")
                uid = _string(metadata.get("uid"), f"{at}.metadata.uid", limit=MAX_UID)
            uids.append({"UID": uid})
        pdb = entry.get("numpdbviolations") or 0
        if not isinstance(pdb, int) or isinstance(pdb, bool):
            raise ProtocolError(f"{where}.NumPDBViolations must be an integer")
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
    for key, field, limit in (
        ("podname", "PodName", MAX_NAME),
        ("podnamespace", "PodNamespace", MAX_NAMESPACE),
        ("poduid", "PodUID", MAX_UID),  # required: it is the binding's precondition
        ("node", "Node", MAX_NAME),
    ):
        value = _string(data.get(key), field, limit=limit)
        if not value:
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


def host_priority_list(scores: Iterable[tuple[str, int]]) -> bytes:
    """HostPriorityList: a bare JSON array of {"Host", "Score"} with integer scores.

    kube-scheduler asks about the same node names for every pod: each name's `{"Host":...,
    "Score":` is encoded once and joined with the score's digits, the same bytes as orjson
    writes for the objects, in half the time (issue 13). A name not seen yet, or a score
    outside 0..10, takes the general path (which remembers the name)."""
    pairs = scores if isinstance(scores, list | tuple) else list(scores)
    try:
        body = b",".join([_HOSTS[host] + _SCORE_TAILS[score] for host, score in pairs])
    except (KeyError, TypeError):  # TypeError: an unhashable value, answered below
        return _host_priority_list(pairs)
    return b"[" + body + b"]"


def _host_priority_list(pairs: list[tuple[str, int]]) -> bytes:
    if len(_HOSTS) > _HOSTS_MAX:
        _HOSTS.clear()
    for host, _score in pairs:
        if type(host) is str and host not in _HOSTS:
            _HOSTS[host] = b'{"Host":' + orjson.dumps(host) + b',"Score":'
    return orjson.dumps([{"Host": host, "Score": int(score)} for host, score in pairs])


# Node name -> the encoded start of its HostPriority; bounded (names come from requests).
_HOSTS: dict[str, bytes] = {}
_HOSTS_MAX = 50_000
# Score -> its digits and the closing brace. A float or bool that equals one of these keys
# finds it, and int() of it is that key: the same digits the general path writes.
_SCORE_TAILS = {score: b"%d}" % score for score in range(11)}


def preemption_result(victims: dict[str, dict[str, Any]]) -> bytes:
    """ExtenderPreemptionResult: always NodeNameToMetaVictims (section 2.4)."""
    return orjson.dumps({"NodeNameToMetaVictims": victims})


def binding_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def error_body(message: str, *, code: str = "bad_request") -> bytes:
    """The JSON error of a non-200 answer, in the API's shape: {"error": code, "detail": ...}."""
    return orjson.dumps({"error": code, "detail": message})
