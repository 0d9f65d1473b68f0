"""A request waiting for the snapshot holds neither the listener's event loop nor the order of
the requests behind it (issue 24; policies/extender/catch_up.py, schedweb/extender_http.py).

One real `python -m schedweb.extender_server` on 127.0.0.1 following a live snapshot in its own
redis-server; the test writes what the watcher would (SnapshotWriter), and raw sockets show what
is answered when.
"""

from __future__ import annotations

import socket
import time

import orjson
import pytest

from policies.cluster.state import ClusterState
from policies.cluster.store import NODE, SnapshotStore, SnapshotWriter
from tests.builders import make_node, make_pod
from tests.e2e.stack import RedisServer
from tests.extender.conftest import ROOM, active_entry, args_body, go_pod
from tests.listeners import start_extender
from tests.prometheus_text import samples

from .test_extender_direct_path import Wire, get, post

CLUSTER = "catch-up-listener"


def _listener(tmp_path, *, catch_up_ms: int):
    """The extender's listener over a live snapshot of n1 and n2; the watcher's writer."""
    import redis as redis_py

    server = RedisServer(tmp_path / "redis").start()
    client = redis_py.Redis.from_url(server.url)
    state = ClusterState.from_objects(
        [make_node("n1", cpu="4"), make_node("n2", cpu="4")],
        [make_pod("busy", cpu="3", node_name="n1", uid="uid-busy")],
    )
    store = SnapshotStore(CLUSTER, client=client)
    writer = SnapshotWriter(store)
    writer.full(state, reset=True)
    store.meta_write({"status": "ok", "heartbeat_at": time.time()})
    client.hset("schedweb:policies:active", "room", orjson.dumps(active_entry(ROOM, 1)))
    client.set("schedweb:policies:counter", 1)
    process, port = start_extender(
        tmp_path,
        redis_url=server.url,
        SCHEDWEB_CLUSTER_SOURCE="live",
        SCHEDWEB_CLUSTER_NAME=CLUSTER,
        SCHEDWEB_EXTENDER_CATCH_UP_MS=str(catch_up_ms),
        SCHEDWEB_SNAPSHOT_STALE_SECONDS="3600",
    )
    try:
        yield port, state, writer
    finally:
        process.stop()
        server.stop()


@pytest.fixture
def listener(tmp_path):
    yield from _listener(tmp_path, catch_up_ms=600_000)  # only the node's arrival ends a wait


@pytest.fixture
def short_waits(tmp_path):
    yield from _listener(tmp_path, catch_up_ms=1000)


def _nothing_yet(wire: Wire) -> bool:
    """The connection is open and has received nothing."""
    if wire.buffer:
        return False
    wire.sock.setblocking(False)
    try:
        wire.sock.recv(1, socket.MSG_PEEK)  # b"" (closed) or a byte: something came
    except BlockingIOError:
        return True
    finally:
        wire.sock.setblocking(True)
    return False


def test_a_filter_waiting_for_a_node_holds_neither_the_loop_nor_the_order_behind_it(listener):
    port, state, writer = listener
    pod = go_pod("new", cpu="2", uid="uid-busy")
    waiting = args_body(pod, ["n1", "n2", "n3"])  # n3: created, not yet in the snapshot
    behind = args_body(pod, ["n2"])
    with Wire(port) as first, Wire(port) as second:
        # A filter naming n3, and a prioritize pipelined behind it on the same connection.
        first.send(post("/extender/filter", waiting) + post("/extender/prioritize", behind))
        # Meanwhile the loop answers others: /healthz and a filter about known nodes.
        assert second.send(get("/healthz")).response().json() == {"status": "ok"}
        known = second.send(post("/extender/filter", behind)).response()
        assert known.status == 200 and known.json()["NodeNames"] == ["n2"]
        assert _nothing_yet(first)  # the waiting filter, and the request behind it
        # The watcher writes n3 (8 CPUs): the filter is judged with it, then the prioritize.
        writer.delta(NODE, orjson.dumps(state.apply_node(make_node("n3", cpu="8"))["object"]))
        answer = first.response()
        assert answer.status == 200 and answer.headers["x-schedweb-policy"] == "room/v1"
        # n1: 4000 - 3000 = 1000m free < 2000m; n2 (4000m) and n3 (8000m) fit
        assert answer.json()["NodeNames"] == ["n2", "n3"]
        scores = first.response()
        assert scores.status == 200 and [s["Host"] for s in scores.json()] == ["n2"]


def test_clients_naming_nodes_that_never_come_are_answered_by_failure_policy_and_bounded(
    short_waits,
):
    """An attacker (or a confused client) names nodes no watcher will ever see, on 40
    connections at once: at most 32 wait (for at most the 1 s bound), the others are answered
    at once, all by failurePolicy Fail; /healthz is answered meanwhile; and with the snapshot
    standing still since, the next such request does not wait at all."""
    port, _state, _writer = short_waits
    pod = go_pod("new", cpu="2", uid="uid-busy")
    body = args_body(pod, ["n2", "never"])
    wires = [Wire(port) for _ in range(40)]
    try:
        for wire in wires:
            wire.send(post("/extender/filter", body))
        with Wire(port) as probe:
            assert probe.send(get("/healthz")).response().status == 200
        for wire in wires:
            answer = wire.response().json()
            assert answer["NodeNames"] == ["n2"]
            assert answer["FailedNodes"] == {
                "never": "schedweb has no data for this node yet (failurePolicy Fail)"
            }
        with Wire(port) as again:
            waits = _waits(again)
            assert 1 <= waits.get("timed-out", 0) <= 32  # the cap: the others not at all
            answer = again.send(post("/extender/filter", body)).response().json()
            assert answer["NodeNames"] == ["n2"]
            assert _waits(again) == waits  # nothing moved since: it did not wait
    finally:
        for wire in wires:
            wire.sock.close()


def _waits(wire: Wire) -> dict[str, float]:
    """The listener's count of waits for the snapshot, by outcome (its /metrics)."""
    text = wire.send(get("/metrics")).response().body.decode()
    return {
        labels["outcome"]: value
        for name, labels, value in samples(text)
        if name == "schedweb_extender_catch_up_total"
    }
