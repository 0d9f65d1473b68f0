"""Kubernetes JSON (as the API server and `kubectl get -o json` return it) -> engine views.

Pure functions over plain dicts: the live watcher, the `file` source and the demo cluster share
them. Pod requests follow kube-scheduler (k8s.io/component-helpers/resource `PodRequests`):

    requests = max(sum(containers) + sum(sidecars), max_i(init_i + sidecars started before i))
    then pod-level `spec.resources` replaces cpu, memory and hugepages-* where it names them,
    then `spec.overhead` is added.

API-server defaulting is applied first (a container limit without a request requests the limit),
so hand-written pods read the same as the stored ones. Quantities are summed exactly (in
nano-units) and rounded up once: CPU to millicores, everything else to whole units.
The in-place resize (`status.containerStatuses[].allocatedResources`) and DRA claim terms of
`PodRequests` are not modelled: spec requests are used.

Views share structure with the input dict (`object`, `labels`...); neither is ever mutated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from policies.engine.inputs import NodeView, PodView, ResourceMap, resource_key
from policies.engine.quantity import QuantityError, parse_quantity

TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
NANO = 10**9  # nano-units per unit
_NANO_PER_MILLI = 10**6
# Pod-level resources kube-scheduler honours (component-helpers IsSupportedPodLevelResource).
_POD_LEVEL = ("cpu", "memory")
_HUGEPAGES = "hugepages-"
_QOS_RESOURCES = ("cpu", "memory")

# Quantity strings repeat across a cluster ("100m", "128Mi"); parsing with Fraction costs ~5 us,
# a dict hit ~50 ns. Bounded so a hostile stream of unique strings cannot grow it without limit.
_NANOS_CACHE: dict[str, int] = {}
_NANOS_CACHE_MAX = 20_000
_KEY_CACHE: dict[str, str] = {}


class ConversionError(ValueError):
    """A Kubernetes object the views cannot be built from; the message names object and field."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        self.where = where
        self.field = field
        self.problem = problem
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")

    def under(self, prefix: str) -> ConversionError:
        """The same error with its field placed under `prefix` (".cpu" -> "x.requests.cpu")."""
        return ConversionError(self.where, prefix + self.field, self.problem)


def pod_is_terminated(view: Mapping[str, Any]) -> bool:
    """Succeeded and Failed pods hold no resources and are counted nowhere."""
    return view["phase"] in TERMINATED_PHASES


def pod_key(view: Mapping[str, Any]) -> str:
    """The identity a snapshot stores a pod under: its uid, or "namespace/name" when it has none
    (hand-written pods)."""
    return view["uid"] or f"{view['namespace']}/{view['name']}"


# ---------------------------------------------------------------------------------------------
# quantities


def _nanos(value: Any, where: str, field: str) -> int:
    """Exact nano-units of a quantity (ceil below 1n, as apimachinery rounds); JSON numbers are
    accepted as the API server accepts them (`cpu: 2` in YAML)."""
    if type(value) is str:
        cached = _NANOS_CACHE.get(value)
        if cached is not None:
            return cached
        text = value
    elif type(value) in (int, float):
        text = repr(value)
    else:
        raise ConversionError(
            where, field, f"invalid quantity {value!r}: expected a string or a number"
        )
    try:
        nanos = math.ceil(parse_quantity(text) * NANO)
    except QuantityError:
        raise ConversionError(where, field, f'invalid quantity "{text}"') from None
    if nanos < 0:
        raise ConversionError(where, field, f'invalid quantity "{text}": must not be negative')
    if type(value) is str:
        if len(_NANOS_CACHE) >= _NANOS_CACHE_MAX:
            _NANOS_CACHE.clear()
        _NANOS_CACHE[value] = nanos
    return nanos


def _key(name: str) -> str:
    key = _KEY_CACHE.get(name)
    if key is None:
        if len(_KEY_CACHE) >= _NANOS_CACHE_MAX:
            _KEY_CACHE.clear()
        key = _KEY_CACHE[name] = resource_key(name)
    return key


def _resource_map(nanos: Mapping[str, int]) -> ResourceMap:
    """Nano-unit totals -> a view map: cpu = ceil(n / 1e6) millicores, others ceil(n / 1e9)."""
    out = ResourceMap()
    keys = _KEY_CACHE
    for name, n in nanos.items():
        if name == "cpu":
            out["cpu"] = -(-n // _NANO_PER_MILLI)
        else:
            out[keys.get(name) or _key(name)] = -(-n // NANO)
    return out


def _quantities(raw: Any, where: str, field: str) -> dict[str, int]:
    """A ResourceList ({"cpu": "250m"}) -> {"cpu": 250_000_000} nano-units."""
    if not raw:
        return {}
    if type(raw) is not dict:
        raise ConversionError(where, field, f"expected an object, got {_type_name(raw)}")
    out = {}
    cached = _NANOS_CACHE.get
    for name, q in raw.items():
        n = cached(q) if type(q) is str else None
        out[name] = n if n is not None else _nanos(q, where, f"{field}.{name}")
    return out


# ---------------------------------------------------------------------------------------------
# small typed accessors: a malformed object gets a field-naming error, never a TypeError


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _dict(parent: Mapping[str, Any], key: str, where: str, field: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if type(value) is not dict:
        raise ConversionError(where, field, f"expected an object, got {_type_name(value)}")
    return value


def _list(parent: Mapping[str, Any], key: str, where: str, field: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if type(value) is not list:
        raise ConversionError(where, field, f"expected a list, got {_type_name(value)}")
    return value


def _str_map(parent: Mapping[str, Any], key: str, where: str, field: str) -> dict[str, str]:
    """Labels, annotations, nodeSelector: every value must be a string (`gpu: true` unquoted in
    YAML is a bool, which the API server rejects too)."""
    value = parent.get(key)
    if not value:
        return {}
    if type(value) is not dict:
        raise ConversionError(where, field, f"expected an object, got {_type_name(value)}")
    for k, v in value.items():
        if type(v) is not str:
            raise ConversionError(where, f"{field}.{k}", f"expected a string, got {_type_name(v)}")
    return value


def _metadata(obj: Any, kind: str) -> tuple[dict[str, Any], str, str]:
    """(metadata, name, namespace) or a ConversionError naming what is missing."""
    if type(obj) is not dict:
        raise ConversionError(kind, "", f"expected a JSON object, got {_type_name(obj)}")
    meta = obj.get("metadata")
    if type(meta) is not dict:
        raise ConversionError(kind, "metadata", "missing or not an object")
    name = meta.get("name")
    namespace = meta.get("namespace") or ("default" if kind == "pod" else "")
    if type(namespace) is not str:
        raise ConversionError(kind, "metadata.namespace", "expected a string")
    if not name or type(name) is not str:
        where = f"{kind} {namespace}/<unnamed>" if kind == "pod" else kind
        raise ConversionError(where, "metadata.name", "missing or not a string")
    return meta, name, namespace


def _without(obj: dict[str, Any], meta: dict[str, Any], status_key: str | None) -> dict[str, Any]:
    """The raw object minus metadata.managedFields (and status.<status_key>), copying only the
    dicts on the path so the input stays untouched."""
    drop_status = status_key is not None and status_key in (obj.get("status") or {})
    if "managedFields" not in meta and not drop_status:
        return obj
    out = obj.copy()
    if "managedFields" in meta:
        out["metadata"] = meta = meta.copy()
        del meta["managedFields"]
    if drop_status:
        out["status"] = status = obj["status"].copy()
        del status[status_key]
    return out


# ---------------------------------------------------------------------------------------------
# pods


def _container_requests_limits(
    container: Any, where: str, section: str, index: int
) -> tuple[dict[str, int], dict[str, int]]:
    """One container's (requests, limits) in nano-units, requests defaulted from limits as the
    API server does (SetDefaults_Pod). Field names are only formatted for an error."""
    if type(container) is not dict:
        field = f"{section}[{index}]"
        raise ConversionError(where, field, f"expected an object, got {_type_name(container)}")
    resources = container.get("resources")
    if not resources:
        return {}, {}
    if type(resources) is not dict:
        raise ConversionError(where, f"{section}[{index}].resources", "expected an object")
    try:
        requests = _quantities(resources.get("requests"), where, "")
    except ConversionError as exc:
        raise exc.under(f"{section}[{index}].resources.requests") from None
    try:
        limits = _quantities(resources.get("limits"), where, "")
    except ConversionError as exc:
        raise exc.under(f"{section}[{index}].resources.limits") from None
    for name, n in limits.items():
        requests.setdefault(name, n)
    return requests, limits


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, n in more.items():
        total[name] = total.get(name, 0) + n


def _max(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, n in more.items():
        if n > total.get(name, -1):
            total[name] = n


def _aggregate(parts: list[tuple[dict[str, int], bool]]) -> dict[str, int]:
    """component-helpers aggregateContainerResourcesByFn over (resources, kind) pairs of the
    init containers, regular total already in parts[0]; kind True = sidecar (restartPolicy
    Always). init_use(i) = init_i + sidecars before i; result = max(regular + sidecars,
    max_i init_use(i))."""
    result = dict(parts[0][0])
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for resources, is_sidecar in parts[1:]:
        if is_sidecar:
            _add(result, resources)
            _add(sidecars, resources)
            _max(init_peak, sidecars)
        else:
            use = dict(resources)
            _add(use, sidecars)
            _max(init_peak, use)
    _max(result, init_peak)
    return result


def _pod_level_supported(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith(_HUGEPAGES)


def _pod_resources(
    spec: dict[str, Any], where: str
) -> tuple[dict[str, int], dict[str, int], list[tuple[dict[str, int], dict[str, int]]], bool]:
    """(requests, limits, per-container (requests, limits), pod-level set) in nano-units."""
    containers = _list(spec, "containers", where, "spec.containers")
    per_container = [
        _container_requests_limits(c, where, "spec.containers", i) for i, c in enumerate(containers)
    ]
    if len(per_container) == 1:  # the common case: the container's own fresh dicts
        req_total, lim_total = per_container[0]
        req_total, lim_total = dict(req_total), dict(lim_total)
    else:
        req_total, lim_total = {}, {}
        for req, lim in per_container:
            _add(req_total, req)
            _add(lim_total, lim)
    init_containers = _list(spec, "initContainers", where, "spec.initContainers")
    if init_containers:
        req_parts = [(req_total, False)]
        lim_parts = [(lim_total, False)]
        for i, container in enumerate(init_containers):
            req, lim = _container_requests_limits(container, where, "spec.initContainers", i)
            per_container.append((req, lim))
            is_sidecar = container.get("restartPolicy") == "Always"
            req_parts.append((req, is_sidecar))
            lim_parts.append((lim, is_sidecar))
        req_total = _aggregate(req_parts)
        lim_total = _aggregate(lim_parts)

    pod_level = False
    pod_resources = spec.get("resources")
    if pod_resources:
        if type(pod_resources) is not dict:
            raise ConversionError(where, "spec.resources", "expected an object")
        pod_req = _quantities(pod_resources.get("requests"), where, "spec.resources.requests")
        pod_lim = _quantities(pod_resources.get("limits"), where, "spec.resources.limits")
        pod_req = {k: n for k, n in pod_req.items() if _pod_level_supported(k)}
        pod_lim = {k: n for k, n in pod_lim.items() if _pod_level_supported(k)}
        for name, n in pod_lim.items():  # defaultPodRequests: a pod-level limit is the request
            pod_req.setdefault(name, n)
        pod_level = bool(pod_req or pod_lim)
        req_total.update(pod_req)
        lim_total.update(pod_lim)
        if pod_level:
            per_container = [(pod_req, pod_lim)]

    overhead = spec.get("overhead")
    if overhead:
        overhead = _quantities(overhead, where, "spec.overhead")
        _add(req_total, overhead)
        # PodLimits adds overhead only to limits that are set and non-zero.
        for name, n in overhead.items():
            if lim_total.get(name):
                lim_total[name] += n
    return req_total, lim_total, per_container, pod_level


def _qos_class(parts: list[tuple[dict[str, int], dict[str, int]]], pod_level: bool) -> str:
    """Kubernetes ComputePodQOS: BestEffort without any cpu/memory request or limit; Guaranteed
    when every container (or the pod level) limits both cpu and memory and requests equal limits;
    else Burstable. Only positive quantities count."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for req, lim in parts:
        found = 0
        for name in _QOS_RESOURCES:
            if req.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + req[name]
            if lim.get(name, 0) > 0:
                limits[name] = limits.get(name, 0) + lim[name]
                found += 1
        # A container must limit both cpu and memory; with pod-level resources only if limits
        # are given at all (ComputePodQOS checks the pod level only when it has limits).
        if found < 2 and (not pod_level or lim):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _owner(meta: dict[str, Any], where: str) -> tuple[str, str]:
    """The controller ownerReference, else the first one, else ("", "")."""
    refs = _list(meta, "ownerReferences", where, "metadata.ownerReferences")
    chosen = None
    for ref in refs:
        if type(ref) is dict and ref.get("controller") is True:
            chosen = ref
            break
    if chosen is None and refs and type(refs[0]) is dict:
        chosen = refs[0]
    if chosen is None:
        return "", ""
    return str(chosen.get("kind") or ""), str(chosen.get("name") or "")


def _tolerations(spec: dict[str, Any], where: str) -> list[dict[str, str]]:
    tolerations = spec.get("tolerations")
    if not tolerations:
        return []
    if type(tolerations) is not list:
        raise ConversionError(where, "spec.tolerations", "expected a list")
    out = []
    for tol in tolerations:
        if type(tol) is not dict:
            i = tolerations.index(tol)
            raise ConversionError(where, f"spec.tolerations[{i}]", "expected an object")
        get = tol.get
        # An empty operator means Equal (core/v1 Toleration).
        out.append(
            {
                "key": get("key") or "",
                "operator": get("operator") or "Equal",
                "value": get("value") or "",
                "effect": get("effect") or "",
            }
        )
    return out


def pod_view(obj: dict[str, Any]) -> PodView:
    """The engine's view of a Pod (see PodView); ConversionError on a malformed object."""
    meta, name, namespace = _metadata(obj, "pod")
    where = f"pod {namespace}/{name}"
    spec = _dict(obj, "spec", where, "spec")
    status = _dict(obj, "status", where, "status")
    requests, limits, parts, pod_level = _pod_resources(spec, where)
    requests.setdefault("cpu", 0)
    requests.setdefault("memory", 0)
    qos = status.get("qosClass") or _qos_class(parts, pod_level)
    owner_kind, owner_name = _owner(meta, where)
    priority = spec.get("priority") or 0
    if type(priority) is not int:
        raise ConversionError(where, "spec.priority", f"expected an integer, got {priority!r}")
    return {
        "uid": meta.get("uid") or "",
        "name": name,
        "namespace": namespace,
        "labels": _str_map(meta, "labels", where, "metadata.labels"),
        "annotations": _str_map(meta, "annotations", where, "metadata.annotations"),
        "schedulerName": spec.get("schedulerName") or "default-scheduler",
        "priority": priority,
        "qosClass": qos,
        "requests": _resource_map(requests),
        "limits": _resource_map(limits),
        "nodeSelector": _str_map(spec, "nodeSelector", where, "spec.nodeSelector"),
        "tolerations": _tolerations(spec, where),
        "ownerKind": owner_kind,
        "ownerName": owner_name,
        "nodeName": spec.get("nodeName") or "",
        "phase": status.get("phase") or "Pending",
        "object": _without(obj, meta, None),
    }


# ---------------------------------------------------------------------------------------------
# nodes


def _taints(spec: dict[str, Any], where: str) -> list[dict[str, str]]:
    out = []
    for i, taint in enumerate(_list(spec, "taints", where, "spec.taints")):
        if type(taint) is not dict:
            raise ConversionError(where, f"spec.taints[{i}]", "expected an object")
        out.append(
            {
                "key": taint.get("key") or "",
                "value": taint.get("value") or "",
                "effect": taint.get("effect") or "",
            }
        )
    return out


def _conditions(status: dict[str, Any], where: str) -> dict[str, str]:
    out = {}
    for i, cond in enumerate(_list(status, "conditions", where, "status.conditions")):
        if type(cond) is not dict or not cond.get("type"):
            raise ConversionError(
                where, f"status.conditions[{i}]", "expected an object with a type"
            )
        out[cond["type"]] = cond.get("status") or "Unknown"
    return out


def node_view(obj: dict[str, Any], *, requested: Mapping[str, int], pod_count: int) -> NodeView:
    """The engine's view of a Node. `requested` (view keys: cpu in millicores) and `pod_count`
    come from the pods bound to it; the map is copied, cpu and memory always present."""
    meta, name, _ = _metadata(obj, "node")
    where = f"node {name}"
    spec = _dict(obj, "spec", where, "spec")
    status = _dict(obj, "status", where, "status")
    capacity = _resource_map(_quantities(status.get("capacity"), where, "status.capacity"))
    allocatable_raw = status.get("allocatable")
    # A node without status.allocatable can use its whole capacity (kubelet default).
    allocatable = (
        _resource_map(_quantities(allocatable_raw, where, "status.allocatable"))
        if allocatable_raw is not None
        else ResourceMap(capacity)
    )
    used = ResourceMap(requested)
    used.setdefault("cpu", 0)
    used.setdefault("memory", 0)
    return {
        "uid": meta.get("uid") or "",
        "name": name,
        "labels": _str_map(meta, "labels", where, "metadata.labels"),
        "annotations": _str_map(meta, "annotations", where, "metadata.annotations"),
        "taints": _taints(spec, where),
        "unschedulable": spec.get("unschedulable") is True,
        "conditions": _conditions(status, where),
        "capacity": capacity,
        "allocatable": allocatable,
        "requested": used,
        "podCount": pod_count,
        # status.images stays: kube-scheduler's ImageLocality scores from it (issue 16).
        "object": _without(obj, meta, None),
    }


def node_with_usage(view: NodeView, *, requested: Mapping[str, int], pod_count: int) -> NodeView:
    """A new view of the same node with other usage; the old view is left as it was (readers
    holding it keep a consistent picture)."""
    used = ResourceMap(requested)
    used.setdefault("cpu", 0)
    used.setdefault("memory", 0)
    new = dict(view)
    new["requested"] = used
    new["podCount"] = pod_count
    return new  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# the objects kube-scheduler's plugins read besides nodes and pods

# Kind -> API resource (the list/watch name). Namespaces: InterPodAffinity's namespaceSelector;
# Services and the controllers: PodTopologySpread's system defaults (helper.DefaultSelector).
OBJECT_KINDS = {
    "Namespace": "namespaces",
    "Service": "services",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "ReplicationController": "replicationcontrollers",
}
_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def object_key(kind: str, namespace: str, name: str) -> str:
    """The snapshot's key of a Namespace, Service or controller: "Kind/namespace/name"."""
    return f"{kind}/{namespace}/{name}"


def _label_selector(spec: dict[str, Any], where: str) -> dict[str, Any] | None:
    """spec.selector as a metav1.LabelSelector (None when absent), checked as
    LabelSelectorAsSelector checks it: a selector it would refuse is None (matches nothing)."""
    selector = spec.get("selector")
    if selector is None:
        return None
    if type(selector) is not dict:
        raise ConversionError(where, "spec.selector", f"expected an object, got {selector!r}")
    labels = _str_map(selector, "matchLabels", where, "spec.selector.matchLabels")
    exprs = []
    for i, e in enumerate(_list(selector, "matchExpressions", where, "spec.selector")):
        if type(e) is not dict or type(e.get("key")) is not str:
            raise ConversionError(where, f"spec.selector.matchExpressions[{i}]", "malformed")
        op, values = e.get("operator"), e.get("values") or []
        if op not in _LABEL_OPERATORS or bool(values) != (op in ("In", "NotIn")):
            return None  # LabelSelectorAsSelector fails: DefaultSelector skips the controller
        exprs.append({"key": e["key"], "operator": op, "values": [str(v) for v in values]})
    return {"matchLabels": labels, "matchExpressions": exprs}


def object_view(obj: Any, kind: str) -> dict[str, Any]:
    """The few fields the model reads of a Namespace (labels), a Service (spec.selector, a map;
    None when absent or empty: an empty map does not survive the API server's storage) or a
    ReplicaSet / StatefulSet (spec.selector, a LabelSelector) / ReplicationController (its map,
    defaulted to the template's labels as the API server does). Kept small on purpose: a
    cluster holds thousands of ReplicaSets and the snapshot holds every one."""
    if kind not in OBJECT_KINDS:
        raise ConversionError(kind, "kind", f"not one of {', '.join(OBJECT_KINDS)}")
    meta, name, namespace = _metadata(obj, kind.lower())
    if kind != "Namespace" and not namespace:
        namespace = "default"
    where = f"{kind.lower()} {namespace}/{name}" if namespace else f"{kind.lower()} {name}"
    view: dict[str, Any] = {
        "kind": kind,
        "namespace": "" if kind == "Namespace" else namespace,
        "name": name,
        "resourceVersion": str(meta.get("resourceVersion") or ""),
    }
    if kind == "Namespace":
        # as listed: the model adds kubernetes.io/metadata.name where a file omits it
        view["labels"] = _str_map(meta, "labels", where, "metadata.labels")
        return view
    spec = _dict(obj, "spec", where, "spec")
    if kind == "Service":
        view["selector"] = _str_map(spec, "selector", where, "spec.selector") or None
    elif kind == "ReplicationController":
        selector = _str_map(spec, "selector", where, "spec.selector")
        if not selector:
            template = _dict(spec, "template", where, "spec.template")
            tmeta = _dict(template, "metadata", where, "spec.template.metadata")
            selector = _str_map(tmeta, "labels", where, "spec.template.metadata.labels")
        view["selector"] = selector
    else:
        view["selector"] = _label_selector(spec, where)
    return view
