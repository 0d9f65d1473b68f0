"""A pod written by a person -> the pod as kube-apiserver v1.35.8 stores it, as far as a scheduler
plugin reads the difference; and what was added, so that a preview can say so.

kube-scheduler never sees a pod as written: defaulting and admission run first. Those that
change what the default plugins read, applied here in the API server's order:
- SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a container or init container limit without
  a request requests the limit; with pod-level limits, defaultPodRequests sets the pod-level
  cpu/memory requests to the containers' aggregate requests, else to the pod-level limits;
  with hostNetwork every container port without a hostPort gets hostPort = containerPort.
- PrepareForCreate (pkg/registry/core/pod/strategy.go): mutatePodAffinity merges each term's
  matchLabelKeys (key In [the pod's value]) and mismatchLabelKeys (key NotIn [value]) into its
  labelSelector (MatchLabelKeysInPodAffinity, GA); mutateTopologySpreadConstraints merges
  matchLabelKeys into each constraint's labelSelector (MatchLabelKeysInPodTopologySpread-
  SelectorMerge, beta, on). A nil labelSelector is left nil (it matches nothing).
- DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds, enabled by
  default): unless a toleration already covers it (its key empty or equal, its effect empty or
  NoExecute), node.kubernetes.io/not-ready and .../unreachable, Exists, NoExecute, 300 s.
Not applied (they need objects a snapshot does not hold): LimitRanger's defaults from a
namespace's LimitRange, RuntimeClass overhead and scheduling, Priority's value of a
priorityClassName, and any mutating webhook.

Idempotent: a pod already stored gains nothing (a requirement already in the selector is not
added again), so stored pods given as text read the same.
"""

from __future__ import annotations

import copy
from typing import Any

from policies.cluster.convert import NANO, _aggregate, _container_requests_limits

DEFAULT_TOLERATION_SECONDS = 300  # defaultNotReadyTolerationSeconds, defaultUnreachable...
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
_POD_LEVEL = ("cpu", "memory")  # supported at the pod level and overcommittable


def _quantity_text(nanos: int) -> str:
    """An exact quantity string for an amount in nano-units."""
    if nanos % NANO == 0:
        return str(nanos // NANO)
    if nanos % 10**6 == 0:
        return f"{nanos // 10**6}m"
    return f"{nanos}n"


def _requests_from_limits(spec: dict[str, Any], added: list[str]) -> None:
    for section in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(section) or ()):
            resources = c.get("resources") if type(c) is dict else None
            if type(resources) is not dict or type(resources.get("limits")) is not dict:
                continue
            requests = resources.get("requests")
            if requests is None:
                requests = resources["requests"] = {}
            if type(requests) is not dict:
                continue
            for name, value in resources["limits"].items():
                if name not in requests:
                    requests[name] = value
                    added.append(
                        f"spec.{section}[{i}].resources.requests.{name}: {value} (its limit)"
                    )


def _pod_level_requests(spec: dict[str, Any], added: list[str]) -> None:
    """defaultPodRequests, for pods with pod-level limits."""
    resources = spec.get("resources")
    if type(resources) is not dict or not resources.get("limits"):
        return
    limits = resources["limits"]
    requests = resources.get("requests")
    requests = dict(requests) if type(requests) is dict else {}
    where = "pod"
    containers = [
        _container_requests_limits(c, where, "spec.containers", i)[0]
        for i, c in enumerate(spec.get("containers") or ())
    ]
    total: dict[str, int] = {}
    for req in containers:
        for name, n in req.items():
            total[name] = total.get(name, 0) + n
    parts = [(total, False)] + [
        (
            _container_requests_limits(c, where, "spec.initContainers", i)[0],
            type(c) is dict and c.get("restartPolicy") == "Always",
        )
        for i, c in enumerate(spec.get("initContainers") or ())
    ]
    aggregate = _aggregate(parts)
    new = {}
    for name in _POD_LEVEL:
        if name not in requests and name in aggregate:
            new[name] = f"{_quantity_text(aggregate[name])} (the containers' requests)"
            requests[name] = _quantity_text(aggregate[name])
    for name, value in limits.items():
        if name not in requests and (name in _POD_LEVEL or name.startswith("hugepages-")):
            new[name] = f"{value} (its limit)"
            requests[name] = value
    if new:
        resources["requests"] = requests
        added.extend(f"spec.resources.requests.{k}: {v}" for k, v in new.items())


def _host_network_ports(spec: dict[str, Any], added: list[str]) -> None:
    if spec.get("hostNetwork") is not True:
        return
    for section in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(section) or ()):
            for j, port in enumerate((c.get("ports") if type(c) is dict else None) or ()):
                if type(port) is dict and not port.get("hostPort") and port.get("containerPort"):
                    port["hostPort"] = port["containerPort"]
                    added.append(
                        f"spec.{section}[{i}].ports[{j}].hostPort: {port['hostPort']} (hostNetwork)"
                    )


def _merge_keys(
    selector: Any, keys: Any, operator: str, labels: dict[str, str], where: str, added: list[str]
) -> None:
    """applyLabelKeysToLabelSelector, skipping a requirement the selector already has."""
    if type(selector) is not dict or type(keys) is not list:
        return
    exprs = selector.get("matchExpressions")
    exprs = list(exprs) if type(exprs) is list else []
    for key in keys:
        if key not in labels:
            continue
        requirement = {"key": key, "operator": operator, "values": [labels[key]]}
        if requirement not in exprs:
            exprs.append(requirement)
            added.append(f"{where}.labelSelector: {key} {operator} ({labels[key]})")
    selector["matchExpressions"] = exprs


def _label_keys(spec: dict[str, Any], labels: dict[str, str], added: list[str]) -> None:
    affinity = spec.get("affinity")
    if type(affinity) is dict:
        for kind in ("podAffinity", "podAntiAffinity"):
            section = affinity.get(kind)
            if type(section) is not dict:
                continue
            for mode, wrapped in (("required", False), ("preferred", True)):
                terms = section.get(f"{mode}DuringSchedulingIgnoredDuringExecution")
                for i, term in enumerate(terms if type(terms) is list else ()):
                    if wrapped and type(term) is dict:
                        term = term.get("podAffinityTerm")
                    if type(term) is not dict:
                        continue
                    where = f"spec.affinity.{kind}.{mode}[{i}]"
                    selector = term.get("labelSelector")
                    _merge_keys(selector, term.get("matchLabelKeys"), "In", labels, where, added)
                    _merge_keys(
                        selector, term.get("mismatchLabelKeys"), "NotIn", labels, where, added
                    )
    constraints = spec.get("topologySpreadConstraints")
    for i, c in enumerate(constraints if type(constraints) is list else ()):
        if type(c) is dict:
            where = f"spec.topologySpreadConstraints[{i}]"
            _merge_keys(c.get("labelSelector"), c.get("matchLabelKeys"), "In", labels, where, added)


def _default_tolerations(spec: dict[str, Any], added: list[str]) -> None:
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = []
    if type(tolerations) is not list:
        return
    covered = {NOT_READY: False, UNREACHABLE: False}
    for t in tolerations:
        if type(t) is not dict or (t.get("effect") or "NoExecute") != "NoExecute":
            continue
        for key in covered:
            if (t.get("key") or key) == key:
                covered[key] = True
    for key, ok in covered.items():
        if not ok:
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
            added.append(f"spec.tolerations: {key}:NoExecute for {DEFAULT_TOLERATION_SECONDS}s")
    spec["tolerations"] = tolerations


def pod_admit(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the pod as the API server stores it, what defaulting and admission added: one line
    each, "<field>: <value> (<why>)"). `obj` is not modified; a malformed spec is left to the
    conversion that follows to report."""
    spec = obj.get("spec")
    if type(spec) is not dict:
        return obj, []
    meta = obj.get("metadata")
    labels = meta.get("labels") if type(meta) is dict else None
    labels = {str(k): str(v) for k, v in labels.items()} if type(labels) is dict else {}
    stored = {**obj, "spec": copy.deepcopy(spec)}
    spec = stored["spec"]
    added: list[str] = []
    try:
        _requests_from_limits(spec, added)
        _pod_level_requests(spec, added)
    except ValueError:  # a malformed quantity: pod_view names the field
        return obj, []
    _host_network_ports(spec, added)
    _label_keys(spec, labels, added)
    _default_tolerations(spec, added)
    return stored, added
