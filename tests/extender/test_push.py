"""Extender processes are told of changes (issue 24): a publish and a watch event are pushed to
the runtime's thread (one blocking XREAD over both streams), not found by polling; each process
confirms the policies it serves, and /readyz and /metrics show what it serves and how old it is.

Real Redis (database 14). The runtime's periodic round (what no push announces) is pushed an
hour away, so only a push can have brought a change.
"""

from __future__ import annotations

import json
import os
import secrets
import time

import orjson
import pytest

from policies.cluster.state import ClusterState
from policies.cluster.store import NODE, POD, SnapshotStore, SnapshotWriter
from policies.extender import entry
from policies.extender import runtime as runtime_module
from policies.extender.runtime import reset_runtime, runtime
from policies.publishing import (
    SERVED_KEY,
    active_entries_write,
    served_read,
    served_record,
    served_wait,
)
from tests.builders import make_node, make_pod
from tests.prometheus_text import assert_valid_exposition, samples
from tests.redisdb import redis_database

from .conftest import active_entry, args_body, example, go_pod

SEED_003 = example("seed-003-name-length")


def _wait(check, *, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _live_snapshot(settings, client, *, head: int | None = None):
    """The live source: a snapshot of n1 written as the watcher writes it (its heartbeat saying
    it reached version `head`); the state and writer to make changes with."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = f"push-{secrets.token_hex(3)}"
    cluster = ClusterState.from_objects([make_node("n1")], [])
    store = SnapshotStore(settings.SCHEDWEB_CLUSTER_NAME, client=client)
    writer = SnapshotWriter(store)
    writer.full(cluster, reset=True)
    meta = {"status": "ok", "heartbeat_at": time.time()}
    store.meta_write({**meta, "version": head} if head is not None else meta)
    return cluster, writer


@pytest.fixture
def pushed_only(settings, monkeypatch, tmp_path):
    """An extender process's runtime (role listener) whose periodic round never comes."""
    monkeypatch.setattr(runtime_module, "HOUSEKEEPING_SECONDS", 3600.0)
    monkeypatch.setattr(runtime_module, "_role", "listener")
    settings.SCHEDWEB_METRICS_DIR = tmp_path
    with redis_database(settings, 14) as client:
        reset_runtime()
        yield client
        reset_runtime()


def test_a_publish_is_pushed_to_the_runtime_and_confirmed_with_what_it_serves(
    pushed_only, settings
):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    state = runtime()
    assert state.registry.by_scheduler == {}
    counter = active_entries_write([active_entry(SEED_003, 1)])
    report = served_wait(counter, timeout=60, live_seconds=60)
    assert report.served_by_all and report.confirmed == (state.process,)
    assert state.registry.by_scheduler["schedweb"].label == "seed-003-name-length/v1"
    (record,) = served_read(pushed_only)
    assert record["counter"] == counter and record["role"] == "listener"
    assert record["policies"] == {"schedweb": "seed-003-name-length/v1"}
    assert record["pid"] == os.getpid()


def test_a_watch_event_is_pushed_to_the_runtime_and_applied_in_its_snapshot(pushed_only, settings):
    cluster, writer = _live_snapshot(settings, pushed_only)
    reader = runtime().snapshots.reader
    served = runtime().snapshots.current().state
    version = writer.delta(NODE, orjson.dumps(cluster.apply_node(make_node("n2"))["object"]))
    _wait(lambda: runtime().snapshots.current().version == version, what="the pushed delta")
    assert reader.follows >= 1 and reader.refreshes == 1  # pushed, not polled
    assert runtime().snapshots.current().state is served  # applied in place
    assert served.node("n2") is not None


def test_the_runtime_holds_bound_pods_without_their_objects_and_pending_ones_whole(
    pushed_only, settings
):
    """Issue 28: an extender process only counts bound pods; a pending one may be bound (and
    judged again) here, so its object stays."""
    cluster, writer = _live_snapshot(settings, pushed_only)
    served = runtime().snapshots.current().state
    bound = cluster.apply_pod(make_pod("web", cpu="100m", node_name="n1"))
    pending = cluster.apply_pod(make_pod("next", cpu="100m"))
    version = writer.deltas(
        [(POD, orjson.dumps(bound["object"])), (POD, orjson.dumps(pending["object"]))]
    )
    _wait(lambda: runtime().snapshots.current().version == version, what="the pushed deltas")
    assert runtime().snapshots.reader.lean
    assert served.pod("uid-default-web")["object"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {},
    }
    assert served.pod("uid-default-next")["object"] == pending["object"]
    assert served.node("n1")["podCount"] == 1 and served.node("n1")["requested"]["cpu"] == 100


def test_a_process_that_does_not_confirm_is_named_when_the_wait_ends(settings):
    with redis_database(settings, 14) as client:
        served_record(
            client,
            {
                "process": "node-a:4242",
                "role": "listener",
                "counter": 0,
                "policies": {"schedweb": "seed-003-name-length/v1"},
                "at": time.time(),
            },
            confirm=False,
        )
        report = served_wait(7, timeout=0.2, live_seconds=60)
    assert not report.served_by_all and report.confirmed == ()
    (pending,) = report.pending
    assert pending["process"] == "node-a:4242" and pending["counter"] == 0
    assert report.summary().startswith(
        "not confirmed within 0.2 s by 1 of 1 extender process: node-a:4242 (listener, serves"
        " seed-003-name-length/v1, last seen"
    )
    answer = report.to_dict()
    assert answer["servedByAll"] is False and answer["processes"] == 1
    assert answer["notConfirmed"][0]["process"] == "node-a:4242"


def test_processes_silent_past_the_live_window_are_not_waited_for_and_long_gone_ones_dropped(
    settings,
):
    with redis_database(settings, 14) as client:
        old = {"role": "listener", "counter": 0, "policies": {}}
        served_record(client, {**old, "process": "h:1", "at": time.time() - 30}, confirm=False)
        served_record(client, {**old, "process": "h:2", "at": time.time() - 7200}, confirm=False)
        report = served_wait(7, timeout=30, live_seconds=10)
        assert report.served_by_all is True and report.confirmed == report.pending == ()
        assert report.summary().startswith("no extender process has reported in the last 10 s")
        assert client.hkeys(SERVED_KEY) == [b"h:1"]  # h:2 forgotten after an hour


def test_a_stopped_runtime_takes_itself_out_of_the_served_records(pushed_only, settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    process = runtime().process
    assert pushed_only.hexists(SERVED_KEY, process)
    runtime().close()
    assert not pushed_only.hexists(SERVED_KEY, process)


def test_readyz_says_what_is_served_and_how_old_the_snapshot_is(pushed_only, settings, client):
    cluster, writer = _live_snapshot(settings, pushed_only, head=2)
    counter = active_entries_write([active_entry(SEED_003, 3)])
    served_wait(counter, timeout=60, live_seconds=60)
    version = writer.delta(NODE, orjson.dumps(cluster.apply_node(make_node("n2"))["object"]))
    _wait(lambda: runtime().snapshots.current().version == version, what="the pushed delta")
    health = client.get("/readyz").json()["extender"]
    assert health["policies"] == {"schedweb": "seed-003-name-length/v3"}
    assert health["served"]["counter"] == counter and health["served"]["ageSeconds"] >= 0
    snapshot = health["snapshot"]
    assert snapshot["version"] == version and snapshot["followed"] == "pushed"
    assert snapshot["ageSeconds"] >= 0 and snapshot["lagSeconds"] >= 0
    assert snapshot["appliedAt"] >= snapshot["writtenAt"]
    assert snapshot["headVersion"] == 2  # what the watcher's last heartbeat said


def test_metrics_show_every_fresh_process_s_served_counter_and_snapshot_lag(
    pushed_only, settings, tmp_path
):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    counter = active_entries_write([active_entry(SEED_003, 1)])
    served_wait(counter, timeout=60, live_seconds=60)
    gauges = {"policies_counter": 5.0, "snapshot_version": 40.0, "snapshot_lag_seconds": 0.004}
    (tmp_path / "extender-999001.json").write_text(json.dumps({"gauges": gauges}))
    gone = tmp_path / "extender-999002.json"
    gone.write_text(json.dumps({"gauges": {"policies_counter": 1.0}}))
    os.utime(gone, (time.time() - 3600, time.time() - 3600))  # a worker that exited long ago
    entry.extender_answer("filter", args_body(go_pod("abc"), ["cp-1"]))
    text = entry.metrics_text().decode()
    assert_valid_exposition(text)
    found = samples(text)
    by_pid = {
        labels["pid"]: value
        for name, labels, value in found
        if name == "schedweb_extender_policies_counter"
    }
    assert by_pid == {str(os.getpid()): float(counter), "999001": 5.0}
    lag = {
        labels["pid"]: value
        for name, labels, value in found
        if name == "schedweb_extender_snapshot_lag_seconds"
    }
    assert lag == {"999001": 0.004}  # the demo cluster is not followed: no lag of its own
