"""The configured cluster source's status in words, for the API, the cluster page and the
dashboard: which source, which snapshot version, how old, stale or not and why, and the last
sync runs of a live source.

Reads the configured source (SCHEDWEB_CLUSTER_SOURCE) through cluster_default, like previews do.
Without a snapshot the status says why (for a live source, from the watcher's status hash).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from policies.cluster.loaded import LoadedCluster
from policies.cluster.sources import cluster_default
from policies.errors import ClusterUnavailable, InputError
from policies.models import SyncRun

RUNS_SHOWN = 10


def cluster_status(*, runs: int = RUNS_SHOWN) -> tuple[dict[str, Any], LoadedCluster | None]:
    """The configured source's status (the API's shape) and its snapshot, if there is one."""
    source = settings.SCHEDWEB_CLUSTER_SOURCE
    cluster_name = settings.SCHEDWEB_CLUSTER_NAME
    loaded: LoadedCluster | None = None
    problem = ""
    try:
        loaded = cluster_default()
    except (ClusterUnavailable, InputError) as exc:
        problem = str(exc)
    details: dict[str, Any] = dict(loaded.details) if loaded is not None else {}
    if loaded is None and source == "live":
        details = _live_meta()
    now = datetime.now(UTC).timestamp()
    updated = loaded.updated_at if loaded is not None else None
    status: dict[str, Any] = {
        "source": source,
        "cluster": cluster_name if source == "live" else None,
        "label": loaded.describe() if loaded is not None else source,
        "available": loaded is not None,
        "version": loaded.version if loaded is not None else None,
        "ageSeconds": round(now - updated, 1) if updated else None,
        "updatedAt": _iso(updated),
        "stale": loaded.stale if loaded is not None else True,
        "status": loaded.status if loaded is not None else (details.get("status") or "unavailable"),
        "error": (loaded.error if loaded is not None else problem) or "",
        "nodes": loaded.state.node_count() if loaded is not None else None,
        "pods": loaded.state.pod_count() if loaded is not None else None,
        "pendingPods": _pending(loaded) if loaded is not None else None,
        "server": details.get("server") or None,
        "lastEventAt": _iso(_float(details.get("last_event_at"))),
        "lastSyncAt": _iso(_float(details.get("last_sync_at"))),
        "runs": [sync_run_dict(r) for r in SyncRun.objects.filter(cluster=cluster_name)[:runs]]
        if source == "live"
        else [],
    }
    return status, loaded


def _live_meta() -> dict[str, Any]:
    """The watcher's status hash when there is no snapshot (it says why)."""
    from policies.cluster.sources import cluster_source

    with contextlib.suppress(Exception):
        return dict(cluster_source("live").reader.meta)  # type: ignore[attr-defined]
    return {}


def _pending(loaded: LoadedCluster) -> int:
    return sum(1 for p in loaded.state.pods() if not p["nodeName"] and p["phase"] == "Pending")


def sync_run_dict(run: SyncRun) -> dict[str, Any]:
    """A SyncRun for the API and the page."""
    duration = None
    if run.finished_at and run.started_at:
        duration = round((run.finished_at - run.started_at).total_seconds(), 1)
    return {
        "id": run.pk,
        "status": run.status,
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationSeconds": duration,
        "error": run.error,
        "nodes": run.nodes,
        "pods": run.pods,
        "events": run.events,
        "snapshotVersion": run.snapshot_version,
    }


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _iso(timestamp: float | None) -> str | None:
    return datetime.fromtimestamp(timestamp, UTC).isoformat() if timestamp else None
