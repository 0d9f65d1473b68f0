"""The snapshot's bound pods as kube-scheduler's plugins read them (plugins.py): `Existing`, built
once per snapshot and brought along from the last one by the snapshot's changes, and the raw
object reads the plugins share (a pod's spec and metadata, its host ports, a node's images).
"""

from __future__ import annotations

import bisect
import weakref
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from policies.engine.inputs import NodeView, PodView

from .requests import fit_score_requests, node_nonzero_share

NS_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


# --- raw object access -----------------------------------------------------------------------


def spec(view: Mapping[str, Any]) -> dict[str, Any]:
    return (view.get("object") or {}).get("spec") or {}


def meta(view: Mapping[str, Any]) -> dict[str, Any]:
    return (view.get("object") or {}).get("metadata") or {}


def nonzero_requests(pod: PodView) -> tuple[int, int]:
    """(milli-cpu, memory) NodeResourcesFit's score adds for the pod (requests.fit_score_requests:
    pod-level resources skipped, 100m / 200 MiB for containers without a request)."""
    req = fit_score_requests(spec(pod))
    return req.get("cpu", 0), req.get("memory", 0)


class Existing:
    """The snapshot's bound, non-terminated pods by node, with the per-node sums the plugins read.
    Built once per snapshot (snapshots are immutable) and shared by every preview over it."""

    def __init__(self, state: Any) -> None:
        self.by_node: dict[str, list[PodView]] = defaultdict(list)
        self.nonzero: dict[str, tuple[int, int]] = {}
        self.with_affinity: list[PodView] = []  # pods with any pod (anti-)affinity
        self.with_anti: list[PodView] = []  # pods with required anti-affinity
        self.ports: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
        self.images: dict[str, int] = defaultdict(int)  # image name -> nodes holding it
        self.node_images: dict[str, dict[str, int]] = {}  # node -> image name -> size
        # bound pods by namespace: spreading counts only the pod's own namespace, so a selector
        # is matched against those pods once instead of against every pod node by node
        self.by_namespace: dict[str, list[PodView]] = defaultdict(list)
        self._cluster_parts(state)
        for pod in state.pods() if state is not None else ():
            if not _counted(pod):
                continue
            node = pod["nodeName"]
            self.by_node[node].append(pod)
            self.by_namespace[pod["namespace"]].append(pod)
            affinity = _affinity_kinds(pod)
            if affinity:
                self.with_affinity.append(pod)
                if affinity == _ANTI:
                    self.with_anti.append(pod)
            self.ports[node].extend(host_ports(pod))
        for node, pods in self.by_node.items():
            self.nonzero[node] = _nonzero(pods)
        for node in state.nodes() if state is not None else ():
            sizes = self.node_images[node["name"]] = image_sizes(node)
            for name in sizes:
                self.images[name] += 1

    def _cluster_parts(self, state: Any) -> None:
        """Namespace name -> labels and the Services / controllers, when the snapshot has them
        (a bare ClusterView without them models a cluster that has none). The API server sets
        kubernetes.io/metadata.name on every Namespace (namespace strategy
        PrepareForCreate/Update), so a selector on it matches even where a cluster file lists a
        Namespace without it."""
        self.namespaces: Mapping[str, Mapping[str, str]] = {
            name: labels if labels.get(NS_NAME_LABEL) == name else {**labels, NS_NAME_LABEL: name}
            for name, labels in (state.namespaces() if hasattr(state, "namespaces") else {}).items()
        }
        self._listed = bool(hasattr(state, "objects") and state.objects("Namespace"))
        self.cluster = state if hasattr(state, "services") else None

    def moved(self, state: Any, changes: Iterable[tuple[str, str, Any, Any]]) -> Existing:
        """The Existing of `state`, a snapshot that differs from this one's by `changes` (its
        Lineage's, policies/cluster/state.py), equal to Existing(state): only the nodes,
        namespaces and lists the changes touch are copied and changed, so the cost follows the
        changes, not the cluster (a rebuild over 150 000 pods took seconds). This one is left
        as it is: previews over the older snapshot may still read it."""
        pods: dict[str, list[Any]] = {}  # key -> [the view before the changes, the one after]
        nodes: set[str] = set()
        for kind, key, old, new in changes:
            if kind == "pod":
                if key in pods:
                    pods[key][1] = new
                else:
                    pods[key] = [old, new]
            elif kind == "node":
                nodes.add(key)
        clone = Existing.__new__(Existing)
        clone.__dict__.update(self.__dict__)
        clone.by_node = defaultdict(list, self.by_node)
        clone.by_namespace = defaultdict(list, self.by_namespace)
        clone.ports = defaultdict(list, self.ports)
        clone.nonzero = dict(self.nonzero)
        copied: set[tuple[str, str]] = set()

        def own(table: dict[str, list[PodView]], which: str, key: str) -> list[PodView]:
            if (which, key) not in copied:
                copied.add((which, key))
                table[key] = list(table.get(key, ()))
            return table[key]

        affinity = anti = None
        touched: set[str] = set()
        for old, new in pods.values():
            for view, add in ((old, False), (new, True)):
                if view is None or not _counted(view):
                    continue
                touched.add(view["nodeName"])
                kinds = _affinity_kinds(view)
                lists = [own(clone.by_node, "node", view["nodeName"])]
                lists.append(own(clone.by_namespace, "namespace", view["namespace"]))
                if kinds:
                    if affinity is None:
                        affinity = clone.with_affinity = list(self.with_affinity)
                    lists.append(affinity)
                    if kinds == _ANTI:
                        if anti is None:
                            anti = clone.with_anti = list(self.with_anti)
                        lists.append(anti)
                for pods_ in lists:
                    if add:
                        bisect.insort(pods_, view, key=_pod_order)
                    else:
                        _remove(pods_, view)
        for node in touched:
            kept = clone.by_node.get(node)
            if kept:
                clone.ports[node] = [port for pod in kept for port in host_ports(pod)]
                clone.nonzero[node] = _nonzero(kept)
            else:  # as a build leaves a node without bound pods: absent
                clone.by_node.pop(node, None)
                clone.ports.pop(node, None)
                clone.nonzero.pop(node, None)
        for namespace in [k for k, v in clone.by_namespace.items() if not v]:
            del clone.by_namespace[namespace]
        if nodes:
            clone.images = defaultdict(int, self.images)
            clone.node_images = dict(self.node_images)
            for name in nodes:
                for image in clone.node_images.pop(name, {}):
                    clone.images[image] -= 1
                    if not clone.images[image]:
                        del clone.images[image]
                node = state.node(name)
                if node is not None:
                    sizes = clone.node_images[name] = image_sizes(node)
                    for image in sizes:
                        clone.images[image] += 1
        clone._cluster_parts(state)
        return clone

    def without(self, pod: PodView) -> Existing:
        """This Existing with one bound pod taken out, for a snapshot that no longer holds it
        (the backtest judges a bound pod as it was judged: not yet there). Only its node's and
        namespace's entries are recomputed; the rest is shared, so the cost is a copy of the
        per-node dicts (O(nodes)), not a rebuild over every pod (O(pods): 20x the cycle)."""
        node, uid = pod["nodeName"], pod["uid"]
        clone = Existing.__new__(Existing)
        clone.__dict__.update(self.__dict__)
        kept = [p for p in self.by_node.get(node, ()) if p["uid"] != uid]
        clone.by_node = {**self.by_node, node: kept}
        clone.by_namespace = {
            **self.by_namespace,
            pod["namespace"]: [
                p for p in self.by_namespace.get(pod["namespace"], ()) if p["uid"] != uid
            ],
        }
        clone.with_affinity = [p for p in self.with_affinity if p["uid"] != uid]
        clone.with_anti = [p for p in self.with_anti if p["uid"] != uid]
        clone.ports = {**self.ports, node: [hp for p in kept for hp in host_ports(p)]}
        shares = [node_nonzero_share(spec(p)) for p in kept]
        clone.nonzero = {
            **self.nonzero,
            node: (sum(c for c, _ in shares), sum(m for _, m in shares)),
        }
        return clone

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """GetNamespaceLabelsSnapshot: the Namespace's labels, empty when it is unknown. A
        snapshot that lists no Namespace infers the label every namespace carries."""
        labels = self.namespaces.get(namespace)
        if labels is not None:
            return labels
        return {} if self._listed or self.cluster is None else {NS_NAME_LABEL: namespace}


_ANTI = 2  # _affinity_kinds: required pod anti-affinity (and so any pod affinity)


def _counted(pod: PodView) -> bool:
    """A pod the plugins count on its node: bound, not terminated."""
    return bool(pod["nodeName"]) and pod["phase"] not in ("Succeeded", "Failed")


def _affinity_kinds(pod: PodView) -> int:
    """0: no pod (anti-)affinity; 1: some; _ANTI: required anti-affinity among it."""
    affinity = spec(pod).get("affinity") or {}
    if not (affinity.get("podAffinity") or affinity.get("podAntiAffinity")):
        return 0
    anti = affinity.get("podAntiAffinity") or {}
    return _ANTI if anti.get("requiredDuringSchedulingIgnoredDuringExecution") else 1


def _nonzero(pods: Iterable[PodView]) -> tuple[int, int]:
    cpu = mem = 0
    for pod in pods:
        c, m = node_nonzero_share(spec(pod))
        cpu += c
        mem += m
    return cpu, mem


def _pod_order(pod: PodView) -> tuple[str, str, str]:
    """The order of the snapshot's pods() (and so of every list of Existing)."""
    return pod["namespace"], pod["name"], pod["uid"]


def _remove(pods: list[PodView], view: PodView) -> None:
    """Takes `view` itself (not an equal one) out of `pods`, a list in _pod_order."""
    at = bisect.bisect_left(pods, _pod_order(view), key=_pod_order)
    while at < len(pods) and pods[at] is not view:
        at += 1
    if at < len(pods):
        del pods[at]


_EXISTING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The last Existing built or brought up to date, with its snapshot's history and version: the
# next snapshot's is derived from it (Existing.moved) when that one's Lineage reaches back to it.
_LAST: list[tuple[object, int, Existing] | None] = [None]
# Past this many changed pods (or a twentieth of the cluster's) a build is cheaper than moving.
MOVE_MAX = 5000


def existing_for(state: Any) -> Existing:
    """The memoized `Existing` of a snapshot (a fresh one for states that cannot be weakly
    referenced)."""
    try:
        found = _EXISTING.get(state)
    except TypeError:
        return Existing(state)
    if found is None:
        found = _EXISTING[state] = _moved(state) or Existing(state)
        lineage = state.lineage() if hasattr(state, "lineage") else None
        if lineage is not None:
            _LAST[0] = (lineage.history, lineage.version, found)
    return found


def _moved(state: Any) -> Existing | None:
    """The last Existing brought to `state` by the changes between them, if `state` follows it
    (its Lineage) closely enough; None otherwise."""
    last = _LAST[0]
    lineage = state.lineage() if hasattr(state, "lineage") else None
    if last is None or lineage is None:
        return None
    history, version, existing = last
    changes = lineage.changes_since(history, version)
    if changes is None or len(changes) > min(MOVE_MAX, max(100, state.pod_count() // 20)):
        return None
    return existing.moved(state, changes)


def existing_register(state: Any, existing: Existing) -> None:
    """Makes `existing` the memoized Existing of `state` (one derived with `without` from a
    snapshot that differs from `state` by that pod only)."""
    _EXISTING[state] = existing


def host_ports(pod: PodView) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of every container and init container port with a hostPort."""
    s = spec(pod)
    out = []
    for c in (s.get("initContainers") or []) + (s.get("containers") or []):
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append(
                    (p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
                )
    return out


def image_sizes(node: NodeView) -> dict[str, int]:
    """Image name -> size of the images the node reports (status.images, every name of each)."""
    sizes = {}
    for image in (node["object"].get("status") or {}).get("images") or ():
        for name in image.get("names") or ():
            sizes[name] = int(image.get("sizeBytes") or 0)
    return sizes
