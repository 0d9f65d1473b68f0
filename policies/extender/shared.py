"""One evaluation per pod and candidate set, shared by filter and prioritize.

kube-scheduler calls filter and then prioritize for the same pod, back to back, with the nodes
filter let through. Evaluating the policy once (filters and scores) in filter and answering
prioritize from that evaluation halves the extender's evaluation work per pod.

An entry is only reused for exactly what it was computed from: the same pod content (the pod
object as JSON, pods.pod_key, compared in full: a uid and resourceVersion are only what the
caller says, and a forged pod under a pending pod's uid must not decide the real pod's calls,
issue 27), the same policy version (the compiled object itself), the same snapshot
(the state object itself, and its version) and the same candidate names in the same order
(compared in full, not by hash: no collision can hand out another set's answer). A new snapshot,
a new policy version or another candidate set is a miss and is evaluated afresh.

One exception to "the same version": the live snapshot moves on between a pod's filter and its
prioritize whenever the watcher reports anything (at 5000 nodes, while kube-scheduler binds
100-150 pods a second, for most pods), and prioritize then evaluated all 500 candidates again.
For a policy whose per-node results depend on the pod and the node's view alone
(CompiledPolicy.node_local: nothing reads the cluster), the evaluation is as exact as a new
one while every candidate's view is the very object it read (views are immutable: a change is a
new view), so it is reused then (`moved` counts those reuses).

Filter stores its evaluation under its own candidate set and under the set it answers (the names
that passed): per-node verdicts and raw scores do not depend on the other candidates, and scores
are normalised over the passing nodes only, so an evaluation over S whose passing nodes are P
gives prioritize over P exactly the scores an evaluation over P would.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from operator import is_
from typing import Any

from policies.engine.results import Evaluation

# Filter and prioritize of one pod are consecutive on one connection; a few entries cover a
# retry or two interleaved pods. Each entry holds one evaluation's columns (about 0.3 MB at
# 5000 nodes), so the bound is small.
SIZE = 4


@dataclass(slots=True)
class _Entry:
    names: list[str]
    compiled: Any
    # The snapshot's state, weakly: an entry must not keep a replaced snapshot alive (an offload
    # process drops its old one before it loads the next, and lets go of an idle one, issue 28).
    state: Any  # weakref.ref, or a callable returning it (_weak)
    evaluation: Evaluation
    version: int  # the snapshot's version it was evaluated at
    # The node views it read, in the names' order, for a node-local policy; else None (then
    # only the same version is reused).
    views: list[Any] | None


def _weak(state: Any) -> Any:
    """A weak reference to the state; a callable returning it where none can be made (None
    when there is no snapshot)."""
    try:
        return weakref.ref(state)
    except TypeError:
        return lambda: state


class SharedEvaluations:
    """A small LRU of evaluations; not thread-safe by design: one per process, used from the
    event loop's thread (or a worker process's single request thread)."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._items: OrderedDict[tuple, _Entry] = OrderedDict()
        # The last names list hashed and its hash: prioritize reuses filter's parsed list (the
        # same object), whose hash need not be computed again. Lists are not modified after
        # parsing; the entry holds the list, so its identity cannot be reused meanwhile.
        self._hashed: tuple[list[str], int] | None = None
        # Entries pushed out, kept until the answer is on the wire (Extender.after_answer):
        # freeing an evaluation's columns is thousands of reference drops, tens of microseconds
        # that kube-scheduler would otherwise wait for. Bounded for callers that never free.
        self.evicted: list[_Entry] = []
        self.hits = 0
        self.misses = 0
        self.moved = 0  # hits on a snapshot that moved on, the candidates' views unchanged

    def _names_hash(self, names: list[str]) -> int:
        hashed = self._hashed
        if hashed is not None and hashed[0] is names:
            return hashed[1]
        value = hash(tuple(names))
        self._hashed = (names, value)
        return value

    def key(self, pod_key: bytes | None, served: Any, names: list[str]) -> tuple | None:
        """The lookup key for the request's pod content (pods.pod_key), or None when it
        cannot be cached (a pod too large to remember)."""
        if pod_key is None:
            return None
        return (pod_key, served.name, served.version, len(names), self._names_hash(names))

    def get(
        self,
        key: tuple | None,
        names: list[str],
        compiled: Any,
        state: Any,
        version: int,
        views: Callable[[], list[Any] | None] | None = None,
    ) -> Evaluation | None:
        """The evaluation stored for exactly this request, or None. `views`: the candidates'
        views now, in the names' order (None when a name is unknown), asked only when the
        snapshot's version moved since the evaluation."""
        if key is None:
            return None
        entry = self._items.get(key)
        if (
            entry is None
            or entry.compiled is not compiled
            or entry.state() is not state
            or entry.names != names
            or (entry.version != version and not self._unchanged(entry, views))
        ):
            self.misses += 1
            return None
        entry.version = version
        self._items.move_to_end(key)
        self.hits += 1
        return entry.evaluation

    def _unchanged(self, entry: _Entry, views: Callable[[], list[Any] | None] | None) -> bool:
        """Whether every candidate's view is the one the entry's evaluation read."""
        if entry.views is None or views is None:
            return False
        now = views()
        if now is None or len(now) != len(entry.views) or not all(map(is_, now, entry.views)):
            return False
        self.moved += 1
        return True

    def put(
        self,
        key: tuple | None,
        names: list[str],
        compiled: Any,
        state: Any,
        evaluation: Evaluation,
        version: int,
        views: list[Any] | None = None,
    ) -> None:
        """Stores `evaluation` of `names` at the snapshot's `version`; `views`: the node views
        it read, in the names' order (kept for a node-local policy only)."""
        if key is None:
            return
        kept = views if views is not None and getattr(compiled, "node_local", False) else None
        self._items[key] = _Entry(names, compiled, _weak(state), evaluation, version, kept)
        self._items.move_to_end(key)
        if len(self.evicted) > 2 * self._size:
            self.evicted.clear()
        while len(self._items) > self._size:
            self.evicted.append(self._items.popitem(last=False)[1])

    def clear(self) -> None:
        self._items.clear()
        self.evicted.clear()

    def __len__(self) -> int:
        return len(self._items)
