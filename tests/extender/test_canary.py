"""The canary in the extender (issue 25, item 3): the version judging a pod is a function of its
uid (or labels and namespace), the same on every call and every path, and answers say which."""

from __future__ import annotations

import copy
import hashlib

import orjson
import pytest

from policies.cluster.demo import demo_objects
from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterState
from policies.extender import entry
from policies.extender.runtime import runtime
from policies.publishing import active_entries_write
from policies.rollout.guard import TRIPPED, totals_read
from policies.rollout.split import Split, bucket
from tests.asgiclient import extender_post
from tests.builders import make_pod

from .conftest import ROOM, active_entry, args_body, go_pod, runtime_by_hand
from .test_catch_up import live  # noqa: F401 (a fixture: a live snapshot in Redis)
from .test_shadow import _answer  # as the direct path answers: then after_answer

# The canary: ROOM, but no node for any pod.
REJECT_ALL = ROOM.replace(
    "filters:\n", "filters:\n  - name: nothing\n    expression: pod.name == ''\n"
)


def _install(share: dict, guard: dict | None = None) -> None:
    entry_ = active_entry(ROOM, 1)
    entry_["canary"] = {
        "version": 2,
        "document": REJECT_ALL,
        "contentHash": hashlib.sha256(REJECT_ALL.encode()).hexdigest(),
        "schedulerNames": ["schedweb"],
        "share": share,
        **({"guard": guard} if guard else {}),
    }
    active_entries_write([entry_])
    runtime().registry.refresh_from_redis()


def _uid(i: int) -> str:
    digest = hashlib.sha256(f"pod-{i}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def test_a_percentage_gives_the_canary_about_its_share_of_uids_and_a_uid_always_the_same():
    split = Split(percent=25)
    uids = [_uid(i) for i in range(4000)]
    chosen = [split.canary(u, "default", {}) for u in uids]
    assert 0.23 < sum(chosen) / len(uids) < 0.27
    # the bucket is sha256(uid) mod 10000: the same in any process, on any call
    assert [split.canary(u, "other", {"x": "y"}) for u in uids] == chosen
    assert all(bucket(u) == bucket(u) < 10000 for u in uids[:50])
    assert not any(Split(percent=1).canary(u, "d", {}) for u in uids if bucket(u) >= 100)


def test_a_selector_share_matches_labels_and_the_namespace_a_pod_cannot_claim():
    split = Split.of({"selector": "team in (a,b), kubernetes.io/metadata.name=prod, !legacy"})
    assert split.canary("u", "prod", {"team": "a"})
    assert not split.canary("u", "prod", {"team": "c"})
    assert not split.canary("u", "prod", {"team": "a", "legacy": ""})
    # a pod's own label does not make it part of another namespace
    assert not split.canary("u", "dev", {"team": "a", "kubernetes.io/metadata.name": "prod"})


def test_the_canary_answers_for_its_share_and_the_stable_version_for_the_rest(extender_redis):
    _install({"percent": 25})
    state = runtime_by_hand()
    state.decisions.take()
    pods = [go_pod(f"web-{i}", uid=_uid(i)) for i in range(40)]
    canary = [Split(percent=25).canary(p["metadata"]["uid"], "default", {}) for p in pods]
    assert 4 <= sum(canary) <= 16
    for pod, is_canary in zip(pods, canary, strict=True):
        status, body, label = _answer("filter", args_body(pod))
        result = orjson.loads(body)
        assert status == 200
        assert label == ("room/v2" if is_canary else "room/v1")
        assert bool(result["NodeNames"]) is not is_canary
        # prioritize (reusing filter's evaluation or not) answers with the same version
        assert _answer("prioritize", args_body(pod))[2] == label
        state.extender.shared.clear()
        assert _answer("prioritize", args_body(pod))[2] == label
        assert _answer("filter", args_body(pod))[2] == label
    arms = {r["pod"]["name"]: (r["arm"], r["version"]) for r in state.decisions.take()}
    assert arms, "decisions were sampled"
    for name, (arm, version) in arms.items():
        i = int(name.split("-")[1])
        assert (arm, version) == (("canary", 2) if canary[i] else ("stable", 1))


def test_the_full_node_form_and_a_selector_share_choose_the_same_way(extender_redis):
    _install({"selector": "track=canary"})
    runtime_by_hand()
    yes = go_pod("web-a", labels={"track": "canary"})
    no = go_pod("web-b", labels={"track": "stable"})
    assert _answer("filter", args_body(yes, full=True))[2] == "room/v2"
    assert _answer("filter", args_body(no, full=True))[2] == "room/v1"


def test_a_canary_entry_whose_share_does_not_parse_leaves_the_stable_version_deciding(
    extender_redis,
):
    _install({"selector": "a in (("})
    runtime_by_hand()
    served = runtime().registry.by_scheduler["schedweb"]
    assert served.canary is None and served.label == "room/v1"
    assert _answer("filter", args_body(go_pod("web-1")))[2] == "room/v1"


@pytest.mark.django_db
def test_a_canary_that_rejects_every_pod_trips_its_guard_at_its_min_pods_th_pod(
    extender_redis,
):
    _install({"selector": "app=web"}, {"rejectedRate": 5, "errorRate": 5, "minPods": 5})
    runtime_by_hand()
    labels = [_answer("filter", args_body(go_pod(f"web-{i}")))[2] for i in range(8)]
    # the 5th pod's counts cross the threshold; from the 6th on, the stable version judges
    assert labels == ["room/v2"] * 5 + ["room/v1"] * 3
    totals = totals_read(extender_redis, "room", 2)
    # the canary's life is over: the pods after it are not counted for it
    assert (totals["canary:judged"], totals["canary:rejected"], totals["stable:judged"]) == (
        5,
        5,
        0,
    )
    why = orjson.loads(extender_redis.get(TRIPPED.format(policy="room", version=2)))
    assert (why["reason"], why["canary"]["rejectedRate"], why["threshold"]["minPods"]) == (
        "rejected",
        100.0,
        5,
    )
    text = entry.metrics_text().decode()
    assert "schedweb_extender_canary_guard_trips_total" in text
    # a refresh of the same set (another policy published) does not bring the canary back
    runtime().registry.counter = None
    runtime().registry.refresh_from_redis()
    assert _answer("filter", args_body(go_pod("web-9")))[2] == "room/v1"


def test_a_canary_no_worse_than_stable_holds_past_its_min_pods(extender_redis):
    _install({"percent": 50}, {"rejectedRate": 100, "errorRate": 5, "minPods": 3})
    runtime_by_hand()
    pods = [go_pod(f"web-{i}", uid=_uid(i)) for i in range(30)]
    labels = {_answer("filter", args_body(p))[2] for p in pods}
    assert labels == {"room/v1", "room/v2"}  # rejecting 100 points more is within 100
    assert extender_redis.get(TRIPPED.format(policy="room", version=2)) is None


@pytest.mark.django_db
def test_the_asgi_path_and_bind_s_re_check_use_the_version_that_judges_the_pod(
    extender_redis, monkeypatch
):
    _install({"selector": "track=canary"})
    canary_pod = make_pod("web-a", uid="u-canary", labels={"track": "canary"}, cpu="100m")
    stable_pod = make_pod("web-b", uid="u-stable", labels={"track": "stable"}, cpu="100m")
    nodes, pods = (copy.deepcopy(objects) for objects in demo_objects()[:2])
    state = ClusterState.from_objects(nodes, [*pods, canary_pod, stable_pod]).freeze()
    snapshot = LoadedCluster(state, "live", "test", version=1)
    extender = runtime().extender
    monkeypatch.setattr(extender, "_snapshot", lambda: snapshot)
    bound: list[tuple[str, str]] = []
    monkeypatch.setattr(extender, "_binder", lambda args: bound.append((args.pod_uid, args.node)))
    # filter through the ASGI application, as kube-scheduler calls it
    for pod, label in ((canary_pod, "room/v2"), (stable_pod, "room/v1")):
        response = extender_post("filter", args_body(pod, ["a-small-1", "b-small-1"]))
        assert response["X-Schedweb-Policy"] == label
        assert bool(response.json()["NodeNames"]) is (label == "room/v1")

    def bind(pod: dict) -> dict:
        meta = pod["metadata"]
        body = {
            "PodName": meta["name"],
            "PodNamespace": meta["namespace"],
            "PodUID": meta["uid"],
            "Node": "a-small-1",
        }
        return extender_post("bind", orjson.dumps(body)).json()

    # bind re-checks with the pod's own version: the canary rejects every node
    assert bind(stable_pod) == {"Error": ""}
    assert bind(canary_pod) != {"Error": ""}
    assert bound == [("u-stable", "a-small-1")]


@pytest.mark.django_db
def test_the_offload_pool_s_worker_processes_answer_with_the_version_that_judges_the_pod(
    settings, tmp_path
):
    from tests.redisdb import redis_database

    from .test_offload import REDIS_DB, _listener_process, _padded_filter, _post

    with redis_database(settings, REDIS_DB):
        _install({"selector": "track=canary"})
        # the listener is ready when its worker answers pod "abc" (stable) with room/v1
        with _listener_process(tmp_path, "room") as port:
            canary_pod = go_pod("web-a", labels={"track": "canary"})
            status, _, label = _post(port, "filter", _padded_filter(canary_pod))
            assert (status, label) == (200, "room/v2")
            status, _, label = _post(port, "filter", _padded_filter(go_pod("web-b")))
            assert (status, label) == (200, "room/v1")


def test_an_answer_after_a_catch_up_wait_comes_from_the_version_that_judges_the_pod(live):  # noqa: F811
    from tests.builders import make_node

    from .test_catch_up import _answer as answer_after_wait
    from .test_catch_up import _decisions

    entry_ = active_entry(ROOM, 1)
    entry_["canary"] = {
        "version": 2,
        "document": REJECT_ALL,
        "contentHash": hashlib.sha256(REJECT_ALL.encode()).hexdigest(),
        "schedulerNames": ["schedweb"],
        "share": {"selector": "track=canary"},
    }
    active_entries_write([entry_])
    names = ["n1", "n2", "n3"]
    canary_pod = go_pod("new", cpu="2", uid="uid-busy", labels={"track": "canary"})
    body = args_body(canary_pod, names)
    assert isinstance(entry.extender_answer_or_wait("filter", body), entry.Waiting)
    status, answer = answer_after_wait(
        "filter", body, then=lambda: live.add_node(make_node("n3", cpu="8"))
    )
    assert status == 200 and answer["NodeNames"] == []  # the canary rejects every node
    (decision,) = _decisions()
    assert (decision["arm"], decision["version"]) == ("canary", 2)
    assert decision["catchUp"]["outcome"] == "caught-up"


@pytest.mark.django_db
def test_a_canary_that_fails_internally_counts_errors_and_trips_its_guard(
    extender_redis, monkeypatch
):
    _install({"selector": "app=web"}, {"rejectedRate": 100, "errorRate": 5, "minPods": 3})
    runtime_by_hand()
    canary = runtime().registry.by_scheduler["schedweb"].canary

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(canary.compiled, "evaluate", broken)
    labels = [_answer("filter", args_body(go_pod(f"boom-{i}")))[2] for i in range(5)]
    assert labels == ["room/v2"] * 3 + ["room/v1"] * 2
    why = orjson.loads(extender_redis.get(TRIPPED.format(policy="room", version=2)))
    assert (why["reason"], why["canary"]["errors"], why["canary"]["errorRate"]) == (
        "errors",
        3,
        100.0,
    )
