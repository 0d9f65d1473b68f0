"""The in-memory cluster the engine reads: node and pod views, usage accounting and indexes.

Design
- `ClusterState` is the writer's object: the watcher (or a file/demo loader) feeds it raw JSON
  with `apply_node` / `delete_node` / `apply_pod` / `delete_pod`. Every pod event updates the
  bound node's `requested` and `podCount` incrementally (O(pod's resources + labels)).
- Views are never mutated once handed out. A usage change builds a new NodeView dict; a pod
  update replaces the PodView. A reader holding `state.nodes()` keeps a consistent list.
- `freeze()` returns a `ClusterSnapshot`, an immutable reader sharing the views and the index
  buckets with the state. Afterwards the state copies a bucket before its first change
  (copy-on-write per bucket), so freezing costs only the outer dict copies (2-6 ms at 5000
  nodes / 50 000 pods) and a snapshot never changes, whatever the state does next.
- Both read through the same methods (`_Reader`): `nodes()`, `node()`, `pods()`, `pod()`,
  `pods_matching()` (the engine's `ClusterView`), plus counting helpers for the CEL
  `cluster.*` functions that a snapshot memoizes (it is immutable, so answers stay valid).
- Indexes: namespace -> pods, (label key, value) -> pods, node name -> pods, holding only
  non-terminated pods; a selector query intersects the smallest buckets and never scans.
  A label key is indexed on the first query that names it (one pass over the live pods),
  then kept current by every event.
- Pods are keyed by uid ("namespace/name" when a hand-written pod has none, see `pod_key`).
  A pod bound to a node missing from the snapshot is accounted under that name and shows up
  in the node's usage when the node appears; deleting a node keeps its pods' accounting.
- Storage (Redis): `to_bytes()` / `from_bytes()` write the node and pod views as JSON (orjson):
  a header line, then a line per pod, parsed and compacted one at a time on load (issue 28: a
  load's peak is the bytes plus the compact state, not every pod's raw object at once);
  indexes and accounting are rebuilt on load. `to_bytes(pod_objects=False)` drops the pods'
  raw objects. Pickle works too (same content) but writes 5-10x slower; unpickle only data
  this product wrote.
- Compact pods (policies/cluster/compact.py): every pod view taken from raw JSON or storage
  shares its repetitive parts with the others; a `lean` state (the extender's) also cuts the
  raw objects of pods bound to a node, which it only counts.
"""

from __future__ import annotations

import gc
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson

from policies.cluster.compact import Compactor, lean_object, share_tree
from policies.cluster.convert import (
    OBJECT_KINDS,
    node_view,
    node_with_usage,
    object_key,
    object_view,
    pod_is_terminated,
    pod_key,
    pod_view,
)
from policies.engine.inputs import NodeView, PodView, ResourceMap

_Bucket = dict[str, PodView]
_MEMO_MAX = 4096
# Of the pickled state and of to_bytes(): 1 is one JSON document (still read), 2 a header line
# then one line per pod, so that a reader parses, compacts and indexes one pod at a time
# instead of holding every pod's raw object at once (issue 28: the peak of a load).
_FORMAT = 2
_FORMATS = (1, 2)


def _lean_pod(pod: PodView) -> PodView:
    return {**pod, "object": lean_object(pod["object"], ("name", "namespace", "uid"))}  # type: ignore[typeddict-item]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector around a bulk load. Loads allocate ~20 containers
    per pod and no cycles; the collector would rescan the growing heap many times over (a
    third of the build time at 50 000 pods, two thirds of generate_cluster's)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _selector_key(namespace: str, selector: Mapping[str, str]) -> tuple:
    return (namespace, tuple(sorted(selector.items())))


class _Reader:
    """Read side shared by the mutable state and its frozen snapshots."""

    __slots__ = (
        "__weakref__",
        "_by_label",
        "_by_node",
        "_by_ns",
        "_compactor",
        "_derived",
        "_incomplete",
        "_label_keys",
        "_lineage",
        "_live",
        "_memo",
        "_node_list",
        "_node_names",
        "_nodes",
        "_objects",
        "_pod_list",
        "_pods",
        "pods_seen",
        "version",
    )

    def _init_empty(self, *, lean: bool = False) -> None:
        self.version = 0
        self._lineage: Lineage | None = None  # a frozen snapshot's changes (Lineage)
        # Every pod view taken in is compacted (policies/cluster/compact.py); `lean`: the raw
        # objects of pods bound to a node are cut (the extender's readers).
        self._compactor = Compactor(lean=lean)
        self._nodes: dict[str, NodeView] = {}
        # Nodes without allocatable pods: their status has not been written yet (a kubelet
        # creates a Node, then reports its status), so kube-scheduler cannot place a pod there.
        self._incomplete: set[str] = set()
        self._pods: dict[str, PodView] = {}  # every pod, terminated ones too
        # The highest pod resourceVersion held (decimal ones: etcd's revisions), 0 if none: a
        # request about a pod of at most this version is about one the pods watch delivered.
        self.pods_seen = 0
        self._live: _Bucket = {}  # non-terminated pods: what the helpers count
        # defaultdicts for fast bulk writes; every read goes through .get(), which never adds.
        self._by_ns: dict[str, _Bucket] = defaultdict(dict)
        self._by_label: dict[tuple[str, str], _Bucket] = defaultdict(dict)
        # Label keys the label index covers: built on the first query naming a key, then kept
        # current. Queries name few keys (app, podGroup); indexing every label of every pod
        # up front would cost a quarter of the build time.
        self._label_keys: set[str] = set()
        self._by_node: dict[str, _Bucket] = defaultdict(dict)
        self._memo: dict[tuple, Any] = {}
        self._node_list: list[NodeView] | None = None
        self._node_names: list[str] | None = None
        self._pod_list: list[PodView] | None = None
        # Namespaces, Services, ReplicaSets, StatefulSets, ReplicationControllers: kind ->
        # object_key -> object_view (names, labels, selectors only; see convert.object_view).
        self._objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in OBJECT_KINDS}
        # kind -> (the kind's dict it was derived from, the derived index): kept across pod
        # and node changes (unlike _memo), dropped when an object of the kind changes.
        self._derived: dict[str, tuple[Any, Any]] = {}

    def lineage(self) -> Lineage | None:
        """A frozen snapshot's changes since earlier snapshots of the same state (Lineage);
        None for a mutable state and a snapshot that was not frozen from one."""
        return self._lineage

    # -- nodes ------------------------------------------------------------------------------

    def nodes(self) -> list[NodeView]:
        """Every node view, ordered by name. The list is shared: do not modify it."""
        if self._node_list is None:
            if self._node_names is None:
                self._node_names = sorted(self._nodes)
            self._node_list = [self._nodes[name] for name in self._node_names]
        return self._node_list

    def node(self, name: str) -> NodeView | None:
        """The node view by name, if the snapshot has it."""
        return self._nodes.get(name)

    def node_changes_since(self, mark: int) -> list[str] | None:
        """The names of the nodes whose view was replaced, added or removed since `mark` (a
        `node_mark()` of this object), oldest first; None when they are no longer known. A
        frozen snapshot never changes."""
        return [] if mark == 0 else None

    def node_mark(self) -> int:
        """A mark of this object's node views, for `node_changes_since`."""
        return 0

    def node_lookup(self) -> Callable[[str], NodeView | None]:
        """`node` as a C-level callable (the index's get), for mapping over many names. Do not
        keep it past a change to this state: a frozen snapshot never changes."""
        return self._nodes.get

    def node_count(self) -> int:
        """Number of nodes."""
        return len(self._nodes)

    def incomplete_nodes(self) -> set[str]:
        """Names of the nodes held without a status (no allocatable pods yet): kube-scheduler
        places nothing on such a node (NodeResourcesFit counts pods against allocatable), so
        a question about one means this state is behind it. Shared: do not modify it."""
        return self._incomplete

    # -- pods -------------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        """Every pod view (terminated ones too), ordered by namespace and name. Shared list."""
        if self._pod_list is None:
            self._pod_list = sorted(
                self._pods.values(), key=lambda p: (p["namespace"], p["name"], p["uid"])
            )
        return self._pod_list

    def pod(self, uid: str) -> PodView | None:
        """The pod view by uid (or "namespace/name" for a pod without uid)."""
        return self._pods.get(uid)

    def pod_count(self) -> int:
        """Number of pods, terminated ones included."""
        return len(self._pods)

    def pods_on_node(self, node_name: str) -> list[PodView]:
        """Non-terminated pods bound to the node."""
        return list(self._by_node.get(node_name, {}).values())

    def pods_matching(self, namespace: str, selector: Mapping[str, str]) -> Sequence[PodView]:
        """Non-terminated pods (bound or pending) in `namespace` ("" = every namespace) whose
        labels contain every key/value of `selector`. Served from the indexes; the order is
        deterministic (insertion order of the smallest bucket)."""
        key = ("match", *_selector_key(namespace, selector))
        found = self._memo.get(key)
        if found is None:
            found = tuple(self._match(namespace, selector))
            self._remember(key, found)
        return found

    def _match(self, namespace: str, selector: Mapping[str, str]) -> Iterable[PodView]:
        buckets = []
        if namespace:
            buckets.append(self._by_ns.get(namespace, {}))
        for label, value in selector.items():
            if type(value) is not str or type(label) is not str:
                return ()  # labels are strings: nothing else can match
            if label not in self._label_keys:
                self._index_label_key(label)
            buckets.append(self._by_label.get((label, value), {}))
        if not buckets:
            return self._live.values()
        buckets.sort(key=len)
        smallest, rest = buckets[0], buckets[1:]
        if not rest:
            return smallest.values()
        return [pod for uid, pod in smallest.items() if all(uid in b for b in rest)]

    # -- namespaces, services, controllers (what kube-scheduler's plugins list besides pods) ----

    def objects(self, kind: str) -> Mapping[str, dict[str, Any]]:
        """The snapshot's objects of `kind` (a key of convert.OBJECT_KINDS) by object_key.
        Shared: do not modify it."""
        return self._objects[kind]

    def object_count(self) -> int:
        """Number of Namespaces, Services and controllers held."""
        return sum(len(v) for v in self._objects.values())

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Namespace name -> labels. A source that listed no Namespace (a file of nodes and
        pods, an older snapshot) gets every namespace its pods name, with the one label the
        API server gives every namespace (kubernetes.io/metadata.name)."""
        listed = self._objects["Namespace"]
        if listed:
            return self._derive(
                "Namespace", lambda: {v["name"]: v["labels"] for v in listed.values()}
            )
        found = self._memo.get(("namespaces",))
        if found is None:
            names = {p["namespace"] for p in self._pods.values()} | set(self._by_ns)
            found = {n: {_NS_NAME_LABEL: n} for n in sorted(names)}
            self._remember(("namespaces",), found)
        return found

    def services(self, namespace: str) -> Sequence[Mapping[str, str]]:
        """The spec.selector of every Service of `namespace` that has one (nil selectors
        select nothing), in key order. Indexed by namespace once per change of the Services
        (sorting 6000 Services per question cost ~5 ms)."""

        def index() -> dict[str, tuple[Mapping[str, str], ...]]:
            grouped: dict[str, list[Mapping[str, str]]] = defaultdict(list)
            for _, v in sorted(self._objects["Service"].items()):
                if v["selector"]:
                    grouped[v["namespace"]].append(v["selector"])
            return {ns: tuple(selectors) for ns, selectors in grouped.items()}

        return self._derive("Service", index).get(namespace, ())

    def _derive(self, kind: str, build: Any) -> Any:
        """An index of the kind's objects, rebuilt only when they changed."""
        source = self._objects[kind]
        entry = self._derived.get(kind)
        if entry is None or entry[0] is not source:
            entry = self._derived[kind] = (source, build())
        return entry[1]

    def controller(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A ReplicaSet, StatefulSet or ReplicationController view by namespace and name."""
        return self._objects[kind].get(object_key(kind, namespace, name))

    # -- cluster helpers (CEL `cluster.*`) ------------------------------------------------------

    def count_pods(self, namespace: str, selector: Mapping[str, str]) -> int:
        """cluster.countPods(namespace, selector)."""
        return len(self.pods_matching(namespace, selector))

    def count_pods_on_node(
        self, node_name: str, namespace: str, selector: Mapping[str, str]
    ) -> int:
        """cluster.countPodsOnNode(nodeName, namespace, selector)."""
        return self._counts_by_node(namespace, selector).get(node_name, 0)

    def count_pods_in_domain(
        self, topology_key: str, value: str, namespace: str, selector: Mapping[str, str]
    ) -> int:
        """cluster.countPodsInDomain(topologyKey, value, namespace, selector): matching pods
        bound to a node whose label `topology_key` equals `value` (pending pods and pods on
        nodes missing from the snapshot are in no domain)."""
        key = ("domain", topology_key, *_selector_key(namespace, selector))
        counts = self._memo.get(key)
        if counts is None:
            # One pass: per domain value, the matching pods; then every node's question is O(1).
            counts = Counter()
            for node_name, n in self._counts_by_node(namespace, selector).items():
                node = self._nodes.get(node_name)
                if node is not None and topology_key in node["labels"]:
                    counts[node["labels"][topology_key]] += n
            self._remember(key, counts)
        return counts.get(value, 0)

    def _counts_by_node(self, namespace: str, selector: Mapping[str, str]) -> Counter:
        key = ("by-node", *_selector_key(namespace, selector))
        counts = self._memo.get(key)
        if counts is None:
            counts = Counter(
                p["nodeName"] for p in self.pods_matching(namespace, selector) if p["nodeName"]
            )
            self._remember(key, counts)
        return counts

    def _remember(self, key: tuple, value: Any) -> None:
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[key] = value

    # -- pickling -------------------------------------------------------------------------------

    def to_bytes(self, *, pod_objects: bool = True) -> bytes:
        """The snapshot as bytes for Redis (format 2): a JSON header (version, label keys, node
        views, objects), then one JSON line per pod view; indexes and usage are rebuilt on load.
        orjson writes 5-10x faster than pickle and loading runs no code. pod_objects=False
        cuts each pod's `object` to apiVersion, kind and metadata name/namespace/uid."""
        pods = self._pods.values()
        header = {
            "format": _FORMAT,
            "version": self.version,
            "labelKeys": sorted(self._label_keys),
            "nodes": list(self._nodes.values()),
            "objects": self._object_list(),
        }
        dumps = orjson.dumps
        with gc_paused():  # default=str: YAML-loaded objects may hold datetimes or other scalars
            return b"\n".join(
                [
                    dumps(header, default=str),
                    *(dumps(p if pod_objects else _lean_pod(p), default=str) for p in pods),
                ]
            )

    @classmethod
    def from_bytes(
        cls, data: bytes | Iterable[bytes], *, label_keys: Iterable[str] = (), lean: bool = False
    ) -> Any:
        """The inverse of to_bytes, as this class: `ClusterSnapshot.from_bytes(value)`, or
        `ClusterState.from_bytes(value)` to keep applying events to a stored snapshot.
        The label keys indexed when it was written, and `label_keys` (pass the previous
        snapshot's `indexed_labels()` on a refresh), are indexed while loading, so no query
        on the hot path pays for it. `lean`: see compact.py (the extender's readers).
        Pods are parsed one line at a time and compacted as they come. `data` may come in
        pieces, each a run of whole lines (the store's chunks). ValueError if the bytes are not
        a snapshot."""
        rest: Iterator[Any] = iter(())
        if not isinstance(data, bytes):  # taken one at a time: the store fetches them so
            rest = iter(data)
            data = next(rest, None)  # type: ignore[assignment]
            if not isinstance(data, bytes):
                raise ValueError("not a schedweb cluster snapshot (no bytes)")
        end = data.find(b"\n")
        with gc_paused():
            try:
                state = orjson.loads(data if end < 0 else memoryview(data)[:end])
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"not a schedweb cluster snapshot: {exc}") from None
            if type(state) is not dict or state.get("format") not in _FORMATS:
                raise ValueError("not a schedweb cluster snapshot (unknown format)")
            try:
                shared: dict[Any, Any] = {}  # for this load: equal parts of the nodes, once
                for node in state["nodes"]:
                    for key, value in node.items():
                        if key in _RESOURCE_MAPS:
                            node[key] = ResourceMap(value)
                        elif type(value) in (dict, list):
                            node[key] = share_tree(value, shared)
                del shared
                if state["format"] == 1:
                    pods: Iterable[Any] = state["pods"]
                else:
                    pods = chain(
                        _pod_lines(data, len(data) if end < 0 else end + 1),
                        chain.from_iterable(_pod_lines(chunk, 0) for chunk in rest),
                    )
                state["pods"] = map(_with_resource_maps, pods)
                state["labelKeys"] = [*state.get("labelKeys", ()), *label_keys]
                state["lean"] = lean
                reader = cls.__new__(cls)
                reader.__setstate__(state)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a damaged line
                raise ValueError(f"not a schedweb cluster snapshot: {exc!r}") from None
        return reader

    def index_labels(self, keys: Iterable[str]) -> None:
        """Indexes these label keys now (e.g. those in the active policies' selectors) instead
        of on the first query naming them (~40-100 ms at 50 000 pods)."""
        with gc_paused():
            for key in keys:
                if key not in self._label_keys:
                    self._index_label_key(key)

    def indexed_labels(self) -> frozenset[str]:
        """The label keys the label index covers."""
        return frozenset(self._label_keys)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": self.version,
            "labelKeys": sorted(self._label_keys),
            "nodes": list(self._nodes.values()),
            "pods": list(self._pods.values()),
            "objects": self._object_list(),
        }

    def _object_list(self) -> list[dict[str, Any]]:
        return [v for views in self._objects.values() for v in views.values()]

    def _load_objects(self, views: Iterable[dict[str, Any]]) -> None:
        """Fills the objects of an empty reader (a snapshot written before they were kept has
        none: format 1 carries them as an optional key, so neither side needs a new format)."""
        for view in views:
            if view.get("kind") in self._objects:
                self._objects[view["kind"]][
                    object_key(view["kind"], view["namespace"], view["name"])
                ] = view

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init_empty(lean=state.get("lean", False))
        self._load(state["nodes"], map(self._taken, state["pods"]))
        self._load_objects(state.get("objects") or ())
        self.index_labels(state.get("labelKeys", ()))
        self.version = state["version"]

    def _load(self, nodes: Iterable[NodeView], pods: Iterable[PodView]) -> None:
        """Fills an empty reader from views (their usage is taken as given)."""
        self._nodes = {n["name"]: n for n in nodes}
        self._incomplete = {name for name, n in self._nodes.items() if not _has_status(n)}
        for pod in pods:
            key = pod_key(pod)
            self._pods[key] = pod
            self._saw(pod)
            if not pod_is_terminated(pod):
                self._index_fresh(key, pod)

    def _taken(self, view: PodView) -> PodView:
        """A new pod view as this reader keeps it: its resourceVersion noted (a lean state
        keeps no raw object for a bound pod), then compacted."""
        self._saw(view)
        return self._compactor.pod(view)

    def _saw(self, pod: PodView) -> None:
        """Raises `pods_seen` to the pod's resourceVersion, when that is a decimal number."""
        version = resource_version(pod)
        if version > self.pods_seen:
            self.pods_seen = version

    def _index_fresh(self, key: str, pod: PodView) -> None:
        """Adds a live pod to the indexes, no copy-on-write check (buckets owned by the caller)."""
        self._live[key] = pod
        self._by_ns[pod["namespace"]][key] = pod
        if self._label_keys:
            by_label, labels = self._by_label, pod["labels"]
            for label in self._label_keys:
                value = labels.get(label)
                if value is not None:
                    by_label[label, value][key] = pod
        if pod["nodeName"]:
            self._by_node[pod["nodeName"]][key] = pod

    def _index_label_key(self, label: str) -> None:
        """Indexes one more label key over the live pods (one pass; a snapshot may do this
        too: it reads only its own frozen pods and adds buckets no one else holds)."""
        buckets: dict[tuple[str, str], _Bucket] = defaultdict(dict)
        for key, pod in self._live.items():
            value = pod["labels"].get(label)
            if value is not None:
                buckets[label, value][key] = pod
        self._by_label.update(buckets)
        self._label_keys.add(label)
        self._adopt(self._by_label, buckets)

    def _adopt(self, index: dict, keys: Iterable[Any]) -> None:
        """Hook: buckets just created by this reader (the state marks them its own)."""


class ClusterSnapshot(_Reader):
    """An immutable cluster snapshot: what evaluations, previews and the extender read."""

    __slots__ = ()

    def __init__(self) -> None:
        self._init_empty()

    def __repr__(self) -> str:
        return (
            f"<ClusterSnapshot v{self.version}: {len(self._nodes)} nodes, {len(self._pods)} pods>"
        )


# A frozen snapshot carries the changes made since the snapshot frozen before it, chained, so
# that what a consumer derived from one snapshot can be brought to a later one instead of being
# built again over every pod (the scheduler model's view of the bound pods: seconds at 150 000
# pods). A chain holds at most LINEAGE_MAX changes (the views they name stay alive with it);
# past that it starts again, and a consumer builds afresh.
LINEAGE_MAX = 5000
NODE_LOG_MAX = 4096  # node changes a mutable state names back (node_changes_since)
POD_CHANGE, NODE_CHANGE, OBJECTS_CHANGE = "pod", "node", "objects"


@dataclass(frozen=True, slots=True)
class Lineage:
    """The changes from snapshot version `since` to `version` of one state (`history`): each
    (POD_CHANGE, key, old view or None, new view or None), (NODE_CHANGE, name, None, None) or
    (OBJECTS_CHANGE, kind, None, None); `before` continues the chain back, `length` counts
    the changes along it."""

    history: object
    since: int
    version: int
    changes: tuple[tuple[str, str, Any, Any], ...]
    before: Lineage | None
    length: int

    def changes_since(
        self, history: object, version: int
    ) -> list[tuple[str, str, Any, Any]] | None:
        """The changes from `version` of `history` to this link's version, oldest first; None
        when the chain does not reach back to exactly that version."""
        if history is not self.history:
            return None
        links: list[Lineage] = []
        link: Lineage | None = self
        while link is not None and link.since >= version:
            links.append(link)
            if link.since == version:
                return [change for each in reversed(links) for change in each.changes]
            link = link.before
        return None


class ClusterState(_Reader):
    """The mutable cluster, fed with raw Node and Pod JSON (watch events, a file, the demo)."""

    __slots__ = (
        "_chain",
        "_frozen_version",
        "_history",
        "_journal",
        "_node_log",
        "_node_seq",
        "_owned",
        "_pod_counts",
        "_requested",
        "_shared",
    )

    def __init__(self, *, lean: bool = False) -> None:
        self._init_empty(lean=lean)
        self._requested: dict[str, dict[str, int]] = {}  # node name -> view-unit totals
        self._pod_counts: dict[str, int] = {}  # node name -> live pods bound to it
        # Copy-on-write: after freeze(), buckets are shared with the snapshot until copied.
        self._shared = False
        self._owned: set[tuple[int, Any]] = set()
        # Changes since the last freeze (a snapshot's Lineage); None past LINEAGE_MAX.
        self._history = object()
        self._journal: list[tuple[str, str, Any, Any]] | None = []
        self._frozen_version: int | None = None  # the version of the last snapshot frozen
        self._chain: Lineage | None = None  # that snapshot's Lineage
        # Names of the nodes whose view changed, the last one at _node_seq (bounded): what a
        # reader of this very object (the extender's in-place snapshot) held before can be
        # brought up to date by name instead of looking every name up again.
        self._node_seq = 1
        self._node_log: list[str] = []

    def node_mark(self) -> int:
        return self._node_seq

    def node_changes_since(self, mark: int) -> list[str] | None:
        behind = self._node_seq - mark
        if behind == 0:
            return []
        if not 0 < behind <= len(self._node_log):
            return None
        return self._node_log[-behind:]

    def _node_written(self, name: str) -> None:
        self._node_seq += 1
        log = self._node_log
        log.append(name)
        if len(log) > 2 * NODE_LOG_MAX:
            del log[:NODE_LOG_MAX]

    def _note(self, kind: str, key: str, old: Any = None, new: Any = None) -> None:
        journal = self._journal
        if journal is not None:
            journal.append((kind, key, old, new))
            if len(journal) > LINEAGE_MAX:
                self._journal = None

    def __repr__(self) -> str:
        return f"<ClusterState v{self.version}: {len(self._nodes)} nodes, {len(self._pods)} pods>"

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_objects(
        cls, nodes: Iterable[dict], pods: Iterable[dict], objects: Iterable[dict] = ()
    ) -> ClusterState:
        """A state built in bulk from raw Node and Pod JSON, and `objects`: Namespaces,
        Services and controllers, each with its `kind` (ConversionError on a bad one)."""
        with gc_paused():
            return cls.from_views(
                nodes=[node_view(obj, requested={}, pod_count=0) for obj in nodes],
                objects=[object_view(obj, obj.get("kind")) for obj in objects],
                pods=map(pod_view, pods),  # each compacted as it comes
                compact=True,
            )

    @classmethod
    def from_views(
        cls,
        *,
        nodes: Iterable[NodeView],
        pods: Iterable[PodView],
        objects: Iterable[dict[str, Any]] = (),
        compact: bool = False,
    ) -> ClusterState:
        """A state from already converted views; node usage is recomputed from the pods.
        A later duplicate (same node name, same pod key, same object key) replaces an earlier one.
        `compact`: the views are new, compacted as they are taken (views of another snapshot
        are kept as they are: that one holds them already)."""
        state = cls()
        if compact:
            pods = map(state._taken, pods)
        with gc_paused():
            state._fill(nodes, pods)
            state._load_objects(objects)
        state.version = 1
        return state

    def apply_object(self, kind: str, obj: dict) -> dict[str, Any]:
        """Adds or replaces a Namespace, Service or controller (raw JSON); returns its view."""
        return self.apply_object_view(object_view(obj, kind))

    def apply_object_view(self, view: dict[str, Any]) -> dict[str, Any]:
        """Adds or replaces an object from its view (a stored delta)."""
        kind = view["kind"]
        self._objects_for_write(kind)[object_key(kind, view["namespace"], view["name"])] = view
        self._derived.pop(kind, None)
        self._note(OBJECTS_CHANGE, kind)
        self._changed()
        return view

    def delete_object(self, key: str) -> bool:
        """Removes an object by its object_key; False if unknown."""
        kind = key.split("/", 1)[0]
        if kind not in self._objects or key not in self._objects[kind]:
            return False
        del self._objects_for_write(kind)[key]
        self._derived.pop(kind, None)
        self._note(OBJECTS_CHANGE, kind)
        self._changed()
        return True

    def _objects_for_write(self, kind: str) -> dict[str, dict[str, Any]]:
        """The kind's dict, copied first if a snapshot still shares it."""
        if self._shared and ("objects", kind) not in self._owned:
            self._objects[kind] = dict(self._objects[kind])
            self._owned.add(("objects", kind))
        return self._objects[kind]

    def apply_node(self, obj: dict) -> NodeView:
        """Adds or replaces a node (a watch ADDED/MODIFIED event); returns its new view."""
        name = _name_of(obj)
        view = node_view(obj, requested=self._usage(name), pod_count=self._count(name))
        if view["name"] not in self._nodes:
            self._node_names = None
        self._nodes[view["name"]] = view
        self._node_written(view["name"])
        if _has_status(view):
            self._incomplete.discard(view["name"])
        else:
            self._incomplete.add(view["name"])
        self._note(NODE_CHANGE, view["name"])
        self._changed()
        return view

    def delete_node(self, name: str) -> bool:
        """Removes a node; its pods stay accounted for when it comes back. False if unknown."""
        if self._nodes.pop(name, None) is None:
            return False
        self._node_written(name)
        self._incomplete.discard(name)
        self._node_names = None
        self._note(NODE_CHANGE, name)
        self._changed()
        return True

    def apply_pod(self, obj: dict) -> PodView:
        """Adds or replaces a pod, moving its usage between nodes as it binds, changes or
        terminates; returns its new view."""
        return self.apply_pod_view(self._taken(pod_view(obj)))

    def apply_pod_view(self, view: PodView) -> PodView:
        """Adds or replaces a pod from its view (one taken out for a while, exclude.py)."""
        key = pod_key(view)
        old = self._pods.get(key)
        if old is not None and not pod_is_terminated(old):
            self._forget(key, old)
        self._pods[key] = view
        self._saw(view)
        if not pod_is_terminated(view):
            self._index(key, view)
            if view["nodeName"]:
                self._account(view, +1)
                self._refresh_node(view["nodeName"])
        old_node = old["nodeName"] if old is not None and not pod_is_terminated(old) else ""
        if old_node and (old_node != view["nodeName"] or pod_is_terminated(view)):
            self._refresh_node(old_node)
        self._note(POD_CHANGE, key, old, view)
        self._changed()
        return view

    def delete_pod(self, uid: str) -> bool:
        """Removes a pod by uid (a watch DELETED event); False if unknown."""
        old = self._pods.pop(uid, None)
        if old is None:
            return False
        if not pod_is_terminated(old):
            self._forget(uid, old)
            if old["nodeName"]:
                self._refresh_node(old["nodeName"])
        self._note(POD_CHANGE, uid, old, None)
        self._changed()
        return True

    def freeze(self) -> ClusterSnapshot:
        """An immutable snapshot of the current state (cost: copying the outer dicts)."""
        snap = ClusterSnapshot()
        snap.version = self.version
        snap._nodes = dict(self._nodes)
        snap._incomplete = set(self._incomplete)  # a handful at most
        snap.pods_seen = self.pods_seen
        snap._pods = dict(self._pods)
        snap._live = self._live
        snap._by_ns = dict(self._by_ns)
        snap._by_label = dict(self._by_label)
        snap._label_keys = set(self._label_keys)
        snap._by_node = dict(self._by_node)
        snap._objects = dict(self._objects)  # the kinds' dicts are copied on write
        snap._derived = dict(self._derived)  # indexes of those same dicts
        snap._node_list = self._node_list
        snap._node_names = self._node_names
        snap._pod_list = self._pod_list
        journal, before = self._journal, self._chain
        if self._frozen_version is None or journal is None or before is None:
            # a first snapshot, or too much changed since the last one: a chain starts here
            link = Lineage(self._history, self.version, self.version, (), None, 0)
        else:
            if before.length + len(journal) > LINEAGE_MAX:
                before = Lineage(self._history, before.version, before.version, (), None, 0)
            link = Lineage(
                self._history,
                self._frozen_version,
                self.version,
                tuple(journal),
                before,
                len(journal) + before.length,
            )
        snap._lineage = self._chain = link
        self._journal = []
        self._frozen_version = self.version
        # From now on every bucket (and _live) is shared until this state copies it.
        self._shared = True
        self._owned = set()
        return snap

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling rebuilds the accounting from the pods, so it is always consistent."""
        self.__init__(lean=state.get("lean", False))  # type: ignore[misc]
        self._fill(state["nodes"], map(self._taken, state["pods"]))
        self._load_objects(state.get("objects") or ())
        self.index_labels(state.get("labelKeys", ()))
        self.version = state["version"]

    # -- internals ----------------------------------------------------------------------------

    def _fill(self, nodes: Iterable[NodeView], pods: Iterable[PodView]) -> None:
        """Bulk load into an empty, unshared state: index and account every pod, then give
        each node its usage."""
        self._node_seq += 1  # no name logged: a mark from before is past (a reader rebuilds)
        self._node_log.clear()
        for view in pods:
            key = pod_key(view)
            old = self._pods.get(key)
            if old is not None and not pod_is_terminated(old):
                self._forget(key, old)
            self._pods[key] = view
            self._saw(view)
            if not pod_is_terminated(view):
                self._index_fresh(key, view)
                if view["nodeName"]:
                    self._account(view, +1)
        for view in nodes:
            name = view["name"]
            self._nodes[name] = node_with_usage(
                view, requested=self._usage(name), pod_count=self._count(name)
            )
            if _has_status(view):
                self._incomplete.discard(name)
            else:
                self._incomplete.add(name)

    def _changed(self) -> None:
        self.version += 1
        self._node_list = None  # node views are replaced on usage changes too
        self._pod_list = None
        if self._memo:
            self._memo = {}  # a snapshot may share the old memo: replace, never clear

    def _account(self, pod: PodView, sign: int) -> None:
        usage = self._requested.get(pod["nodeName"])
        if usage is None:
            usage = self._requested[pod["nodeName"]] = {}
        for name, n in pod["requests"].items():
            usage[name] = usage.get(name, 0) + sign * n
        self._pod_counts[pod["nodeName"]] = self._pod_counts.get(pod["nodeName"], 0) + sign

    def _usage(self, node_name: str) -> dict[str, int]:
        """The node's requested totals for a view: zero entries dropped except cpu and memory."""
        usage = self._requested.get(node_name)
        if not usage:
            return {}
        return {k: n for k, n in usage.items() if n or k in _KEEP}

    def _count(self, node_name: str) -> int:
        return self._pod_counts.get(node_name, 0)

    def _refresh_node(self, name: str) -> None:
        node = self._nodes.get(name)
        if node is None:
            return
        self._nodes[name] = node_with_usage(
            node, requested=self._usage(name), pod_count=self._count(name)
        )
        self._node_written(name)

    def _bucket(self, index: dict, key: Any, *, create: bool) -> dict | None:
        """index[key] ready for writing: copied first if a snapshot still shares it."""
        bucket = index.get(key)
        if bucket is None:
            if not create:
                return None
            bucket = index[key] = {}
            if self._shared:
                self._owned.add((id(index), key))
        elif self._shared and (id(index), key) not in self._owned:
            bucket = index[key] = dict(bucket)
            self._owned.add((id(index), key))
        return bucket

    def _live_for_write(self) -> _Bucket:
        if self._shared and ("live",) not in self._owned:
            self._live = dict(self._live)
            self._owned.add(("live",))
        return self._live

    def _index(self, key: str, pod: PodView) -> None:
        if not self._shared:
            self._index_fresh(key, pod)
            return
        self._live_for_write()[key] = pod
        self._bucket(self._by_ns, pod["namespace"], create=True)[key] = pod
        for item in self._indexed_labels(pod):
            self._bucket(self._by_label, item, create=True)[key] = pod
        if pod["nodeName"]:
            self._bucket(self._by_node, pod["nodeName"], create=True)[key] = pod

    def _forget(self, key: str, pod: PodView) -> None:
        """Removes a live pod from the indexes and its node's usage."""
        self._live_for_write().pop(key, None)
        self._unindex(self._by_ns, pod["namespace"], key)
        for item in self._indexed_labels(pod):
            self._unindex(self._by_label, item, key)
        if pod["nodeName"]:
            self._unindex(self._by_node, pod["nodeName"], key)
            self._account(pod, -1)

    def _indexed_labels(self, pod: PodView) -> list[tuple[str, str]]:
        labels = pod["labels"]
        return [(k, labels[k]) for k in self._label_keys if k in labels]

    def _adopt(self, index: dict, keys: Iterable[Any]) -> None:
        if self._shared:
            self._owned.update((id(index), key) for key in keys)

    def _unindex(self, index: dict, bucket_key: Any, key: str) -> None:
        bucket = self._bucket(index, bucket_key, create=False)
        if bucket is None:
            return
        bucket.pop(key, None)
        if not bucket:
            del index[bucket_key]


# The label the API server sets on every namespace (NamespaceDefaultLabelName, Kubernetes 1.21+).
_NS_NAME_LABEL = "kubernetes.io/metadata.name"

_RESOURCE_MAPS = frozenset({"capacity", "allocatable", "requested"})

# Resources a node's `requested` always lists (0 when idle); others are dropped at 0.
_KEEP = frozenset({"cpu", "memory"})


def resource_version(pod: PodView | dict[str, Any]) -> int:
    """A pod's metadata.resourceVersion as a number (a view's raw object, or a raw Pod); 0 when
    absent or not decimal. kube-apiserver's are etcd revisions: one counter for every write, so
    a pod's version below another's means its write came first (the API calls them opaque:
    schedweb only ever skips a wait with it, never judges by it)."""
    obj = pod.get("object", pod) if isinstance(pod, dict) else {}
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if type(value) is str and 0 < len(value) <= 20 and value.isascii() and value.isdigit():
        return int(value)
    return 0


def _pod_lines(data: bytes, start: int) -> Iterator[Any]:
    """The pod views of a format-2 snapshot, parsed one line at a time (no copy of the bytes)."""
    view, loads, size = memoryview(data), orjson.loads, len(data)
    while start < size:
        stop = data.find(b"\n", start)
        if stop < 0:
            stop = size
        yield loads(view[start:stop])
        start = stop + 1


def _with_resource_maps(pod: dict[str, Any]) -> PodView:
    pod["requests"] = ResourceMap(pod["requests"])
    pod["limits"] = ResourceMap(pod["limits"])
    return pod  # type: ignore[return-value]


def _has_status(node: NodeView) -> bool:
    """The node reports allocatable pods (a kubelet wrote its status)."""
    return bool(node["allocatable"].get("pods"))


def _name_of(obj: Any) -> str:
    meta = obj.get("metadata") if type(obj) is dict else None
    return (meta.get("name") if type(meta) is dict else None) or ""
