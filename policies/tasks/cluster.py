"""The watch tasks that keep the live snapshot current (services: policies/cluster/sync.py)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from policies.background import CLUSTER_WATCH, CLUSTER_WATCH_SUPERVISE
from policies.cluster import sync


@shared_task(
    name=CLUSTER_WATCH,
    bind=True,
    ignore_result=True,
    acks_late=False,  # a killed worker's watch is restarted by the supervisor, not redelivered
    time_limit=sync.WATCH_SECONDS + 120,
    soft_time_limit=sync.WATCH_SECONDS + 60,
)
def cluster_watch(self, cluster: str = "") -> str:
    """Keeps the live snapshot of `cluster` current for one run, then re-arms."""
    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return "skipped: the cluster source is not live"
    cluster = cluster or settings.SCHEDWEB_CLUSTER_NAME
    run = sync.sync_run_watch(cluster=cluster, seconds=sync.WATCH_SECONDS)
    if run is None:
        return "skipped: another watcher holds the lock"
    if run.ended_by != "lock-lost":
        sync.watch_rearm(cluster)
    return f"{run.status}: {run.events} events, snapshot v{run.snapshot_version}"


@shared_task(name=CLUSTER_WATCH_SUPERVISE, ignore_result=True, time_limit=30)
def cluster_watch_supervise() -> str:
    """Starts a watch when none runs; repairs SyncRun rows of dead workers; prunes."""
    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return "skipped: the cluster source is not live"
    return sync.watch_supervise(cluster=settings.SCHEDWEB_CLUSTER_NAME)
