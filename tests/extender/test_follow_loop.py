"""The extender listener follows the snapshot's events on its event loop (issue 28,
policies/extender/follow.py): a watch event reaches the snapshot requests read without the
runtime's thread taking it, the thread leaves the stream while the loop follows it and takes it
back when the loop stops, and an unreachable Redis only makes the loop try again.

Real Redis (database 14). The runtime's periodic round is pushed an hour away, so only a push
can have brought a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time

import orjson
import pytest
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from policies.cluster.state import ClusterState
from policies.cluster.store import NODE, SnapshotStore, SnapshotWriter
from policies.extender import runtime as runtime_module
from policies.extender.follow import follow_events
from policies.extender.runtime import reset_runtime, runtime
from schedweb import asgi
from tests.builders import make_node
from tests.harness.processes import free_ports
from tests.redisdb import redis_database

DEADLINE = 60.0


@pytest.fixture
def pushed_only(settings, monkeypatch, tmp_path):
    """A listener's runtime over a live snapshot of n1, whose periodic round never comes; the
    state and writer to make changes with."""
    monkeypatch.setattr(runtime_module, "HOUSEKEEPING_SECONDS", 3600.0)
    monkeypatch.setattr(runtime_module, "_role", "listener")
    settings.SCHEDWEB_METRICS_DIR = tmp_path
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = f"loop-{secrets.token_hex(3)}"
    with redis_database(settings, 14) as client:
        reset_runtime()
        cluster = ClusterState.from_objects([make_node("n1")], [])
        store = SnapshotStore(settings.SCHEDWEB_CLUSTER_NAME, client=client)
        writer = SnapshotWriter(store)
        writer.full(cluster, reset=True)
        store.meta_write({"status": "ok", "heartbeat_at": time.time()})
        yield cluster, writer
        reset_runtime()


async def _until(check, *, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def _recorded(state, name: str) -> list:
    """What the runtime's method `name` returns, call by call (wrapped on the instance)."""
    seen: list = []
    method = getattr(state, name)

    def wrapper(*args):
        seen.append(method(*args))
        return seen[-1]

    setattr(state, name, wrapper)
    return seen


async def _stopped(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_a_watch_event_is_applied_on_the_loop_and_the_thread_leaves_the_stream(pushed_only):
    cluster, writer = pushed_only
    state = runtime()
    served = state.snapshots.current().state
    asked = _recorded(state, "_events_key")  # what the thread's XREAD follows, read by read
    taken = _recorded(state, "follow_nowait")

    async def scenario() -> int:
        task = asyncio.get_running_loop().create_task(follow_events(state))
        await _until(lambda: state.events_on_loop, what="the loop to follow")
        asked.clear()
        await _until(lambda: None in asked, what="a read of the thread's without the stream")
        version = writer.delta(NODE, orjson.dumps(cluster.apply_node(make_node("n2"))["object"]))
        await _until(lambda: state.snapshots.current().version == version, what="the pushed delta")
        await _stopped(task)
        return version

    version = asyncio.run(scenario())
    assert True in taken  # applied by the loop
    assert state.snapshots.reader.refreshes == 1  # pushed, not polled
    assert state.snapshots.current().state is served and served.node("n2") is not None
    assert state.snapshots.current().version == version
    # stopped: the thread follows the stream again
    assert not state.events_on_loop and state._events_key() is not None


def test_the_extender_listener_follows_on_its_loop_from_start_to_shutdown(pushed_only, monkeypatch):
    monkeypatch.setattr(asgi, "_ready", asgi._ready)  # restored for the tests after this one
    sent: list[dict] = []
    following: list[bool] = []
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict:
        if len(messages) == 1:  # started: wait until the loop follows, then shut down
            await _until(
                lambda: (
                    runtime_module._runtime is not None and runtime_module._runtime.events_on_loop
                ),
                what="the listener's loop to follow the events stream",
            )
            following.append(True)
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asgi.extender_application({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert following == [True]
    assert runtime_module._runtime is None or not runtime_module._runtime.events_on_loop


def test_an_unreachable_redis_only_makes_the_loop_try_again_later(pushed_only):
    state = runtime()
    (port,) = free_ports(count=1)  # nothing listens there
    client = redis.asyncio.Redis(port=port, retry=Retry(NoBackoff(), 0))
    reads = _recorded_reads(client)

    async def scenario() -> None:
        task = asyncio.get_running_loop().create_task(follow_events(state, client))
        await _until(lambda: reads[0] >= 3, what="three attempts")
        assert not task.done() and state.events_on_loop
        await _stopped(task)

    asyncio.run(scenario())
    assert not state.events_on_loop


def _recorded_reads(client) -> list[int]:
    """Counts the client's XREAD attempts (the real client's, each failing against no server)."""
    count = [0]
    xread = client.xread

    async def counted(*args, **kwargs):
        count[0] += 1
        return await xread(*args, **kwargs)

    client.xread = counted
    return count


def test_a_process_without_a_live_source_follows_nothing_on_its_loop(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    with redis_database(settings, 14):
        reset_runtime()
        try:
            state = runtime()
            asyncio.run(asyncio.wait_for(follow_events(state), DEADLINE))  # returns at once
            assert not state.events_on_loop
        finally:
            reset_runtime()
