"""Hostile bodies at the protocol boundary: mutated Go-shaped requests never get a 5xx, and the
rejection and decision paths keep working afterwards (issue 14).

Each body is a valid request as kube-scheduler writes it with one to three fields replaced by
a value of another JSON type, deleted, or swapped for another part of the body; one in ten is
also damaged byte by byte. Seeded: a failure names the seed and body that reproduce it.
"""

from __future__ import annotations

import copy
import json
import random
import time

import orjson
import pytest

from policies import services
from policies.extender import entry
from policies.extender.requeue import requeue_key
from policies.extender.runtime import runtime
from policies.models import Decision

from .conftest import demo_node_objects, example, go_pod, runtime_by_hand

pytestmark = pytest.mark.django_db

BODIES_PER_VERB = 10_000
# A bound on the run's CPU time (this thread's, which other load does not stretch), far above
# its cost (about 9 s for full Node objects): a run gone quadratic fails instead of stalling.
CPU_SECONDS_PER_RUN = 120

# Values of every JSON type, and strings that trip naive parsing ("²" passes isdigit, not int).
SUBSTITUTES = [
    None,
    {},
    [],
    "",
    "x",
    "²",
    "\u0000",
    0,
    -1,
    1.5,
    10**30,
    True,
    {"a": 1},
    ["x"],
    [None],
    {"metadata": None},
    "x" * 300,
]


def _paths(value, parent=None, key=None, out=None) -> list[tuple]:
    """Every (container, key) in the body."""
    out = [] if out is None else out
    if parent is not None:
        out.append((parent, key))
    if isinstance(value, dict):
        for k, v in value.items():
            _paths(v, value, k, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _paths(v, value, i, out)
    return out


def mutate(document: dict, rng: random.Random) -> bytes:
    """A copy of `document` with 1-3 structural mutations, sometimes damaged byte by byte."""
    document = copy.deepcopy(document)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(document)
        if not paths:
            break
        parent, key = rng.choice(paths)
        op = rng.random()
        if op < 0.7:
            parent[key] = copy.deepcopy(rng.choice(SUBSTITUTES))
        elif op < 0.85:
            del parent[key]
        else:
            other_parent, other_key = rng.choice(paths)
            parent[key] = copy.deepcopy(other_parent[other_key])
    data = bytearray(json.dumps(document).encode())  # json: orjson refuses 10**30
    if rng.random() < 0.1:
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[position] = rng.randrange(256)
            else:
                data[position:position] = rng.choice([b"null", b"{}", b"[]", b'"x"', b","])
    return bytes(data)


def requests(full: bool) -> dict[str, dict]:
    """One valid body per verb, in the node mode `full` says (nodeCacheCapable false: Nodes and
    NodeNameToVictims; true: NodeNames and NodeNameToMetaVictims)."""
    pod = go_pod("w", cpu="250m")
    names = ["cp-1", "a-small-1", "b-large-1"]
    nodes = [n for n in demo_node_objects() if n["metadata"]["name"] in names]
    args = (
        {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
        if full
        else {"Pod": pod, "Nodes": None, "NodeNames": names}
    )
    victim = go_pod("victim", scheduler="default-scheduler")
    preempt = (
        {
            "Pod": pod,
            "NodeNameToVictims": {"cp-1": {"Pods": [victim], "NumPDBViolations": 0}},
            "NodeNameToMetaVictims": None,
        }
        if full
        else {
            "Pod": pod,
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {
                "cp-1": {"Pods": [{"UID": victim["metadata"]["uid"]}], "NumPDBViolations": 0}
            },
        }
    )
    bind = {"PodName": "w", "PodNamespace": "default", "PodUID": "u-1", "Node": "cp-1"}
    return {"filter": args, "prioritize": args, "preempt": preempt, "bind": bind}


@pytest.fixture
def served(publish):
    publish(example("seed-003-name-length"))
    runtime().extender._binder = lambda args: ""  # bind's checks run as with bind enabled
    return runtime()


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("filter", {"Pod": {"metadata": {"name": "p"}, "spec": "x"}}, "Pod.spec"),
        (
            "filter",
            {"Pod": {"metadata": {"name": "p"}, "spec": {"schedulerName": ["schedweb"]}}},
            "Pod.spec.schedulerName",
        ),
        (
            "filter",
            {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": None}]}},
            "Nodes.items[0].metadata",
        ),
        (
            "prioritize",
            {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": "x"}]}},
            "Nodes.items[0].metadata",
        ),
        (
            "preempt",
            {
                "Pod": {"metadata": {"name": "p"}},
                "NodeNameToVictims": {"n": {"Pods": [{"metadata": "x"}]}},
            },
            "NodeNameToVictims[n].Pods[0].metadata",
        ),
        ("filter", {"Pod": {"metadata": {"name": "p", "uid": {"a": 1}}}}, "Pod.metadata.uid"),
        ("filter", {"Pod": {"metadata": {"name": "p", "uid": "u" * 1_000_000}}}, "metadata.uid"),
        (
            "bind",
            {"PodName": "p", "PodNamespace": "default", "PodUID": "", "Node": "n"},
            "PodUID",
        ),
        ("bind", {"PodName": "p", "PodNamespace": "default", "Node": "n"}, "PodUID"),
    ],
)
def test_each_shape_that_gave_a_500_is_a_400_naming_its_field(served, verb, body, field):
    status, answer, _ = entry.extender_answer(verb, orjson.dumps(body))
    assert status == 400
    assert field in orjson.loads(answer)["detail"]


def test_an_unconvertible_pod_of_a_served_scheduler_is_a_400_naming_the_field(served):
    pod = go_pod("p")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    body = orjson.dumps({"Pod": pod, "NodeNames": ["cp-1"]})
    for verb in ("filter", "prioritize"):
        status, answer, _ = entry.extender_answer(verb, body)
        assert status == 400
        assert "requests.cpu" in orjson.loads(answer)["detail"]


@pytest.mark.parametrize("full", [False, True], ids=["node-names", "full-nodes"])
def test_mutated_go_shaped_bodies_never_get_a_5xx_and_the_paths_keep_working(served, full):
    rng = random.Random(14 + full)
    started = time.thread_time()
    seen = {200: 0, 400: 0}
    for verb, valid in requests(full).items():
        for _ in range(BODIES_PER_VERB):
            body = mutate(valid, rng)
            try:
                status, answer, _ = entry.extender_answer(verb, body)
            except Exception as exc:  # the ASGI entry would have answered 500
                pytest.fail(f"{verb} raised {exc!r} for {body[:300]!r}")
            assert status in (200, 400), (verb, body[:300], answer[:300])
            orjson.loads(answer)
            seen[status] += 1
            used = time.thread_time() - started
            assert used < CPU_SECONDS_PER_RUN, f"the fuzz run is over its bound: {used:.0f} s"
    assert seen[200] and seen[400]  # both the decision and the rejection paths were exercised

    # Rejections of the run are written (the ones it remembered, with bounded fields) and a
    # fresh one after them is too: no poisoned batch blocks the queue. From here the test
    # flushes them and takes the decisions itself, not the runtime's thread.
    state = runtime_by_hand()
    state._flush_rejections()
    rejected = orjson.dumps(
        {"Pod": go_pod("abcdefg", uid="after-the-fuzz"), "NodeNames": ["cp-1", "a-small-1"]}
    )
    assert entry.extender_answer("filter", rejected)[0] == 200
    state._flush_rejections()
    assert state.redis.hexists(requeue_key("default"), "after-the-fuzz")
    for uid in state.redis.hkeys(requeue_key("default")):
        assert len(uid) <= 128

    # Decisions sampled during the run store, and a later one does too.
    state.decisions._allowance = 10
    entry.extender_answer("filter", rejected)
    batch = state.decisions.take()
    assert any(item["pod"]["uid"] == "after-the-fuzz" for item in batch)
    services.decisions_store(batch=batch)
    assert Decision.objects.filter(pod_uid="after-the-fuzz").exists()


def test_a_failing_rejection_batch_is_dropped_with_a_log_line_not_retried(served, caplog):
    state = runtime_by_hand()  # this batch is flushed here, not by a round of its thread
    state.rejections.append({"uid": "x", "namespace": "n", "name": "p", "policy": "p", "at": 1.0})
    real = state.redis
    state.redis = None  # every Redis call fails
    state._flush_rejections()
    state.redis = real
    assert not state.rejections
    assert "dropped 1 rejected pods" in caplog.text


def test_a_malformed_decision_record_is_skipped_and_the_rest_of_its_batch_stored(db):
    good = {
        "kind": "decision",
        "at": time.time(),
        "pod": {"namespace": "default", "name": "p", "uid": "u-good"},
        "policy": "p",
        "version": 1,
        "verb": "filter",
        "nodes": [{"n": f"node-{i}", "ok": False, "msg": "m" * 1000} for i in range(800)],
    }
    bad = {**good, "pod": {"namespace": "default", "name": "p", "uid": {"a": 1}}}
    assert services.decisions_store(batch=[bad, good]) == 1
    stored = Decision.objects.get(pod_uid="u-good").nodes
    assert len(stored["nodes"]) == services.DECISION_MAX_NODES
    assert stored["truncated"] == 300
    assert len(stored["nodes"][0]["msg"]) <= services.DECISION_MAX_MESSAGE + 3
