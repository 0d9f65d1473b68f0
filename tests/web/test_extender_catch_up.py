"""A request waiting for the snapshot holds neither the listener's event loop nor the order of
the requests behind it (issue 24; policies/extender/catch_up.py, schedweb/extender_http.py).

One real `python -m schedweb.extender_server` on 127.0.0.1 following a live snapshot in its own
redis-server; the test writes what the watcher would (SnapshotWriter), and raw sockets show what
is answered when.
"""

from __future__ import annotations

import hashlib
import socket
import time

import orjson
import pytest
import yaml

from policies.cluster.state import ClusterState
from policies.cluster.store import NODE, SnapshotStore, SnapshotWriter
from tests.builders import make_node, make_pod
from tests.e2e.stack import RedisServer
from tests.extender.conftest import args_body, go_pod
from tests.listeners import start_extender

from .test_extender_direct_path import Wire, get, post

CLUSTER = "catch-up-listener"
ROOM = """\
name: room
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: fits
    expression: node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu
scores:
  - name: free
    expression: (node.allocatable.cpu - node.requested.cpu) * 100 / node.allocatable.cpu
"""


@pytest.fixture
def listener(tmp_path):
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
    parsed = yaml.safe_load(ROOM)
    entry = {
        "name": parsed["name"],
        "version": 1,
        "document": ROOM,
        "contentHash": hashlib.sha256(ROOM.encode()).hexdigest(),
        "schedulerNames": parsed["schedulerNames"],
        "activatedAt": "2026-11-25T00:00:00+00:00",
    }
    client.hset("schedweb:policies:active", "room", orjson.dumps(entry))
    client.set("schedweb:policies:counter", 1)
    process, port = start_extender(
        tmp_path,
        redis_url=server.url,
        SCHEDWEB_CLUSTER_SOURCE="live",
        SCHEDWEB_CLUSTER_NAME=CLUSTER,
        SCHEDWEB_EXTENDER_CATCH_UP_MS="600000",  # only the node's arrival ends the wait
        SCHEDWEB_SNAPSHOT_STALE_SECONDS="3600",
    )
    try:
        yield port, state, writer
    finally:
        process.stop()
        server.stop()


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
