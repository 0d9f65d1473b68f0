"""kube-scheduler v1.35 filter and score plugins as pure functions over pod and node views.

Each filter returns None (fits) or the reasons kube-scheduler reports; each scorer returns the
raw per-node scores and each normalizer the 0..100 scores, with the formula in its docstring
(pkg/scheduler/framework/plugins/<plugin>/ of kubernetes v1.35.8). Existing pods are read
through `Existing` (existing.py), built once per snapshot.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from policies.engine.inputs import NodeView, PodView

from .existing import (
    Existing,
    host_ports,
    image_sizes,
    nonzero_requests,
    spec,
)

MAX_NODE_SCORE = 100
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# Reason texts, verbatim from the plugins (FailedScheduling events count nodes per text).
R_UNSCHEDULABLE = "node(s) were unschedulable"
R_NODE_NAME = "node(s) didn't match the requested node name"
R_TAINT = "node(s) had untolerated taint(s)"
R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_PORTS = "node(s) didn't have free ports for the requested pod ports"
R_SPREAD = "node(s) didn't match pod topology spread constraints"
R_SPREAD_LABEL = R_SPREAD + " (missing required label)"
R_POD_AFFINITY = "node(s) didn't match pod affinity rules"
R_POD_ANTI = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"


# --- matching helpers ------------------------------------------------------------------------


def tolerates(tolerations: Iterable[Mapping[str, str]], taint: Mapping[str, str]) -> bool:
    """core/v1 Toleration.ToleratesTaint: effect empty or equal; key empty (with Exists) matches
    every key; Exists ignores the value, Equal compares it."""
    for tol in tolerations:
        if tol["effect"] and tol["effect"] != taint["effect"]:
            continue
        if tol["key"] and tol["key"] != taint["key"]:
            continue
        if tol["operator"] == "Exists" or tol["value"] == taint["value"]:
            return True
    return False


def _requirement(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_term_matches(node: NodeView, term: Mapping[str, Any]) -> bool:
    """A NodeSelectorTerm: every matchExpression on labels and every matchField (metadata.name)
    holds; a term with neither matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node["labels"]
    if not all(_requirement(labels, e) for e in exprs):
        return False
    name = {"metadata.name": node["name"]}
    return all(_requirement(name, f) for f in fields)


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: nil matches nothing, {} matches everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement(labels, e) for e in selector.get("matchExpressions") or [])


def required_node_affinity(pod: PodView) -> list[dict[str, Any]] | None:
    affinity = (spec(pod).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if required is None else required.get("nodeSelectorTerms") or []


def node_affinity_matches(pod: PodView, node: NodeView) -> bool:
    """nodeSelector (every label equal) and the required terms (any term) both hold."""
    labels = node["labels"]
    for key, value in pod["nodeSelector"].items():
        if labels.get(key) != value:
            return False
    terms = required_node_affinity(pod)
    return terms is None or any(node_selector_term_matches(node, t) for t in terms)


# --- filters ---------------------------------------------------------------------------------


def filter_node_unschedulable(pod: PodView, node: NodeView) -> list[str] | None:
    """spec.unschedulable rejects unless the pod tolerates node.kubernetes.io/unschedulable."""
    if node["unschedulable"] and not tolerates(
        pod["tolerations"],
        {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"},
    ):
        return [R_UNSCHEDULABLE]
    return None


def filter_node_name(pod: PodView, node: NodeView) -> list[str] | None:
    wanted = spec(pod).get("nodeName") or pod["nodeName"]
    return [R_NODE_NAME] if wanted and wanted != node["name"] else None


def filter_taints(pod: PodView, node: NodeView) -> list[str] | None:
    """Any NoSchedule or NoExecute taint the pod does not tolerate rejects the node."""
    for taint in node["taints"]:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(
            pod["tolerations"], taint
        ):
            return [R_TAINT]
    return None


def filter_node_affinity(pod: PodView, node: NodeView) -> list[str] | None:
    return None if node_affinity_matches(pod, node) else [R_AFFINITY]


def filter_node_ports(pod: PodView, node: NodeView, existing: Existing) -> list[str] | None:
    """A wanted (ip, protocol, port) conflicts with a used one of the same protocol and port
    when either ip is 0.0.0.0 or they are equal."""
    wanted = host_ports(pod)
    if not wanted:
        return None
    for ip, proto, port in wanted:
        for uip, uproto, uport in existing.ports.get(node["name"], ()):
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return [R_PORTS]
    return None


def filter_resources_fit(
    pod: PodView, node: NodeView, names: Mapping[str, str]
) -> list[str] | None:
    """NodeResourcesFit.fitsRequest: pod count + 1 <= allocatable pods; then every requested
    resource r > 0 needs request <= allocatable - requested. Every shortage is a reason
    ("Insufficient cpu"; extended resources by their Kubernetes name via `names`)."""
    reasons = []
    alloc, used = node["allocatable"], node["requested"]
    if node["podCount"] + 1 > alloc["pods"]:
        reasons.append("Too many pods")
    for key, want in pod["requests"].items():
        if want > 0 and want > alloc[key] - used[key]:
            reasons.append(f"Insufficient {names.get(key, key)}")
    return reasons or None


def _selector_is_empty(selector: Mapping[str, Any]) -> bool:
    """LabelSelectorAsSelector gives Everything for a selector with no requirement."""
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def incoming_namespaces(
    term: Mapping[str, Any], owner_ns: str, existing: Existing
) -> frozenset[str] | None:
    """The namespaces a term of the pod being scheduled applies to; None = every namespace.
    PreFilter/PreScore (mergeAffinityTermNamespacesIfNotEmpty): no namespaces and no selector
    -> the pod's own namespace; an empty selector ({}) -> every namespace; otherwise the listed
    namespaces plus every Namespace whose labels the selector matches. v1.35 passes the term
    by value, so the selector is not reset to Nothing as its comment says: it is then matched
    against nil namespace labels (Matches(pod, nil)), and a selector of only NotIn /
    DoesNotExist requirements, which nil labels satisfy, selects every namespace."""
    selector = term.get("namespaceSelector")
    names = set(term.get("namespaces") or ())
    if selector is None:
        return frozenset(names or (owner_ns,))
    if type(selector) is not dict or _selector_is_empty(selector):
        return None
    if label_selector_matches(selector, {}):
        return None
    names.update(
        n for n, labels in existing.namespaces.items() if label_selector_matches(selector, labels)
    )
    return frozenset(names)


def incoming_term_matches(
    term: Mapping[str, Any], namespaces: frozenset[str] | None, target: PodView
) -> bool:
    """A term of the pod being scheduled (namespaces from `incoming_namespaces`) selects `target`."""
    if namespaces is not None and target["namespace"] not in namespaces:
        return False
    return label_selector_matches(term.get("labelSelector"), target["labels"])


def term_matches(
    term: Mapping[str, Any], owner_ns: str, target: PodView, target_ns_labels: Mapping[str, str]
) -> bool:
    """A term of an existing pod in `owner_ns` selects the pod being scheduled (AffinityTerm.
    Matches with the incoming pod's namespace labels, empty when its Namespace is unknown):
    its namespace is listed (the owner's when neither namespaces nor a selector is given), or
    the namespaceSelector matches those labels ({} matches all); then the labelSelector."""
    selector = term.get("namespaceSelector")
    names = term.get("namespaces") or ()
    if not names and selector is None:
        names = (owner_ns,)
    if target["namespace"] not in names and not (
        type(selector) is dict and label_selector_matches(selector, target_ns_labels)
    ):
        return False
    return label_selector_matches(term.get("labelSelector"), target["labels"])


def _affinity(pod: PodView, kind: str, mode: str) -> list[dict[str, Any]]:
    section = (spec(pod).get("affinity") or {}).get(kind) or {}
    return section.get(f"{mode}DuringSchedulingIgnoredDuringExecution") or []


def pod_affinity_state(
    pod: PodView, nodes_by_name: Mapping[str, NodeView], existing: Existing
) -> dict[str, Any] | None:
    """PreFilter of InterPodAffinity: topology pairs counted for the pod's required affinity
    and anti-affinity terms, and the pairs existing pods' required anti-affinity forbids."""
    affinity = _affinity(pod, "podAffinity", "required")
    anti = _affinity(pod, "podAntiAffinity", "required")
    ns_labels = existing.namespace_labels(pod["namespace"])
    existing_anti: set[tuple[str, str]] = set()
    for other in existing.with_anti:
        node = nodes_by_name.get(other["nodeName"])
        if node is None:
            continue
        for term in _affinity(other, "podAntiAffinity", "required"):
            key = term.get("topologyKey", "")
            if key in node["labels"] and term_matches(term, other["namespace"], pod, ns_labels):
                existing_anti.add((key, node["labels"][key]))
    if not affinity and not anti and not existing_anti:
        return None
    # One count per topology pair for all the required affinity terms together
    # (appendWithAffinityTerms): an existing pod counts only if it matches every term
    # (podMatchesAllAffinityTerms), and then for each term's key its node has. Anti-affinity
    # terms count term by term (appendWithAntiAffinityTerms).
    aff_pairs: set[tuple[str, str]] = set()
    anti_pairs: set[tuple[str, str]] = set()
    aff_ns = [incoming_namespaces(t, pod["namespace"], existing) for t in affinity]
    anti_ns = [incoming_namespaces(t, pod["namespace"], existing) for t in anti]
    if affinity or anti:
        for node_name, pods in existing.by_node.items():
            node = nodes_by_name.get(node_name)
            if node is None:
                continue
            labels = node["labels"]
            for other in pods:
                if affinity and all(
                    incoming_term_matches(t, names, other) for t, names in zip(affinity, aff_ns)
                ):
                    for term in affinity:
                        key = term.get("topologyKey", "")
                        if key in labels:
                            aff_pairs.add((key, labels[key]))
                for term, names in zip(anti, anti_ns):
                    key = term.get("topologyKey", "")
                    if key in labels and incoming_term_matches(term, names, other):
                        anti_pairs.add((key, labels[key]))
    # No pair counts a pod at all, and the pod matches all its terms itself: the first pod of
    # a group may go anywhere that has the topology keys (filtering.go satisfyPodAffinity).
    self_match = (
        bool(affinity)
        and not aff_pairs
        and all(incoming_term_matches(t, names, pod) for t, names in zip(affinity, aff_ns))
    )
    return {
        "affinity": affinity,
        "aff_pairs": aff_pairs,
        "anti": anti_pairs,
        "existing_anti": existing_anti,
        "self_match": self_match,
    }


def filter_pod_affinity(node: NodeView, state: dict[str, Any] | None) -> list[str] | None:
    """filtering.go Filter. Required affinity: the node has every term's key (else rejected
    outright) and each term's pair holds a pod matching all the terms (or the self-match
    exception); anti-affinity: no term's pair does; existing pods' anti-affinity: the node's
    pairs are not forbidden. Checked in that order, first failure wins."""
    if state is None:
        return None
    labels = node["labels"]
    pods_exist = True
    for term in state["affinity"]:
        key = term.get("topologyKey", "")
        if key not in labels:
            return [R_POD_AFFINITY]
        if (key, labels[key]) not in state["aff_pairs"]:
            pods_exist = False
    if not pods_exist and not state["self_match"]:
        return [R_POD_AFFINITY]
    if any((k, v) in state["anti"] for k, v in labels.items()):
        return [R_POD_ANTI]
    if any((k, v) in state["existing_anti"] for k, v in labels.items()):
        return [R_EXISTING_ANTI]
    return None


# --- scores ----------------------------------------------------------------------------------


def default_normalize(scores: list[int], *, reverse: bool) -> list[int]:
    """helper.DefaultNormalizeScore: s * 100 // max (100 - that when reversed); all zero ->
    all 0 (all 100 when reversed)."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in scores]
    out = [MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out


def score_taints(pod: PodView, node: NodeView) -> int:
    """Raw: PreferNoSchedule taints not tolerated by a PreferNoSchedule-or-any-effect toleration."""
    tolerations = [t for t in pod["tolerations"] if t["effect"] in ("", "PreferNoSchedule")]
    return sum(
        1
        for taint in node["taints"]
        if taint["effect"] == "PreferNoSchedule" and not tolerates(tolerations, taint)
    )


def score_node_affinity(pod: PodView, node: NodeView) -> int:
    """Raw: sum of the weights of the preferred node affinity terms the node matches."""
    affinity = (spec(pod).get("affinity") or {}).get("nodeAffinity") or {}
    total = 0
    for term in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if node_selector_term_matches(node, term.get("preference") or {}):
            total += int(term.get("weight") or 0)
    return total


def least_requested(requested: int, capacity: int) -> int:
    """(capacity - requested) * 100 // capacity; 0 when over capacity."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested(requested: int, capacity: int) -> int:
    """min(requested, capacity) * 100 // capacity."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """RequestedToCapacityRatio's shape (scores 0..10 scaled by 10), linear between points."""
    points = [(u, s * 10) for u, s in shape]
    for i, (u, s) in enumerate(points):
        if utilization <= u:
            if i == 0:
                return s
            u0, s0 = points[i - 1]
            return s0 + (s - s0) * (utilization - u0) // (u - u0)
    return points[-1][1]


def _alloc_and_requested(
    pod: PodView,
    node: NodeView,
    resource: str,
    existing: Existing,
    pod_nonzero: tuple[int, int],
) -> tuple[int, int]:
    key = resource.replace(".", "_").replace("/", "_").replace("-", "_")
    alloc = node["allocatable"][key]
    if resource in ("cpu", "memory"):
        pod_cpu, pod_mem = pod_nonzero
        node_cpu, node_mem = existing.nonzero.get(node["name"], (0, 0))
        return (alloc, node_cpu + pod_cpu) if resource == "cpu" else (alloc, node_mem + pod_mem)
    want = pod["requests"][key]
    if resource not in ("cpu", "memory", "ephemeral-storage") and want == 0:
        return 0, 0
    return alloc, node["requested"][key] + want


def score_resources_fit(
    pod: PodView,
    node: NodeView,
    existing: Existing,
    strategy: str,
    resources,
    shape,
    pod_nonzero: tuple[int, int] | None = None,
) -> int:
    """LeastAllocated: sum_r w_r * (alloc - req) * 100 // alloc, integer-divided by sum w_r;
    MostAllocated the same with req * 100 // alloc; RequestedToCapacityRatio: the shape at
    req * 100 // alloc, round(sum / sum w_r). req = node's non-zero requests + the pod's; a
    resource the node does not have (alloc 0) is left out of both sums."""
    total = weights = 0
    pod_nonzero = pod_nonzero or nonzero_requests(pod)
    for name, weight in resources:
        alloc, req = _alloc_and_requested(pod, node, name, existing, pod_nonzero)
        if alloc == 0:
            continue
        if strategy == "MostAllocated":
            s = most_requested(req, alloc)
        elif strategy == "RequestedToCapacityRatio":
            s = broken_linear(shape, min(req, alloc) * 100 // alloc)
        else:
            s = least_requested(req, alloc)
        total += s * weight
        weights += weight
    if weights == 0:
        return 0
    if strategy == "RequestedToCapacityRatio":
        return round(total / weights)
    return total // weights


def score_balanced(pod: PodView, node: NodeView, resources) -> int:
    """(1 - std of requested/allocatable fractions, each capped at 1) * 100, truncated; std of
    two fractions is |f1 - f2| / 2. Actual requests (not the non-zero defaults)."""
    fractions = []
    for name, _ in resources:
        key = name.replace(".", "_").replace("/", "_").replace("-", "_")
        alloc = node["allocatable"][key]
        if alloc == 0:
            continue
        fractions.append(min((node["requested"][key] + pod["requests"][key]) / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


MB = 1024 * 1024
_MIN_IMAGE = 23 * MB
_MAX_IMAGE_PER_CONTAINER = 1000 * MB


def score_image_locality(pod: PodView, node: NodeView, existing: Existing, total_nodes: int) -> int:
    """sum over containers of int(image size * nodes holding it / all nodes), clamped to
    [23 MiB, 1000 MiB * containers] and scaled to 0..100. Needs status.images on the node."""
    images = existing.node_images.get(node["name"])
    if images is None:
        images = image_sizes(node)
    s = spec(pod)
    containers = (s.get("initContainers") or []) + (s.get("containers") or [])
    total = 0
    for c in containers:
        name = _normalized_image(c.get("image") or "")
        if name in images and total_nodes:
            total += int(images[name] * (existing.images.get(name, 0) / total_nodes))
    top = _MAX_IMAGE_PER_CONTAINER * max(len(containers), 1)
    total = min(max(total, _MIN_IMAGE), top)
    return MAX_NODE_SCORE * (total - _MIN_IMAGE) // (top - _MIN_IMAGE)


def _normalized_image(name: str) -> str:
    """`nginx` -> `nginx:latest` (images without a tag or digest, as the plugin normalizes)."""
    if name and ":" not in name.rsplit("/", 1)[-1] and "@" not in name:
        return name + ":latest"
    return name


def score_inter_pod_affinity(
    pod: PodView,
    candidates: Sequence[NodeView],
    nodes_by_name: Mapping[str, NodeView],
    existing: Existing,
    hard_weight: int = 1,
) -> list[int] | None:
    """InterPodAffinity (preferred): each existing pod adds, to its node's topology pairs, the
    weights of the pod's preferred affinity terms it matches (minus anti-affinity ones), the
    existing pod's preferred affinity terms matching the pod (minus anti-affinity) and
    hardPodAffinityWeight (1) per required affinity term of the existing pod matching the pod.
    raw(node) = sum over its label pairs; normalized = 100 * (raw - min) / (max - min),
    truncated (0 for all when max == min). None when the plugin skips."""
    pref_aff = _affinity(pod, "podAffinity", "preferred")
    pref_anti = _affinity(pod, "podAntiAffinity", "preferred")
    others = (
        [p for pods in existing.by_node.values() for p in pods]
        if pref_aff or pref_anti
        else existing.with_affinity
    )
    pref_aff_ns = [
        incoming_namespaces(w.get("podAffinityTerm") or {}, pod["namespace"], existing)
        for w in pref_aff
    ]
    pref_anti_ns = [
        incoming_namespaces(w.get("podAffinityTerm") or {}, pod["namespace"], existing)
        for w in pref_anti
    ]
    ns_labels = existing.namespace_labels(pod["namespace"])
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for other in others:
        node = nodes_by_name.get(other["nodeName"])
        if node is None:
            continue
        labels = node["labels"]

        def add(term: Mapping[str, Any], weight: int, labels: Mapping[str, str] = labels) -> None:
            key = term.get("topologyKey", "")
            if key in labels:
                pairs[(key, labels[key])] += weight

        for w, names in zip(pref_aff, pref_aff_ns):
            term = w.get("podAffinityTerm") or {}
            if incoming_term_matches(term, names, other):
                add(term, int(w.get("weight") or 0))
        for w, names in zip(pref_anti, pref_anti_ns):
            term = w.get("podAffinityTerm") or {}
            if incoming_term_matches(term, names, other):
                add(term, -int(w.get("weight") or 0))
        if hard_weight:
            for term in _affinity(other, "podAffinity", "required"):
                if term_matches(term, other["namespace"], pod, ns_labels):
                    add(term, hard_weight)
        for w in _affinity(other, "podAffinity", "preferred"):
            term = w.get("podAffinityTerm") or {}
            if term_matches(term, other["namespace"], pod, ns_labels):
                add(term, int(w.get("weight") or 0))
        for w in _affinity(other, "podAntiAffinity", "preferred"):
            term = w.get("podAffinityTerm") or {}
            if term_matches(term, other["namespace"], pod, ns_labels):
                add(term, -int(w.get("weight") or 0))
    if not pairs:
        return None
    raw = [sum(pairs.get((k, v), 0) for k, v in n["labels"].items()) for n in candidates]
    lo, hi = min(raw, default=0), max(raw, default=0)
    if hi == lo:
        return [0 for _ in raw]
    return [int(MAX_NODE_SCORE * ((s - lo) / (hi - lo))) for s in raw]
