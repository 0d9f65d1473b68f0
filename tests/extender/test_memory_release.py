"""What an extender process gives back (issue 28): the heap's free pages after each full load of
the snapshot, and an on-demand process's (the shadow lane's) whole snapshot after
SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS without a body. The runtime over a live snapshot in
Redis; its thread stopped, so that each round of housekeeping is the test's, and idleness is set
on its clock, not waited for."""

from __future__ import annotations

import secrets
import time

import pytest

from policies.cluster.state import ClusterState
from policies.cluster.store import SnapshotStore, SnapshotWriter
from policies.extender import runtime as runtime_module
from tests.builders import make_node, make_pod
from tests.redisdb import redis_database


@pytest.fixture
def live(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = f"release-{secrets.token_hex(3)}"
    settings.SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS = 60.0
    with redis_database(settings, 14) as client:
        store = SnapshotStore(settings.SCHEDWEB_CLUSTER_NAME, client=client)
        state = ClusterState.from_objects(
            [make_node("n1", cpu="4")], [make_pod("busy", cpu="3", node_name="n1")]
        )
        SnapshotWriter(store).full(state, reset=True)
        store.meta_write({"status": "ok", "heartbeat_at": time.time()})
        yield store


def _runtime(monkeypatch, *, on_demand: bool) -> tuple[runtime_module.ExtenderRuntime, list]:
    trims: list = []
    monkeypatch.setattr(runtime_module, "heap_trim", lambda: trims.append(1))
    made = runtime_module.ExtenderRuntime(on_demand=on_demand)
    made.close()  # its thread stopped: the test runs each round of housekeeping
    return made, trims


def test_an_idle_on_demand_process_lets_go_of_its_snapshot_and_its_next_body_loads_it(
    live, monkeypatch
):
    made, trims = _runtime(monkeypatch, on_demand=True)
    reader = made.snapshots.reader
    assert made.snapshots.current() is not None and reader.full_loads == 1
    made._memory_release()
    assert trims == [1]  # after the first load
    made._memory_release()
    assert trims == [1] and made.snapshots.current() is not None  # not idle, nothing new

    made._asked_at -= 61  # a minute without a body
    made._memory_release()
    assert made.snapshots.current() is None and trims == [1, 1]

    made.snapshot_refresh()  # a body came
    assert made.snapshots.current().state.node("n1")["requested"]["cpu"] == 3000
    assert reader.full_loads == 2
    made._memory_release()
    assert trims == [1, 1, 1] and made.snapshots.current() is not None


@pytest.mark.parametrize("on_demand, idle", [(False, 60.0), (True, 0.0)])
def test_the_listener_and_a_process_told_to_keep_it_never_let_go_of_the_snapshot(
    live, monkeypatch, settings, on_demand, idle
):
    settings.SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS = idle
    made, trims = _runtime(monkeypatch, on_demand=on_demand)
    made._asked_at -= 3600
    made._memory_release()
    made._memory_release()
    assert made.snapshots.current() is not None and trims == [1]


def test_the_heap_trim_runs_here():
    """glibc's malloc_trim is found (the images are Debian's); elsewhere it is skipped."""
    runtime_module.heap_trim()
    runtime_module.heap_trim()
    assert callable(runtime_module._malloc_trim)
