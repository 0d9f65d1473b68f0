"""The Celery side: a watch run under the lock records a SyncRun; the supervisor starts a watch
only when none runs, closes runs of dead workers; the task re-arms itself."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from policies.cluster import sync
from policies.cluster.live import LiveClient
from policies.cluster.store import SnapshotStore
from policies.models import SyncRun
from policies.tasks import cluster as cluster_tasks
from tests.harness.resources import node_create, node_manifest


@pytest.mark.cluster
def test_a_watch_run_records_a_sync_run_with_counts_and_releases_the_lock(
    control_plane, live_redis, cluster_name, names, db
):
    node_create(api=control_plane.api, manifest=node_manifest(name=names("n")))
    listed = control_plane.api.get("/api/v1/nodes")["items"]
    pods = control_plane.api.get("/api/v1/pods")["items"]
    run = sync.sync_run_watch(
        cluster=cluster_name, seconds=1.5, client=LiveClient(kubeconfig=control_plane.kubeconfig)
    )
    run.refresh_from_db()
    assert (run.status, run.error, run.source, run.cluster) == ("ok", "", "live", cluster_name)
    # other tests create objects concurrently: at least what existed before the run
    assert run.nodes >= len(listed) and run.pods >= len(pods)
    assert run.snapshot_version >= 1 and run.finished_at is not None
    assert SnapshotStore(cluster_name, client=live_redis).lock_holder() is None


@pytest.mark.cluster
def test_a_run_that_cannot_list_is_recorded_as_an_error_in_plain_words(
    control_plane, live_redis, cluster_name, db
):
    bad = LiveClient(kubeconfig=control_plane.kubeconfig_for("a-token-the-server-never-issued"))
    run = sync.sync_run_watch(cluster=cluster_name, seconds=1.0, client=bad)
    assert run.status == "error"
    assert run.error == "unauthorized: the API server rejected the credentials"
    assert (run.nodes, run.pods) == (0, 0)


def test_no_run_starts_while_another_watcher_holds_the_lock(live_redis, cluster_name, db):
    store = SnapshotStore(cluster_name, client=live_redis)
    assert store.lock_acquire(ttl=30)
    assert sync.sync_run_watch(cluster=cluster_name, seconds=1.0, client=LiveClient()) is None
    assert not SyncRun.objects.filter(cluster=cluster_name).exists()


def test_the_supervisor_queues_a_watch_only_when_none_runs_or_is_starting(
    live_redis, cluster_name, db, monkeypatch
):
    queued = []
    monkeypatch.setattr(
        cluster_tasks.cluster_watch, "delay", lambda cluster: queued.append(cluster)
    )
    store = SnapshotStore(cluster_name, client=live_redis)
    token = store.lock_acquire(ttl=30)
    assert sync.watch_supervise(cluster=cluster_name) == "running"
    store.lock_release(token)
    assert sync.watch_supervise(cluster=cluster_name) == "queued"
    assert sync.watch_supervise(cluster=cluster_name) == "starting"  # queued, not yet running
    assert queued == [cluster_name]


def test_the_supervisor_closes_runs_whose_worker_died(live_redis, cluster_name, db, monkeypatch):
    monkeypatch.setattr(cluster_tasks.cluster_watch, "delay", lambda cluster: None)
    dead = SyncRun.objects.create(cluster=cluster_name, source="live")
    SyncRun.objects.filter(pk=dead.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    fresh = SyncRun.objects.create(cluster=cluster_name, source="live")
    sync.watch_supervise(cluster=cluster_name)
    dead.refresh_from_db()
    fresh.refresh_from_db()
    assert dead.status == "error" and "worker stopped" in dead.error and dead.finished_at
    assert fresh.status == "running"  # started moments ago: its watcher may be taking the lock


def test_the_supervisor_keeps_the_latest_runs_only(live_redis, cluster_name, db, monkeypatch):
    monkeypatch.setattr(cluster_tasks.cluster_watch, "delay", lambda cluster: None)
    monkeypatch.setattr(sync, "KEEP_RUNS", 3)
    runs = [
        SyncRun.objects.create(cluster=cluster_name, source="live", status="ok") for _ in range(5)
    ]
    sync.watch_supervise(cluster=cluster_name)
    assert list(SyncRun.objects.filter(cluster=cluster_name).values_list("pk", flat=True)) == [
        r.pk for r in runs[:1:-1]
    ]


@pytest.mark.parametrize(("ended_by", "rearmed"), [("deadline", True), ("lock-lost", False)])
def test_the_watch_task_re_arms_itself_unless_another_watcher_took_over(
    settings, live_redis, cluster_name, monkeypatch, ended_by, rearmed
):
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    calls = []
    fake_run = SimpleNamespace(ended_by=ended_by, status="ok", events=3, snapshot_version=7)
    monkeypatch.setattr(sync, "sync_run_watch", lambda **kwargs: fake_run)
    monkeypatch.setattr(
        cluster_tasks.cluster_watch, "apply_async", lambda **kwargs: calls.append(kwargs)
    )
    assert cluster_tasks.cluster_watch.run(cluster_name) == "ok: 3 events, snapshot v7"
    assert calls == ([{"args": [cluster_name], "countdown": 1}] if rearmed else [])


def test_the_tasks_do_nothing_unless_the_source_is_live(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    assert cluster_tasks.cluster_watch.run("default").startswith("skipped")
    assert cluster_tasks.cluster_watch_supervise.run().startswith("skipped")
