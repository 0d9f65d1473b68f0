"""Requeueing pods a policy rejected once the cluster would let them pass
(policies/extender/requeue.py)."""

from __future__ import annotations

import hashlib
import time

import orjson
import pytest

from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterState
from policies.extender import requeue
from policies.extender.requeue import (
    ANNOTATION,
    Recorded,
    rejections_prune,
    rejections_record,
    requeue_key,
    requeue_unblocked,
)
from tests.asgiclient import extender_post
from tests.builders import make_node, make_pod

from .conftest import example

GANG = example("seed-002-gang")
ENTRY = {
    "name": "seed-002-gang",
    "version": 1,
    "document": GANG,
    "contentHash": hashlib.sha256(GANG.encode()).hexdigest(),
}


class RecordingKube:
    """Stands in for the API server: records the annotation patches it was asked for."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, str]] = []

    def annotate_pod(self, *, namespace: str, name: str, annotations: dict) -> None:
        assert ANNOTATION in annotations
        self.patched.append((namespace, name))


def member(name: str, uid: str, node: str = "") -> dict:
    pod = make_pod(
        name=name, labels={"podGroup": "g", "minAvailable": "3"}, scheduler_name="schedweb"
    )
    pod["metadata"]["uid"] = uid
    if node:
        pod["spec"]["nodeName"] = node
    return pod


@pytest.fixture
def redis_db(extender_redis):
    return extender_redis


def rejection(uid: str, name: str, at: float) -> dict:
    return {"uid": uid, "namespace": "default", "name": name, "policy": "seed-002-gang", "at": at}


def sweep(redis_db, state: ClusterState, kube, policies=None, *, now=None) -> dict:
    """One run of the beat task's work over the current state (at `now`, if given)."""
    return requeue_unblocked(
        client=redis_db,
        cluster="c",
        snapshot=LoadedCluster(state.freeze(), "live", "live"),
        policies={"seed-002-gang": ENTRY} if policies is None else policies,
        kube=kube,
        now=now,
    )


def test_a_rejected_gang_member_is_requeued_once_its_group_is_complete(redis_db):
    # The sweeps' time is the test's: the pause between nudges is not a bet on how fast the
    # sweeps before it ran.
    now = time.time()
    pause = requeue.NUDGE_EVERY_SECONDS
    state = ClusterState.from_objects(
        [make_node(name="n1")], [member("m0", "u0"), member("m1", "u1")]
    )
    rejections_record(
        redis_db,
        cluster="c",
        rejections=[rejection("u0", "m0", now)],
    )
    kube = RecordingKube()
    # 2 of 3 members: still blocked, nothing patched, still remembered
    counts = sweep(redis_db, state, kube, now=now)
    assert counts == {"checked": 1, "requeued": 0, "forgotten": 0} and kube.patched == []
    # the third member arrives: m0 would now pass, so it is annotated and forgotten
    state.apply_pod(member("m2", "u2"))
    counts = sweep(redis_db, state, kube, now=now)
    assert counts["requeued"] == 1 and kube.patched == [("default", "m0")]
    # remembered until bound, nudged again only after a pause
    counts = sweep(redis_db, state, kube, now=now + pause - 1)
    assert counts["requeued"] == 0 and len(kube.patched) == 1
    counts = sweep(redis_db, state, kube, now=now + pause)
    assert counts["requeued"] == 1 and len(kube.patched) == 2
    state.apply_pod(member("m0", "u0", node="n1"))
    counts = sweep(redis_db, state, kube, now=now + pause)
    assert counts["forgotten"] == 1 and redis_db.hlen(requeue_key("c")) == 0


def test_bound_gone_or_unpoliced_pods_are_forgotten(redis_db):
    state = ClusterState.from_objects([make_node(name="n1")], [member("m0", "u0", node="n1")])
    now = time.time()
    rejections_record(
        redis_db,
        cluster="c",
        rejections=[rejection("u0", "m0", now), rejection("gone", "x", now)],  # bound, deleted
    )
    counts = sweep(redis_db, state, RecordingKube(), policies={})
    assert counts == {"checked": 0, "requeued": 0, "forgotten": 2}
    assert redis_db.hlen(requeue_key("c")) == 0


def test_a_policy_over_the_installations_budget_nudges_nothing_as_the_extender_serves_nothing(
    redis_db, settings
):
    """The nudge compiles as publish and the extender do (SCHEDWEB_CEL_COST_LIMIT), not with
    the engine's default budget: a policy this installation would not serve is forgotten."""
    state = ClusterState.from_objects(
        [make_node(name="n1")], [member("m0", "u0"), member("m1", "u1"), member("m2", "u2")]
    )
    rejections_record(redis_db, cluster="c", rejections=[rejection("u0", "m0", time.time())])
    settings.SCHEDWEB_CEL_COST_LIMIT = 1  # the gang policy's cluster.countPods costs more
    kube = RecordingKube()
    counts = sweep(redis_db, state, kube)
    assert counts == {"checked": 0, "requeued": 0, "forgotten": 1} and kube.patched == []
    settings.SCHEDWEB_CEL_COST_LIMIT = 1_000_000
    rejections_record(redis_db, cluster="c", rejections=[rejection("u0", "m0", time.time())])
    assert sweep(redis_db, state, kube)["requeued"] == 1


@pytest.mark.django_db
def test_the_extender_remembers_pods_it_rejected_everywhere(publish, settings):
    import orjson

    from .conftest import args_body, go_pod, runtime_by_hand

    publish(example("seed-003-name-length"))
    state = runtime_by_hand()  # the rejections are flushed here, not by a round of its thread
    extender_post("filter", args_body(go_pod("abcdefg"), ["cp-1", "a-small-1"]))
    extender_post(
        "filter", args_body(go_pod("abc"), ["cp-1", "a-small-1"])
    )  # passes: not remembered
    state._flush_rejections()
    stored = {
        k.decode(): orjson.loads(v)
        for k, v in state.redis.hgetall(requeue_key(settings.SCHEDWEB_CLUSTER_NAME)).items()
    }
    assert [entry["name"] for entry in stored.values()] == ["abcdefg"]


def test_invalid_or_oversized_entries_are_not_stored(redis_db):
    now = time.time()
    bad = [
        {**rejection("u" * 1000, "p", now)},  # a 1 MB uid once grew Redis by 84 MB
        {**rejection("u1", "p", now), "uid": {"a": 1}},
        {**rejection("u2", "p", now), "name": ""},
        {**rejection("u3", "p", now), "at": "now"},
        {**rejection("u4", "p", now), "at": float("nan")},
        # within every length limit, but escaped control characters make it 1.6 KB as JSON
        {**rejection("u5", "\x01" * 250, now)},
    ]
    assert rejections_record(redis_db, cluster="c", rejections=bad) == Recorded(0, 0)
    assert redis_db.hlen(requeue_key("c")) == 0
    extra = {**rejection("u6", "p", now), "padding": "x" * 100_000}  # unknown fields not kept
    assert rejections_record(redis_db, cluster="c", rejections=[extra]) == Recorded(1, 0)
    assert len(redis_db.hget(requeue_key("c"), "u6")) < 200


def test_the_store_cannot_be_filled_past_its_cap_and_keeps_the_newest(redis_db, monkeypatch):
    """Issue 27: 10 300 rejections filled the 10 000 cap (check and write were not atomic),
    and then real rejections were dropped for up to 10 minutes. Now the oldest go."""
    monkeypatch.setattr(requeue, "MAX_ENTRIES", 100)
    now = time.time()
    flood = [rejection(f"flood-{i}", f"f{i}", now - 60 + i * 0.001) for i in range(103)]
    assert rejections_record(redis_db, cluster="c", rejections=flood) == Recorded(103, 3)
    assert redis_db.hlen(requeue_key("c")) == 100
    assert not redis_db.hexists(requeue_key("c"), "flood-0")  # the oldest three went
    assert redis_db.hexists(requeue_key("c"), "flood-3")
    real = rejection("real", "m0", now)
    assert rejections_record(redis_db, cluster="c", rejections=[real]) == Recorded(1, 1)
    assert redis_db.hexists(requeue_key("c"), "real")
    assert redis_db.hlen(requeue_key("c")) == 100


def test_concurrent_writers_cannot_fill_the_store_past_its_cap(redis_db, monkeypatch):
    """Several extender processes flush at once: each script call is atomic."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(requeue, "MAX_ENTRIES", 50)
    monkeypatch.setattr(requeue, "BATCH", 7)  # many script calls, interleaved between writers
    now = time.time()

    def writer(w: int) -> Recorded:
        batch = [rejection(f"w{w}-{i}", "p", now + i) for i in range(40)]
        return rejections_record(redis_db, cluster="c", rejections=batch)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(writer, range(8)))
    assert redis_db.hlen(requeue_key("c")) == 50
    assert sum(r.written for r in results) - sum(r.evicted for r in results) == 50
    assert redis_db.zcard(requeue_key("c") + ":order") == 50


def test_entries_written_before_the_order_set_are_evicted_first(redis_db, monkeypatch):
    monkeypatch.setattr(requeue, "MAX_ENTRIES", 2)
    now = time.time()
    redis_db.hset(requeue_key("c"), "legacy", orjson.dumps(rejection("legacy", "p", now)))
    batch = [rejection("a", "p", now - 30), rejection("b", "p", now - 20)]
    assert rejections_record(redis_db, cluster="c", rejections=batch) == Recorded(2, 1)
    assert sorted(redis_db.hkeys(requeue_key("c"))) == [b"a", b"b"]


def test_evictions_are_counted_in_the_listeners_metrics(publish, settings, monkeypatch):
    from policies.extender.entry import metrics_text

    from .conftest import runtime_by_hand

    monkeypatch.setattr(requeue, "MAX_ENTRIES", 1)
    state = runtime_by_hand()
    now = time.time()
    state.rejections.extend(rejection(f"u{i}", "p", now + i) for i in range(3))
    state._flush_rejections()
    assert "schedweb_requeue_evictions_total 2" in metrics_text().decode().splitlines()


def test_a_nudge_does_not_bring_back_an_entry_evicted_meanwhile(redis_db):
    now = time.time()
    alone = make_pod(
        name="m0", labels={"podGroup": "g", "minAvailable": "1"}, scheduler_name="schedweb"
    )
    alone["metadata"]["uid"] = "u0"
    state = ClusterState.from_objects([make_node("n1", cpu="8", memory="16Gi")], [alone])
    rejections_record(redis_db, cluster="c", rejections=[rejection("u0", "m0", now)])
    kube = RecordingKube()

    class Evicting:
        """The API server, while an extender's flush evicts the entry."""

        def annotate_pod(self, **kwargs) -> None:
            kube.annotate_pod(**kwargs)
            redis_db.hdel(requeue_key("c"), "u0")

    assert sweep(redis_db, state, Evicting(), now=now)["requeued"] == 1
    assert kube.patched == [("default", "m0")]
    assert not redis_db.hexists(requeue_key("c"), "u0")


def test_old_entries_are_pruned_whatever_the_source(redis_db, settings):
    from policies.extender.requeue import requeue_run

    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    settings.SCHEDWEB_CLUSTER_NAME = "c"
    now = time.time()
    rejections_record(redis_db, cluster="c", rejections=[rejection("old", "p", now - 3600)])
    rejections_record(redis_db, cluster="c", rejections=[rejection("new", "p", now)])
    assert requeue_run() == {"forgotten": 1}
    assert redis_db.hkeys(requeue_key("c")) == [b"new"]
    assert rejections_prune(redis_db, cluster="c") == 0
