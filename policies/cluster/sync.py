"""Keeping the live cluster snapshot current: the services the watch tasks wrap.

    sync_run_watch(cluster)      takes the cluster's Redis lock (skips if another watcher has
                                 it), records a SyncRun, runs the watcher for `seconds`,
                                 finishes the SyncRun (ok / error, counts, version, events)
                                 and releases the lock. The task (policies/tasks/cluster.py)
                                 re-arms itself after it with `watch_rearm`.
    watch_supervise(cluster)     on beat every 15 s: queues a watch when no watcher holds the
                                 lock (first start, a killed worker, a lost re-arm), closes
                                 SyncRuns whose worker died, and prunes old ones.

The watch task holds a worker slot for its whole run: run the worker with a concurrency of at
least 2 (make run does), or route `schedweb.cluster_watch` to its own queue.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from policies.background import CLUSTER_WATCH, DECISIONS_RECORD, task_queue
from policies.models import SyncRun

if TYPE_CHECKING:
    from policies.cluster.live import LiveClient
    from policies.cluster.store import SnapshotStore
    from policies.cluster.watcher import ClusterWatcher

log = logging.getLogger(__name__)

# One run lasts this long, then the task re-arms (a fresh task: bounded memory, visible runs).
WATCH_SECONDS = float(getattr(settings, "SCHEDWEB_WATCH_SECONDS", 540))
LOCK_TTL = 30.0  # the watcher renews it every 10 s; a dead watcher's lock frees in 30 s
STARTING_TTL = 60  # a queued watch that never started is queued again after this
KEEP_RUNS = 500  # SyncRun rows kept per cluster


def sync_run_watch(
    *,
    cluster: str,
    seconds: float,
    client: LiveClient | None = None,
    redis_client: redis.Redis | None = None,
    watcher_options: dict[str, Any] | None = None,
    on_watcher: Callable[[ClusterWatcher], None] | None = None,
) -> SyncRun | None:
    """Watches `cluster` for `seconds` under its lock and records the run; None (and nothing
    recorded) when another watcher holds the lock. `client` defaults to the configured
    LiveClient; `on_watcher(watcher)` lets a caller keep a handle (to stop it early)."""
    from policies.cluster.live import LiveClient
    from policies.cluster.store import SnapshotStore

    own_redis = redis_client is None
    store = SnapshotStore(cluster, client=redis_client or _watch_redis())
    try:
        return _locked_run(
            store, seconds, client or LiveClient.from_settings(), watcher_options, on_watcher
        )
    finally:
        if own_redis:
            store.client.close()


def _watch_redis() -> redis.Redis:
    """The watcher's own connection. A full snapshot of a large cluster is hundreds of MB
    (235 MB at 50 000 pods, ~1 s on loopback); the process client's 2 s socket timeout bounds a
    whole sendall and would cut such a write under load."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1.0, socket_timeout=30.0)


def _locked_run(
    store: SnapshotStore,
    seconds: float,
    client: LiveClient,
    watcher_options: dict[str, Any] | None,
    on_watcher: Callable[[ClusterWatcher], None] | None,
) -> SyncRun | None:
    """The run itself, once the store is chosen (see sync_run_watch)."""
    from policies.cluster.watcher import ClusterWatcher

    cluster = store.cluster
    token = store.lock_acquire(ttl=LOCK_TTL)
    if token is None:
        log.info("cluster %s: another watcher holds the lock (%s)", cluster, store.lock_holder())
        return None
    with contextlib.suppress(redis.RedisError):
        store.client.delete(store.keys.starting)
    run = SyncRun.objects.create(cluster=cluster, source="live", status=SyncRun.Status.RUNNING)
    watcher = ClusterWatcher(
        client=client,
        store=store,
        lock_token=token,
        lock_ttl=LOCK_TTL,
        on_synced=lambda result: _run_progress(run, result),
        # decisions of pods deleted within seconds still learn their node (services)
        on_bound_pods_deleted=lambda items: task_queue(DECISIONS_RECORD, items),
        **(watcher_options or {}),
    )
    if on_watcher is not None:
        on_watcher(watcher)
    crash = ""
    try:
        result = watcher.run(seconds=seconds)
    except SoftTimeLimitExceeded:
        watcher.stop()
        result = watcher.result()
        crash = "the run exceeded its time limit"
    except Exception as exc:  # recorded for the UI; the next run starts afresh
        log.exception("cluster %s: the watcher failed", cluster)
        watcher.stop()
        result = watcher.result()
        crash = f"internal error: {type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(redis.RedisError):
            store.lock_release(token)
    run.status = SyncRun.Status.ERROR if (crash or result.status == "error") else SyncRun.Status.OK
    run.error = crash or result.error
    run.finished_at = timezone.now()
    run.nodes, run.pods = result.nodes, result.pods
    run.events, run.snapshot_version = result.events, result.version
    run.save()
    run.ended_by = result.ended_by  # not stored: tells the task whether to re-arm
    return run


def _run_progress(run: SyncRun, result) -> None:
    """After each successful list: the counts so far, so a running row is informative."""
    run.nodes, run.pods, run.snapshot_version = result.nodes, result.pods, result.version
    run.events = result.events
    run.error = ""
    run.save(update_fields=["nodes", "pods", "snapshot_version", "events", "error"])


def watch_supervise(*, cluster: str, redis_client: redis.Redis | None = None) -> str:
    """The supervisor's work for one cluster: "running", "queued" or "starting"."""
    from policies.cluster.store import SnapshotStore

    store = SnapshotStore(cluster, client=redis_client)
    held = store.lock_holder() is not None
    if not held:
        # Rows still "running" with no watcher alive: their worker died mid-run.
        SyncRun.objects.filter(
            cluster=cluster,
            status=SyncRun.Status.RUNNING,
            started_at__lt=timezone.now() - timedelta(seconds=LOCK_TTL * 2),
        ).update(
            status=SyncRun.Status.ERROR,
            finished_at=timezone.now(),
            error="the worker stopped during this run (killed or restarted)",
        )
    _prune(cluster)
    if held:
        return "running"
    if not store.client.set(store.keys.starting, "1", nx=True, ex=STARTING_TTL):
        return "starting"
    task_queue(CLUSTER_WATCH, cluster)
    return "queued"


def watch_rearm(cluster: str) -> None:
    """Re-arm: the next run starts at once (the supervisor would within 15 s anyway)."""
    try:
        from policies.cluster.store import SnapshotStore

        store = SnapshotStore(cluster)
        store.client.set(store.keys.starting, "1", ex=STARTING_TTL)
        task_queue(CLUSTER_WATCH, cluster, countdown=1)
    except Exception as exc:  # broker down: the supervisor queues it when it is back
        log.warning("cluster %s: could not re-arm the watch (%s)", cluster, exc)


def _prune(cluster: str) -> None:
    ids = SyncRun.objects.filter(cluster=cluster).values_list("pk", flat=True)[
        KEEP_RUNS : KEEP_RUNS + 1
    ]
    if ids:
        SyncRun.objects.filter(cluster=cluster, pk__lte=ids[0]).delete()
