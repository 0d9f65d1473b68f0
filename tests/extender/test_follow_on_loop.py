"""The listener's event loop applies the snapshot's changes its runtime's thread reads
(ExtenderRuntime.follow_on, issue 28): between two requests, never waiting. Whatever the loop
cannot take (the reader or the serve lock busy in another thread) goes back to the thread,
which reads it again and applies it; a closed loop leaves following to the thread.

Real Redis (database 14), the live source written as the watcher writes it, a real asyncio
loop in a thread of its own (as uvicorn's); the runtime's periodic round is pushed an hour
away, so only the push brings a change."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest

from policies.cluster.store import POD
from policies.extender.runtime import runtime
from tests.builders import make_pod

from .test_push import _live_snapshot, _wait


@pytest.fixture
def loop():
    """An event loop running in a thread of its own; stopped and closed at the end."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    if not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def _bind(cluster, writer, name: str) -> int:
    pod = cluster.apply_pod(make_pod(name, cpu="100m", node_name="n1"))
    return writer.delta(POD, orjson.dumps(pod["object"]))


def _on_loop(loop, call):
    """`call()` run on the loop's thread, its result returned here."""
    return asyncio.run_coroutine_threadsafe(_async(call), loop).result(30)


async def _async(call):
    return call()


def test_the_loop_applies_what_the_thread_reads_in_its_own_thread(pushed_only, settings, loop):
    cluster, writer = _live_snapshot(settings, pushed_only)
    state = runtime()
    served = state.snapshots.current().state
    applied_in: list[str] = []
    moved = state.catch_up.moved

    def noted(version: int) -> None:
        applied_in.append(threading.current_thread().name)
        moved(version)

    state.catch_up.moved = noted
    state.follow_on(loop)
    loop_thread = _on_loop(loop, lambda: threading.current_thread().name)
    version = _bind(cluster, writer, "web-1")
    _wait(lambda: state.snapshots.current().version == version, what="the pushed delta")
    assert state.applied_on_loop >= 1 and state.handed_back == 0
    assert set(applied_in) == {loop_thread}
    assert served.node("n1")["podCount"] == 1  # in place, as the thread applies it
    for i in range(2, 6):
        version = _bind(cluster, writer, f"web-{i}")
    _wait(lambda: state.snapshots.current().version == version, what="four more deltas")
    assert served.node("n1")["podCount"] == 5 and set(applied_in) == {loop_thread}
    status = state.snapshot_status()
    assert status["appliedBy"] == "event loop" and status["appliedOnLoop"] >= 2


@pytest.mark.parametrize("busy", ["reader", "serve"])
def test_what_the_loop_cannot_take_now_the_thread_applies(pushed_only, settings, loop, busy):
    cluster, writer = _live_snapshot(settings, pushed_only)
    state = runtime()
    reader = state.snapshots.reader
    state.follow_on(loop)
    # another thread holds the reader (a refresh, a full load) or the snapshot (a bind's checks)
    lock = reader._lock if busy == "reader" else reader.serve_lock
    with lock:
        version = _bind(cluster, writer, "web-1")
        _wait(lambda: state.handed_back >= 1, what="the loop giving the delta back")
        assert state.snapshots.current().version < version  # nothing applied under the lock
    _wait(lambda: state.snapshots.current().version == version, what="the thread applying it")
    assert state.snapshots.current().state.node("n1")["podCount"] == 1
    # and the loop takes the next ones again
    taken = state.applied_on_loop
    version = _bind(cluster, writer, "web-2")
    _wait(lambda: state.snapshots.current().version == version, what="the next delta")
    _wait(lambda: state.applied_on_loop > taken, what="the loop taking changes again")
    assert state.snapshots.current().state.node("n1")["podCount"] == 2


def test_a_closed_loop_leaves_following_to_the_thread(pushed_only, settings, loop):
    cluster, writer = _live_snapshot(settings, pushed_only)
    state = runtime()
    state.follow_on(loop)
    version = _bind(cluster, writer, "web-1")
    _wait(lambda: state.snapshots.current().version == version, what="the first delta")
    loop.call_soon_threadsafe(loop.stop)
    _wait(lambda: not loop.is_running(), what="the loop to stop")
    loop.close()
    taken = state.applied_on_loop
    version = _bind(cluster, writer, "web-2")
    _wait(lambda: state.snapshots.current().version == version, what="the thread applying it")
    assert state.applied_on_loop == taken
    assert state.snapshots.current().state.node("n1")["podCount"] == 2
