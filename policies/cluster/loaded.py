"""A cluster as every caller of the engine sees it: a frozen snapshot plus where it came from.

Loaded by `policies/cluster/sources.py` (`cluster_load`, `cluster_default`, ...), the one place
the `evaluate` command, the REST preview, the playground, background previews and test cases
get clusters from, so that they see the same cluster for the same source name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.engine.inputs import NodeView, PodView
from policies.errors import InputError


@dataclass
class LoadedCluster:
    """A frozen cluster snapshot plus where it came from, for display and staleness.

    `stale` means "may be behind the real cluster": the watcher reports an error, has not
    reported for SCHEDWEB_SNAPSHOT_STALE_SECONDS, or Redis could not be read for that long;
    `error` says why in plain words. A snapshot is never empty for lack of data: without
    one, loaders raise ClusterUnavailable."""

    state: Any  # a frozen ClusterSnapshot (ClusterView)
    source: str  # demo | file | live | inline
    label: str
    version: int = 0
    age_seconds: float | None = None  # since the source last confirmed it current
    stale: bool = False
    status: str = "ok"  # ok | stale | error | starting
    error: str = ""
    updated_at: float | None = None  # Unix time of that confirmation (age = now - this)
    details: dict[str, Any] = field(default_factory=dict)  # source-specific status fields

    def nodes(self) -> list[NodeView]:
        return self.state.nodes()

    def describe(self) -> str:
        return self.label


def pod_from_cluster(*, cluster: LoadedCluster, namespace: str, name: str) -> PodView:
    """A pod of the snapshot by namespace and name (a pending pod to preview)."""
    for pod in cluster.state.pods():
        if pod["namespace"] == namespace and pod["name"] == name:
            return pod
    raise InputError(f"pod {namespace}/{name} is not in the {cluster.describe()} cluster")
