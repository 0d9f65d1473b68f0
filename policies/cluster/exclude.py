"""A snapshot without one pod, for re-judging a pod that is bound now as it was judged then.

When kube-scheduler judged a pod, the pod itself held nothing on any node; once bound, it holds
its requests on its node and counts for its own spread and affinity terms. Re-evaluating it over
today's snapshot as is would count it twice. `PodExcluder.without(uid)` gives the snapshot with
that pod taken out: one mutable copy of the snapshot is built on the first call (the cost of a
what-if copy, O(pods)); each call then deletes the pod, freezes (copying the outer dicts only)
and puts the pod back, so the snapshot the caller holds never changes.
"""

from __future__ import annotations

from dataclasses import replace

from policies.cluster.convert import OBJECT_KINDS, pod_is_terminated
from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterState


class PodExcluder:
    """Snapshots of `cluster` each without one pod (see the module docstring)."""

    def __init__(self, cluster: LoadedCluster) -> None:
        self.cluster = cluster
        self._work: ClusterState | None = None

    def without(self, uid: str) -> tuple[LoadedCluster, bool]:
        """(the cluster without the live pod `uid`, True), or (the cluster as is, False) when
        the snapshot holds no such pod bound to a node."""
        pod = self.cluster.state.pod(uid) if uid else None
        if pod is None or not pod["nodeName"] or pod_is_terminated(pod):
            return self.cluster, False
        if self._work is None:
            state = self.cluster.state
            self._work = ClusterState.from_views(
                nodes=state.nodes(),
                pods=state.pods(),
                objects=[v for kind in OBJECT_KINDS for v in state.objects(kind).values()],
            )
            self._work.index_labels(state.indexed_labels())
        self._work.delete_pod(uid)
        frozen = self._work.freeze()
        self._work.apply_pod_view(pod)
        return replace(self.cluster, state=frozen), True
