"""The runtime value of CEL's `cluster`: group counts over the snapshot, memoized per evaluation.

`cluster.countPodsOnNode(node.name, ns, sel)` is called once per candidate node; the first call
counts the matching pods by node once and later calls are dictionary lookups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from .cel.errors import CelEvalError
from .inputs import ClusterView, PodView

# Label keys a snapshot has not indexed yet: each costs one pass over every pod to index, so
# one evaluation may bring in only this many (a new key per call took 63 s at 20 000 pods).
MAX_NEW_LABEL_KEYS = 16


def _key(selector: Mapping[str, object]) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in selector.items()))


def _identity(pod: PodView) -> str:
    """The uid, or namespace/name for a hand-written pod without one."""
    return pod["uid"] or f"{pod['namespace']}/{pod['name']}"


def _matches(pod: PodView, namespace: str, selector: Mapping[str, object]) -> bool:
    if namespace and pod["namespace"] != namespace:
        return False
    labels = pod["labels"]
    return all(labels.get(k) == v for k, v in selector.items())


class ClusterFunctions:
    """Answers the cluster helpers for one pod's evaluation.

    `countPods` also counts the pod being placed when the snapshot does not have it yet: the
    scheduler can ask about a pod before the watch has delivered it, and a gang must count the
    member that is asking (seed 002).
    """

    __slots__ = ("_by_domain", "_by_node", "_counts", "_new_keys", "_pod", "_view")

    def __init__(self, view: ClusterView | None, pod: PodView) -> None:
        self._view = view
        self._pod = pod
        self._counts: dict[tuple, int] = {}
        self._by_node: dict[tuple, Counter] = {}
        self._by_domain: dict[tuple, Counter] = {}
        self._new_keys: set[str] = set()

    def _pods(self, namespace: str, selector: Mapping[str, object]):
        if self._view is None:
            return ()
        indexed = getattr(self._view, "indexed_labels", None)
        if indexed is not None:
            known = indexed()
            new = {k for k in selector if type(k) is str and k not in known}
            if new - self._new_keys and len(self._new_keys | new) > MAX_NEW_LABEL_KEYS:
                raise CelEvalError(
                    f"cluster helpers: more than {MAX_NEW_LABEL_KEYS} label keys the snapshot "
                    "has not indexed in one evaluation"
                )
            self._new_keys |= new
        return self._view.pods_matching(namespace, selector)

    def count_pods(self, namespace: str, selector: Mapping[str, object]) -> int:
        """Non-terminated pods (bound or pending) in `namespace` ("" = all) matching `selector`."""
        key = (namespace, _key(selector))
        count = self._counts.get(key)
        if count is None:
            pods = self._pods(namespace, selector)
            count = len(pods)
            me = self._pod
            mine = _identity(me)
            if _matches(me, namespace, selector) and not any(_identity(p) == mine for p in pods):
                count += 1
            self._counts[key] = count
        return count

    def count_pods_on_node(
        self, node_name: str, namespace: str, selector: Mapping[str, object]
    ) -> int:
        """Matching pods bound to `node_name`."""
        key = (namespace, _key(selector))
        by_node = self._by_node.get(key)
        if by_node is None:
            by_node = Counter(
                p["nodeName"] for p in self._pods(namespace, selector) if p["nodeName"]
            )
            self._by_node[key] = by_node
        return by_node.get(node_name, 0)

    def count_pods_in_domain(
        self, topology_key: str, value: str, namespace: str, selector: Mapping[str, object]
    ) -> int:
        """Matching pods bound to nodes whose label `topology_key` equals `value` (e.g. a zone)."""
        key = (topology_key, namespace, _key(selector))
        by_domain = self._by_domain.get(key)
        if by_domain is None:
            by_domain = Counter()
            view = self._view
            for pod in self._pods(namespace, selector):
                name = pod["nodeName"]
                node = view.node(name) if name and view is not None else None
                if node is not None and topology_key in node["labels"]:
                    by_domain[node["labels"][topology_key]] += 1
            self._by_domain[key] = by_domain
        return by_domain.get(value, 0)

    def node_count(self) -> int:
        """Nodes in the snapshot."""
        return self._view.node_count() if self._view is not None else 0
