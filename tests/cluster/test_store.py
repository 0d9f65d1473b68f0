"""The Redis snapshot store: writer, incremental readers, staleness, lock, outages.

Real Redis (the shared test instance, database 13; a private redis-server for the outage), no
Kubernetes: states are built from tests/builders.py objects.
"""

from __future__ import annotations

import threading
import time

import orjson
import pytest
import redis

from policies.cluster import store as store_module
from policies.cluster.reader import BackgroundRefresher, SnapshotReader
from policies.cluster.state import ClusterState
from policies.cluster.store import (
    NODE,
    NODE_DELETE,
    OBJECT,
    OBJECT_DELETE,
    POD,
    POD_DELETE,
    SnapshotLost,
    SnapshotStore,
    SnapshotWriter,
    cluster_name_check,
)
from policies.errors import ClusterUnavailable
from tests.builders import make_node, make_pod

from .conftest import LIVE_DB_URL, wait_until


def _state() -> ClusterState:
    # n1: 4 CPU; web-1 (250m) bound to it -> n1 requested 250m
    return ClusterState.from_objects(
        [make_node("n1", cpu="4"), make_node("n2", cpu="8")],
        [make_pod("web-1", cpu="250m", node_name="n1")],
    )


def _healthy(store: SnapshotStore) -> None:
    store.meta_write({"status": "ok", "heartbeat_at": time.time()})


class CountingConnection(redis.Connection):
    """Counts round trips: one packed send per command or per pipeline."""

    sends = 0

    def send_packed_command(self, command, check_health=True):
        CountingConnection.sends += 1
        return super().send_packed_command(command, check_health)


@pytest.fixture
def store(cluster_name, live_redis) -> SnapshotStore:
    return SnapshotStore(cluster_name, client=live_redis)


@pytest.fixture
def writer(store) -> SnapshotWriter:
    return SnapshotWriter(store)


def _read(store: SnapshotStore, writer: SnapshotWriter, **options) -> tuple:
    """_state() written in full and a reader (SnapshotReader options) that loaded it."""
    state = _state()
    writer.full(state, reset=True)
    reader = SnapshotReader(store.cluster, client=store.client, **options)
    reader.refresh()
    return state, reader


def test_a_reader_loads_the_full_snapshot_once_then_applies_only_the_new_deltas(store, writer):
    state = _state()
    writer.full(state, reset=True)
    _healthy(store)
    reader = SnapshotReader(store.cluster, client=store.client)
    assert reader.refresh() is True
    assert reader.current.version == writer.version == 1
    assert reader.current.state.node("n1")["requested"]["cpu"] == 250

    # A second pod on n1 (500m) and a relabelled n2: n1 requested = 250 + 500 = 750m.
    pod = state.apply_pod(make_pod("web-2", cpu="500m", node_name="n1"))
    node = state.apply_node(make_node("n2", cpu="8", labels={"disk": "ssd"}))
    writer.deltas([(POD, orjson.dumps(pod["object"])), (NODE, orjson.dumps(node["object"]))])

    assert reader.refresh() is True
    assert (reader.full_loads, reader.deltas_applied) == (1, 2)
    assert reader.current.version == 3
    assert reader.current.state.node("n1")["requested"]["cpu"] == 750
    assert reader.current.state.node("n2")["labels"]["disk"] == "ssd"


def test_namespace_service_and_controller_changes_reach_the_reader_as_deltas(store, writer):
    state, reader = _read(store, writer)
    ns = state.apply_object("Namespace", {"metadata": {"name": "shop", "labels": {"team": "a"}}})
    svc = state.apply_object(
        "Service",
        {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"selector": {"app": "web"}}},
    )
    writer.deltas([(OBJECT, orjson.dumps(ns)), (OBJECT, orjson.dumps(svc))])
    reader.refresh()
    assert reader.current.state.namespaces() == {"shop": {"team": "a"}}
    assert reader.current.state.services("shop") == ({"app": "web"},)
    state.delete_object("Service/shop/web")
    writer.deltas([(OBJECT_DELETE, "Service/shop/web"), (OBJECT, b'{"kind": "Secret"}')])
    reader.refresh()
    assert reader.current.state.services("shop") == ()  # the bad delta was skipped
    assert (reader.full_loads, reader.deltas_applied) == (1, 4)


def test_deletions_reach_the_reader_and_free_the_nodes_usage(store, writer):
    state, reader = _read(store, writer)
    state.delete_pod("uid-default-web-1")
    state.delete_node("n2")
    writer.deltas([(POD_DELETE, "uid-default-web-1"), (NODE_DELETE, "n2")])
    reader.refresh()
    snapshot = reader.current.state
    assert [n["name"] for n in snapshot.nodes()] == ["n1"]
    assert snapshot.pod_count() == 0
    assert snapshot.node("n1")["requested"]["cpu"] == 0  # 250m freed


def test_a_refresh_when_nothing_changed_is_one_round_trip_and_keeps_the_snapshot(
    cluster_name, live_redis
):
    client = redis.Redis(
        connection_pool=redis.ConnectionPool.from_url(
            LIVE_DB_URL, connection_class=CountingConnection
        )
    )
    store = SnapshotStore(cluster_name, client=client)
    SnapshotWriter(store).full(_state(), reset=True)
    reader = SnapshotReader(cluster_name, client=client)
    reader.refresh()
    before = reader.current.state
    CountingConnection.sends = 0
    assert reader.refresh() is False
    assert CountingConnection.sends == 1
    assert reader.current.state is before  # the same frozen snapshot: nothing rebuilt


def test_a_snapshot_handed_out_never_changes_when_the_reader_moves_on(store, writer):
    state, reader = _read(store, writer)
    old = reader.current.state
    view = state.apply_node(make_node("n3"))
    writer.delta(NODE, orjson.dumps(view["object"]))
    reader.refresh()
    assert reader.current.state.node_count() == 3
    assert old.node_count() == 2 and old.node("n3") is None


def test_it_reloads_the_full_snapshot_when_the_deltas_it_needs_were_trimmed(store, writer):
    state, reader = _read(store, writer)
    for i in range(5):
        view = state.apply_node(make_node(f"x{i}"))
        writer.delta(NODE, orjson.dumps(view["object"]))
    writer.full(state, reset=False)  # checkpoint at v6
    store.client.xtrim(store.keys.events, maxlen=1, approximate=False)  # only v6 remains
    assert reader.refresh() is True
    assert reader.full_loads == 2
    assert reader.current.version == 6
    assert reader.current.state.node_count() == 7


@pytest.mark.parametrize(
    "versions_after",
    [
        # Redis lost everything; a writer starts a new history numbered on: epoch differs.
        "higher",
        # A new history numbered from 1 while the reader is at 3: the version went backwards.
        "lower",
    ],
)
def test_a_new_history_makes_the_reader_reload(store, writer, versions_after):
    state = _state()
    writer.full(state, reset=True)
    view = state.apply_node(make_node("n3"))
    writer.deltas([(NODE, orjson.dumps(view["object"]))] * 2)  # v3
    reader = SnapshotReader(store.cluster, client=store.client)
    reader.refresh()
    store.client.delete(*store.keys.all())
    fresh = SnapshotWriter(store)
    if versions_after == "higher":
        fresh.adopt(epoch="", version=10)
    new_state = ClusterState.from_objects([make_node("only")], [])
    version = fresh.full(new_state, reset=True)
    assert version == (11 if versions_after == "higher" else 1)
    assert reader.refresh() is True
    assert reader.full_loads == 2
    assert [n["name"] for n in reader.current.state.nodes()] == ["only"]


def test_a_reset_replaces_the_state_for_incremental_readers(store, writer):
    writer.full(_state(), reset=True)
    reader = SnapshotReader(store.cluster, client=store.client)
    reader.refresh()
    writer.full(ClusterState.from_objects([make_node("fresh")], []), reset=True)
    assert writer.version == 2
    reader.refresh()
    assert reader.full_loads == 2
    assert [n["name"] for n in reader.current.state.nodes()] == ["fresh"]


def test_a_reader_reports_why_there_is_no_snapshot_and_never_an_empty_cluster(store):
    reader = SnapshotReader(store.cluster, client=store.client)
    with pytest.raises(ClusterUnavailable, match="no watcher has written one"):
        reader.load()
    store.meta_write(
        {"status": "error", "error": "unauthorized: the API server rejected the credentials"}
    )
    with pytest.raises(ClusterUnavailable, match="unauthorized: the API server rejected"):
        reader.load()
    store.meta_write({"status": "starting", "error": ""})
    with pytest.raises(ClusterUnavailable, match="listing the cluster"):
        reader.load()


@pytest.mark.parametrize(
    ("meta", "stale", "message"),
    [
        # a healthy watcher that reported 1 s ago (limit 30 s)
        ({"status": "ok", "heartbeat_at": -1}, False, ""),
        # the watcher's last report is 60 s old: it is gone (a killed worker)
        ({"status": "ok", "heartbeat_at": -60}, True, "has not reported for 60 s"),
        # the watcher is alive but its watch fails
        (
            {
                "status": "error",
                "error": "forbidden: the account needs list and watch on nodes and pods (RBAC)",
                "heartbeat_at": -1,
            },
            True,
            "forbidden",
        ),
        # no watcher ever reported on this snapshot
        ({}, True, "no watcher"),
    ],
)
def test_a_snapshot_is_marked_stale_when_its_watcher_fails_or_falls_silent(
    store, writer, meta, stale, message
):
    writer.full(_state(), reset=True)
    if meta:
        store.meta_write({**meta, "heartbeat_at": time.time() + meta["heartbeat_at"]})
    loaded = SnapshotReader(store.cluster, client=store.client, stale_seconds=30).load()
    assert loaded.state.node_count() == 2
    assert loaded.stale is stale
    assert message in loaded.error
    assert ("stale" in loaded.describe()) is stale


def test_deltas_after_redis_lost_the_history_raise_snapshot_lost(store, writer):
    writer.full(_state(), reset=True)
    store.client.delete(store.keys.epoch, store.keys.version)
    with pytest.raises(SnapshotLost):
        writer.delta(NODE_DELETE, "n1")
    with pytest.raises(SnapshotLost):
        writer.full(_state(), reset=False)
    assert writer.full(_state(), reset=True) == 2  # a new history, numbered on
    assert store.client.get(store.keys.epoch).decode() == writer.epoch


def test_the_watch_lock_is_exclusive_renewable_and_released(store):
    token = store.lock_acquire(ttl=10)
    assert token and store.lock_holder() == token
    assert store.lock_acquire(ttl=10) is None
    assert store.lock_renew(token, ttl=10) == "held"
    assert store.lock_renew("someone-else", ttl=10) == "lost"
    store.client.delete(store.keys.lock)  # expired, or Redis restarted
    assert store.lock_renew(token, ttl=10) == "retaken"
    store.lock_release("someone-else")
    assert store.lock_holder() == token
    store.lock_release(token)
    assert store.lock_holder() is None


@pytest.mark.parametrize("name", ["", "a b", "a:b", "x" * 64, "-lead", "é"])
def test_it_refuses_cluster_names_that_are_unsafe_in_redis_keys(name):
    with pytest.raises(ValueError, match="invalid cluster name"):
        cluster_name_check(name)


def test_a_redis_outage_keeps_the_last_snapshot_and_marks_it_stale_after_the_limit(private_redis):
    store = SnapshotStore("outage", client=private_redis.client())
    SnapshotWriter(store).full(_state(), reset=True)
    # A heartbeat an hour ahead: its age reads 0 however slowly the test runs, so only the
    # outage (0.5 s of failed refreshes, by the reader's own clock) can make the snapshot stale.
    store.meta_write({"status": "ok", "heartbeat_at": time.time() + 3600})
    reader = SnapshotReader("outage", client=private_redis.client(), stale_seconds=0.5)
    with BackgroundRefresher(reader, interval=0.05) as refresher:
        wait_until(lambda: reader.current is not None, what="the first load")
        assert reader.current.stale is False
        private_redis.stop()
        wait_until(lambda: refresher.errors > 0, what="a failed refresh")
        during = reader.current
        assert during.state.node_count() == 2  # the last snapshot, not an empty one
        stale = wait_until(lambda: reader.current if reader.current.stale else None, what="stale")
        assert stale.status == "error" and stale.error.startswith("redis:")
        assert stale.state.node_count() == 2
        private_redis.start()  # empty: it lost the snapshot
        missing = wait_until(
            lambda: reader.current if "no longer holds" in reader.current.error else None,
            what="the reader noticing the lost snapshot",
        )
        assert missing.stale and missing.state.node_count() == 2


def test_an_unreadable_stored_snapshot_is_reported_not_raised_and_not_parsed_again(store, writer):
    writer.full(_state(), reset=True)
    store.client.hset(store.keys.full, "state", b'{"format": 999}')
    reader = SnapshotReader(store.cluster, client=store.client)
    with pytest.raises(ClusterUnavailable, match="cannot be read"):
        reader.load()
    parsed = []
    original = ClusterState.from_bytes
    ClusterState.from_bytes = classmethod(
        lambda cls, *a, **k: parsed.append(1) or original(*a, **k)
    )
    try:
        with pytest.raises(ClusterUnavailable, match="cannot be read"):
            reader.load()
    finally:
        ClusterState.from_bytes = original
    assert parsed == []
    writer.full(_state(), reset=True)  # a good snapshot again
    assert reader.load().state.node_count() == 2


# -- pushed readers (issue 24): what a blocking XREAD returned, applied in place ---------------


def _pushed(reader: SnapshotReader, *, block_ms: int = 10_000) -> list:
    """What the extender's thread gets: a blocking XREAD of the events stream after the version
    the reader holds (returns as soon as an entry is there)."""
    key = reader.store.keys.events
    found = reader.store.client.xread({key: reader.follow_from()}, block=block_ms)
    assert found, "no entry arrived"
    return found[0][1]


def test_each_delta_carries_the_writers_time(store, writer):
    state = _state()
    writer.full(state, reset=True)
    before = time.time()
    pod = state.apply_pod(make_pod("web-2", cpu="500m", node_name="n1"))
    writer.delta(POD, orjson.dumps(pod["object"]))
    (_id, fields), *_ = store.client.xrange(store.keys.events, min="2-0", max="+")
    assert before <= float(fields[b"t"]) <= time.time()


def test_an_in_place_reader_applies_pushed_deltas_to_the_state_its_requests_read(store, writer):
    moved: list[int] = []
    state = _state()
    writer.full(state, reset=True)
    _healthy(store)
    reader = SnapshotReader(
        store.cluster, client=store.client, in_place=True, on_change=moved.append
    )
    reader.refresh()
    served = reader.current.state
    assert served.node("n1")["requested"]["cpu"] == 250 and moved == [1]

    # web-2 (500m) binds to n1: 250 + 500 = 750m, in the very object requests read
    pod = state.apply_pod(make_pod("web-2", cpu="500m", node_name="n1"))
    writer.delta(POD, orjson.dumps(pod["object"]))
    assert reader.follow_from() == "1-0"
    assert reader.follow(_pushed(reader)) is True
    assert reader.current.state is served and reader.current.version == 2
    assert served.node("n1")["requested"]["cpu"] == 750
    assert moved == [1, 2] and reader.follows == 1 and reader.full_loads == 1
    assert reader.written_at is not None and reader.lag_seconds is not None
    assert reader.applied_at >= reader.written_at


def test_no_pushed_delta_changes_an_in_place_state_while_a_reader_holds_the_serve_lock(
    store, writer
):
    state, reader = _read(store, writer, in_place=True)
    served = reader.current.state
    pod = state.apply_pod(make_pod("web-2", cpu="500m", node_name="n1"))
    writer.delta(POD, orjson.dumps(pod["object"]))
    entries = _pushed(reader)
    with reader.serve_lock:  # a request reading the snapshot
        follower = threading.Thread(target=reader.follow, args=(entries,))
        follower.start()
        wait_until(reader._lock.locked, what="the follower inside follow()")
        # it can apply nothing before the request ends
        assert served.node("n1")["requested"]["cpu"] == 250 and served.version == 1
        assert follower.is_alive()
    follower.join(60)
    assert served.node("n1")["requested"]["cpu"] == 750 and served.version == 2


def test_a_pushed_entry_after_a_gap_is_read_again_from_the_stream(store, writer):
    state, reader = _read(store, writer, in_place=True)
    pods = [state.apply_pod(make_pod(f"web-{i}", cpu="100m", node_name="n2")) for i in (2, 3)]
    writer.deltas([(POD, orjson.dumps(p["object"])) for p in pods])
    # only the last entry pushed (as after a reconnect): version 3 does not follow 1
    last = store.client.xrange(store.keys.events, min="3-0", max="+")
    assert reader.follow(last) is True
    assert reader.current.version == 3 and reader.deltas_applied == 2 and reader.full_loads == 1
    assert reader.current.state.node("n2")["requested"]["cpu"] == 200


def test_a_pushed_reset_reloads_a_new_state_and_leaves_the_old_one_as_it_was(store, writer):
    _, reader = _read(store, writer, in_place=True)
    old = reader.current.state
    replaced = ClusterState.from_objects([make_node("n9", cpu="2")], [])
    writer.full(replaced, reset=True)  # the watcher relisted: a `reset` entry
    assert reader.follow(_pushed(reader)) is True
    assert reader.full_loads == 2 and reader.current.state is not old
    assert [n["name"] for n in reader.current.state.nodes()] == ["n9"]
    assert [n["name"] for n in old.nodes()] == ["n1", "n2"]  # a request holding it is unaffected


def test_a_freezing_reader_publishes_a_new_frozen_snapshot_for_pushed_deltas(store, writer):
    state, reader = _read(store, writer)
    before = reader.current.state
    node = state.apply_node(make_node("n2", cpu="8", labels={"disk": "ssd"}))
    writer.delta(NODE, orjson.dumps(node["object"]))
    assert reader.follow(_pushed(reader)) is True
    assert reader.current.state is not before and "disk" not in before.node("n2")["labels"]
    assert reader.current.state.node("n2")["labels"]["disk"] == "ssd"


def test_a_lean_in_place_reader_serves_a_binding_at_its_next_read_with_the_object_cut(
    store, writer
):
    state, reader = _read(store, writer, in_place=True, lean=True)
    _healthy(store)
    served = reader.current.state
    pending = state.apply_pod(make_pod("web-2", cpu="500m", labels={"app": "web"}))
    writer.delta(POD, orjson.dumps(pending["object"]))
    assert reader.follow(_pushed(reader)) is True
    assert served.pod("uid-default-web-2")["object"] == pending["object"]  # pending: kept

    bound = make_pod("web-2", cpu="500m", labels={"app": "web"}, node_name="n1")
    writer.delta(POD, orjson.dumps(state.apply_pod(bound)["object"]))
    assert reader.follow(_pushed(reader)) is True
    pod = served.pod("uid-default-web-2")
    assert pod["nodeName"] == "n1" and pod["object"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {},
    }
    assert served.node("n1")["requested"]["cpu"] == 750 and served.node("n1")["podCount"] == 2
    assert served.count_pods_on_node("n1", "default", {"app": "web"}) == 1
    assert reader.current.version == 3


def test_a_request_never_sees_a_pushed_binding_half_applied(store, writer):
    """Read as a request reads (under the serve lock) while 300 bindings are applied: the
    node's usage always matches the pods bound to it."""
    state, reader = _read(store, writer, in_place=True, lean=True)
    served = reader.current.state
    pods = [state.apply_pod(make_pod(f"b{i}", cpu="10m", node_name="n2")) for i in range(300)]
    writer.deltas([(POD, orjson.dumps(p["object"])) for p in pods])
    entries = store.client.xrange(store.keys.events, min="2-0", max="+")
    follower = threading.Thread(target=reader.follow, args=(entries,))
    follower.start()
    reads = 0
    while follower.is_alive() or not reads:
        with reader.serve_lock:
            node, bound = served.node("n2"), served.pods_on_node("n2")
            assert node["podCount"] == len(bound)
            assert node["requested"]["cpu"] == sum(p["requests"]["cpu"] for p in bound)
            assert served.count_pods_on_node("n2", "default", {}) == len(bound)
        reads += 1
        time.sleep(0.001)  # outside the lock: the follower takes it between two reads
    follower.join(60)
    assert served.node("n2")["podCount"] == 300 and reader.current.version == 301


def test_a_large_state_is_stored_in_pieces_cut_at_line_ends_and_read_whole(
    store, writer, monkeypatch
):
    """Redis refuses a value over 512 MB; a snapshot of 150 000 pods with their raw objects
    passes it (issue 28). Pieces here of 2 KB."""
    monkeypatch.setattr(store_module, "FULL_CHUNK_BYTES", 2000)
    state = ClusterState.from_objects(
        [make_node("n1", cpu="64")],
        [make_pod(f"web-{i}", cpu="10m", node_name="n1") for i in range(40)],
    )
    writer.full(state, reset=True)
    stored = store.client.hgetall(store.keys.full)
    count = int(stored[b"chunks"])
    pieces = [stored[b"state"]] + [stored[f"state.{i}".encode()] for i in range(1, count)]
    assert count > 3 and b"".join(p + b"\n" for p in pieces)[:-1] == state.to_bytes()
    reader = SnapshotReader(store.cluster, client=store.client)
    reader.refresh()
    assert reader.current.state.pod_count() == 40
    assert reader.current.state.node("n1")["requested"]["cpu"] == 400

    smaller = ClusterState.from_objects([make_node("n1", cpu="64")], [])
    writer.full(smaller, reset=True)  # fewer pieces: none of the old ones left
    assert int(store.client.hget(store.keys.full, "chunks")) == 1
    assert not [f for f in store.client.hkeys(store.keys.full) if f.startswith(b"state.")]
    reader.refresh()
    assert reader.current.state.pod_count() == 0 and reader.full_loads == 2


def test_a_stored_state_missing_a_piece_is_reported_not_read(store, writer, monkeypatch):
    monkeypatch.setattr(store_module, "FULL_CHUNK_BYTES", 2000)
    state = ClusterState.from_objects(
        [make_node("n1")], [make_pod(f"web-{i}", node_name="n1") for i in range(40)]
    )
    writer.full(state, reset=True)
    _healthy(store)
    store.client.hdel(store.keys.full, "state.2")
    reader = SnapshotReader(store.cluster, client=store.client)
    reader.refresh()
    assert reader.current is None or reader.current.stale


def test_a_state_rewritten_while_its_pieces_are_read_is_read_again_not_mixed(
    store, writer, monkeypatch
):
    """The pieces are fetched one at a time, each checked to be of the write the first was
    (a checkpoint rewrites the same version with pieces cut elsewhere)."""
    monkeypatch.setattr(store_module, "FULL_CHUNK_BYTES", 2000)
    state = ClusterState.from_objects(
        [make_node("n1", cpu="64")],
        [make_pod(f"web-{i}", cpu="10m", node_name="n1") for i in range(40)],
    )
    writer.full(state, reset=True)
    _healthy(store)
    reader = SnapshotReader(store.cluster, client=store.client)
    fetch = SnapshotReader._pieces

    def checkpoint_meanwhile(self, count, written):
        time.sleep(0.01)  # the checkpoint's time differs from the first write's
        writer.full(state, reset=False)
        yield from fetch(self, count, written)

    monkeypatch.setattr(SnapshotReader, "_pieces", checkpoint_meanwhile)
    reader.refresh()
    assert reader.current is None and reader.full_loads == 0
    monkeypatch.setattr(SnapshotReader, "_pieces", fetch)
    reader.refresh()
    assert reader.current.state.pod_count() == 40 and reader.full_loads == 1


@pytest.mark.parametrize("drop", [False, True])
def test_a_reader_that_drops_before_loading_never_holds_two_states(
    store, writer, monkeypatch, drop
):
    """The offload pool's readers (drop_before_load): their answers wait for the refresh
    anyway, so the old state goes before the new one is built; the listener's keep answering
    from it meanwhile (issue 28: a reload held both, and kept 125 MB of the first)."""
    _, reader = _read(store, writer, in_place=True, lean=True, drop_before_load=drop)
    old = reader.current.state
    held: list = []
    build = ClusterState.from_bytes

    def recording(data, **options):
        held.append((reader.current, reader.follow_from()))
        return build(data, **options)

    monkeypatch.setattr(ClusterState, "from_bytes", staticmethod(recording))
    writer.full(ClusterState.from_objects([make_node("n9", cpu="2")], []), reset=True)
    assert reader.refresh() is True
    current, follow_from = held[0]
    if drop:
        assert current is None and follow_from is None
    else:
        assert current is not None and current.state is old
    assert [n["name"] for n in reader.current.state.nodes()] == ["n9"]
    assert reader.full_loads == 2


def test_a_dropping_reader_reads_a_snapshot_rewritten_under_it_again_at_once(
    store, writer, monkeypatch
):
    """It holds nothing else to answer from: a load that met a rewrite is retried in the same
    refresh (a reader that kept its old state answers from that and retries at its next)."""
    monkeypatch.setattr(store_module, "FULL_CHUNK_BYTES", 2000)
    state = ClusterState.from_objects(
        [make_node("n1", cpu="64")],
        [make_pod(f"web-{i}", cpu="10m", node_name="n1") for i in range(40)],
    )
    writer.full(state, reset=True)
    _healthy(store)
    reader = SnapshotReader(store.cluster, client=store.client, drop_before_load=True)
    fetch = SnapshotReader._pieces
    rewrites = []

    def checkpoint_once(self, count, written):
        if not rewrites:
            rewrites.append(1)
            time.sleep(0.01)  # the checkpoint's time differs from the first write's
            writer.full(state, reset=False)
        yield from fetch(self, count, written)

    monkeypatch.setattr(SnapshotReader, "_pieces", checkpoint_once)
    assert reader.refresh() is True
    assert rewrites and reader.current.state.pod_count() == 40 and reader.full_loads == 1


def test_a_released_reader_holds_nothing_and_loads_whole_at_its_next_refresh(store, writer):
    _, reader = _read(store, writer, in_place=True, lean=True)
    _healthy(store)
    assert reader.release(when=lambda: False) is False  # asked under the lock: not now
    assert reader.current is not None
    held = reader.current.state
    assert reader.release() is True
    assert reader.current is None and reader.follow_from() is None
    assert reader.release() is False  # nothing left to let go of
    assert held.node("n1")["requested"]["cpu"] == 250  # a request holding it keeps it whole
    assert reader.refresh() is True
    assert reader.full_loads == 2 and reader.current.state is not held
    assert reader.current.state.node("n1")["requested"]["cpu"] == 250
