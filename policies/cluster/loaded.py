"""A cluster as every caller of the engine sees it: a frozen snapshot plus where it came from.

The `evaluate` command, the REST preview, the playground, background previews and test cases
all load clusters here, so that they see the same cluster for the same source name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.engine.inputs import NodeView, PodView
from policies.errors import ClusterUnavailable, InputError


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


def cluster_load(source: str) -> LoadedCluster:
    """`demo`, `live` (the watcher's snapshot in Redis) or the path of a kubectl JSON/YAML file.
    InputError for an unusable file, ClusterUnavailable when live has no snapshot."""
    from policies.cluster.sources import cluster_source  # Redis and kubernetes: loaded lazily

    return cluster_source(source).snapshot()


def cluster_default() -> LoadedCluster:
    """The configured cluster source (SCHEDWEB_CLUSTER_SOURCE)."""
    from django.conf import settings

    source = settings.SCHEDWEB_CLUSTER_SOURCE
    if source == "file":
        return cluster_load(str(settings.SCHEDWEB_CLUSTER_FILE))
    return cluster_load(source)


CLUSTER_KEYS = ("", "demo")  # the pages' choice: "" = the configured source, or the demo


def cluster_for(*, key: str) -> LoadedCluster:
    """The configured cluster source ("") or the bundled demo cluster ("demo")."""
    if key == "demo":
        return cluster_load("demo")
    return cluster_default()


def cluster_from_text(text: str) -> LoadedCluster:
    """A cluster given inline (a test case's kubectl JSON/YAML)."""
    from policies.cluster.files import ClusterFileError, load_cluster_bytes

    try:
        state = load_cluster_bytes(text.encode(), name="the test case's cluster")
    except ClusterFileError as exc:
        raise InputError(str(exc)) from None
    return LoadedCluster(state=state.freeze(), source="inline", label="inline")


def pod_from_cluster(*, cluster: LoadedCluster, namespace: str, name: str) -> PodView:
    """A pod of the snapshot by namespace and name (a pending pod to preview)."""
    for pod in cluster.state.pods():
        if pod["namespace"] == namespace and pod["name"] == name:
            return pod
    raise InputError(f"pod {namespace}/{name} is not in the {cluster.describe()} cluster")


__all__ = [
    "ClusterUnavailable",
    "InputError",
    "LoadedCluster",
    "cluster_default",
    "cluster_for",
    "cluster_from_text",
    "cluster_load",
    "pod_from_cluster",
]
