"""A request naming a node (or about a pod) the snapshot does not hold yet waits, bounded, for
the snapshot to catch up, then is judged (issue 24; policies/extender/catch_up.py).

The waits' own logic with clocks and loops the tests control; then the process's runtime over
a live snapshot in a real Redis (database 14), a watcher's writes made with SnapshotWriter,
pushed to the runtime's thread as in production; the listener's event loop in
tests/web/test_extender_catch_up.py.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time

import orjson
import pytest

from policies.cluster.convert import pod_view
from policies.cluster.state import ClusterState
from policies.cluster.store import NODE, POD, SnapshotStore, SnapshotWriter
from policies.engine.policy import compile_policy
from policies.extender import entry
from policies.extender.catch_up import Attempt, Behind, CatchUp, behind_of, policy_reads_pods
from policies.extender.runtime import reset_runtime, runtime
from policies.publishing import active_entries_write
from tests.builders import make_node, make_pod
from tests.clocks import StepClock
from tests.redisdb import redis_database

from .conftest import ROOM, active_entry, args_body, go_pod

LABELS_ONLY = """\
name: zones
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: zone-a
    expression: node.labels["zone"] == "a"
"""


# -- which policies wait for the pod -------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reads"),
    [
        ('node.labels["zone"] == "a"', False),
        ("node.allocatable.cpu >= pod.requests.cpu", False),
        ("node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu", True),
        ("node.podCount < 10", True),
        ('cluster.countPodsOnNode(node.name, pod.namespace, {"app": "web"}) == 0', True),
    ],
)
def test_a_policy_waits_for_the_pod_when_it_reads_what_pods_use(expression, reads):
    policy = compile_policy(
        "name: p\nschedulerNames: [s]\nfilters:\n  - name: f\n"
        f"    expression: {orjson.dumps(expression).decode()}\n"
    )
    assert policy_reads_pods(policy.spec) is reads


def test_a_gang_policy_waits_for_the_pod_it_counts_among_the_members():
    policy = compile_policy("name: g\nschedulerNames: [s]\ngang: {}\n")
    assert policy_reads_pods(policy.spec) is True


# -- what a request lacks ----------------------------------------------------------------------


def _view(name: str, uid: str, resource_version: str = "") -> dict:
    obj = make_pod(name, uid=uid)
    if resource_version:
        obj["metadata"]["resourceVersion"] = resource_version
    return pod_view(obj)


def test_a_request_lacks_unknown_names_nodes_without_status_and_its_pod():
    bare = make_node("fresh")
    bare["status"] = {}
    held = make_pod("held", node_name="n1", uid="uid-held")
    held["metadata"]["resourceVersion"] = "500"
    state = ClusterState.from_objects([make_node("n1"), bare], [held])
    assert state.pods_seen == 500

    def behind(pod, *, unknown=(), names=("n1",), reads_pods=True):
        return behind_of(
            state=state,
            unknown=list(unknown),
            names=list(names),
            pod=pod,
            reads_pods=reads_pods,
            version=7,
        )

    new = _view("new", "uid-new", "501")
    assert behind(new, unknown=["gone"], names=["n1", "fresh", "gone"]) == Behind(
        ("gone", "fresh"), "uid-new", 7
    )
    assert behind(_view("held", "uid-held", "500")) is None  # held
    assert behind(new, reads_pods=False) is None  # a policy that reads no pod
    # not held, but the pods watch delivered a write as recent as its own: deleted since (or
    # never created), nothing will come for it
    assert behind(_view("gone", "uid-gone", "499")) is None
    assert behind(_view("odd", "uid-odd", "not-a-number")) == Behind((), "uid-odd", 7)


# -- the waits: bounded, woken by the applying thread ------------------------------------------


class _Snapshot:
    def __init__(self, version: int, *, stale: bool = False) -> None:
        self.version, self.stale = version, stale


LACKS_N9 = Behind(("n9",), "", 3)


def test_no_wait_without_an_attempt_for_a_stale_snapshot_or_past_the_deadline():
    clock = StepClock(step=0.1)  # each look at the clock: 100 ms
    catch_up = CatchUp(seconds=0.5, clock=clock)
    attempt = catch_up.attempt()  # deadline: 5 looks away
    assert catch_up.may_wait(None, _Snapshot(3), LACKS_N9) is False
    assert catch_up.may_wait(attempt, _Snapshot(3, stale=True), LACKS_N9) is False
    assert catch_up.may_wait(attempt, None, LACKS_N9) is False
    assert catch_up.may_wait(attempt, _Snapshot(3), LACKS_N9) is True  # 0.2 < 0.6
    clock.now += 1
    assert catch_up.may_wait(attempt, _Snapshot(3), LACKS_N9) is False
    assert CatchUp(seconds=0, clock=clock).attempt() is None  # SCHEDWEB_EXTENDER_CATCH_UP_MS=0
    assert CatchUp(seconds=0.5, live=lambda: False).attempt() is None  # demo, file


def test_past_its_limit_of_waiting_requests_the_next_one_is_answered_at_once():
    seen: list[str] = []
    catch_up = CatchUp(seconds=60, max_waiting=1, observe=lambda outcome, s: seen.append(outcome))

    async def scenario() -> bool:
        first = catch_up.attempt()
        waiting = asyncio.ensure_future(catch_up.wait(first, Behind(("n9",), "", 1)))
        await asyncio.sleep(0)  # it registers
        refused = catch_up.may_wait(catch_up.attempt(), _Snapshot(1), Behind(("n8",), "", 1))
        catch_up.moved(2)
        await waiting
        return refused

    assert asyncio.run(scenario()) is False
    assert seen == ["refused"]


def test_a_wait_is_woken_from_another_thread_when_the_snapshot_moves_past_its_version():
    catch_up = CatchUp(seconds=60)

    async def scenario() -> Attempt:
        attempt = catch_up.attempt()
        waiting = asyncio.ensure_future(catch_up.wait(attempt, Behind(("n9",), "", 4)))
        await asyncio.sleep(0)
        assert catch_up.waiting == 1
        catch_up.moved(4)  # not past it: still waiting
        await asyncio.sleep(0)
        assert not waiting.done()
        threading.Thread(target=catch_up.moved, args=(5,)).start()
        await waiting
        return attempt

    attempt = asyncio.run(scenario())
    assert attempt.outcome == "caught-up" and catch_up.waiting == 0
    assert attempt.record() == {
        "waitedMs": pytest.approx(attempt.waited * 1000, abs=0.1),
        "outcome": "caught-up",
        "nodes": ["n9"],
        "pod": False,
        "fromVersion": 4,
    }


def test_a_wait_the_snapshot_never_answers_ends_at_its_deadline_and_is_not_repeated():
    """The deadline ends a wait for a node no one creates: nothing moved, so the next request
    lacking only that node is answered at once until the snapshot moves again; a request
    lacking something else still waits."""
    catch_up = CatchUp(seconds=0.05)
    never = Behind(("never",), "uid-x", 9)

    async def scenario() -> Attempt:
        attempt = catch_up.attempt()
        await catch_up.wait(attempt, never)
        return attempt

    attempt = asyncio.run(scenario())
    assert attempt.outcome == "timed-out"
    assert catch_up.may_wait(attempt, _Snapshot(9), never) is False  # this one is done
    assert catch_up.may_wait(catch_up.attempt(), _Snapshot(9), never) is False
    assert catch_up.may_wait(catch_up.attempt(), _Snapshot(9), Behind(("never",), "", 9)) is False
    assert catch_up.may_wait(catch_up.attempt(), _Snapshot(9), Behind(("new",), "", 9)) is True
    catch_up.moved(10)
    assert catch_up.may_wait(catch_up.attempt(), _Snapshot(10), never) is True


# -- the runtime over a live snapshot ------------------------------------------------------------


class LiveExtender:
    """This process's runtime on a live snapshot in Redis database 14, and the watcher's pen."""

    def __init__(self, client, cluster: str) -> None:
        self.client = client
        self.state = ClusterState.from_objects(
            [make_node("n1", cpu="4"), make_node("n2", cpu="4")],
            [make_pod("busy", cpu="3", node_name="n1", uid="uid-busy")],
        )
        self.store = SnapshotStore(cluster, client=client)
        self.writer = SnapshotWriter(self.store)
        self.writer.full(self.state, reset=True)
        self.heartbeat()

    def heartbeat(self) -> None:
        self.store.meta_write({"status": "ok", "heartbeat_at": time.time()})

    def publish(self, document: str) -> None:
        active_entries_write([active_entry(document, 1)])

    def add_node(self, obj: dict) -> int:
        return self.writer.delta(NODE, orjson.dumps(self.state.apply_node(obj)["object"]))

    def add_pod(self, obj: dict) -> int:
        return self.writer.delta(POD, orjson.dumps(self.state.apply_pod(obj)["object"]))


@pytest.fixture
def live(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = f"catch-up-{secrets.token_hex(3)}"
    settings.SCHEDWEB_EXTENDER_CATCH_UP_MS = 60_000  # the tests wait for evidence, not time
    settings.SCHEDWEB_DECISIONS_PER_SECOND = 1000.0
    with redis_database(settings, 14) as client:
        reset_runtime()
        yield LiveExtender(client, settings.SCHEDWEB_CLUSTER_NAME)
        reset_runtime()


def _answer(verb: str, body: bytes, *, then=None) -> tuple[int, dict]:
    """The answer as the event loop gives it: at once, or after waiting; `then` runs in a
    thread once the request waits (the watcher writing what it waits for)."""

    async def ask():
        result = entry.extender_answer_or_wait(verb, body)
        if isinstance(result, entry.Waiting):
            waited = asyncio.ensure_future(entry.extender_answer_after_wait(result))
            await asyncio.sleep(0)
            if then is not None:
                await asyncio.to_thread(then)
            result = await waited
        return result

    status, answer, _policy = asyncio.run(ask())
    return status, orjson.loads(answer)


def _decisions() -> list[dict]:
    return [d for d in runtime().decisions.take() if d.get("kind") == "decision"]


def test_a_node_the_snapshot_lacks_is_judged_once_its_watch_event_arrives(live):
    live.publish(ROOM)
    names = ["n1", "n2", "n3"]
    body = args_body(go_pod("new", cpu="2", uid="uid-busy"), names)  # a pod the snapshot holds
    assert isinstance(entry.extender_answer_or_wait("filter", body), entry.Waiting)
    status, answer = _answer("filter", body, then=lambda: live.add_node(make_node("n3", cpu="8")))
    # n1: 4000 - 3000 = 1000m free < 2000m; n2 and the new n3 fit
    assert status == 200 and answer["NodeNames"] == ["n2", "n3"]
    rejected = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    assert list(rejected) == ["n1"] and answer["Error"] == ""
    (decision,) = _decisions()
    assert decision["verb"] == "filter"
    assert decision["catchUp"]["outcome"] == "caught-up"
    assert decision["catchUp"]["nodes"] == ["n3"] and decision["catchUp"]["pod"] is False
    assert decision["catchUp"]["waitedMs"] > 0


def test_on_the_event_loop_a_request_of_many_items_goes_to_the_pool_before_it_could_wait(
    live, settings
):
    """Too much work for the loop (issue 27) is found at the parse, before what the snapshot
    lacks: the listener hands it to the pool (whose processes never wait) rather than holding
    it, unparsed work and all, for the snapshot to catch up."""
    settings.SCHEDWEB_EXTENDER_INLINE_NAMES = 2
    live.publish(ROOM)
    body = args_body(go_pod("new", cpu="2", uid="uid-busy"), ["n1", "n2", "n3"])  # n3: unknown
    assert entry.extender_answer_or_wait("filter", body, inline=True) == (entry.OFFLOAD, b"", "")
    assert isinstance(entry.extender_answer_or_wait("filter", body), entry.Waiting)


def test_a_node_created_before_its_status_waits_for_the_status(live):
    live.publish(ROOM)
    bare = make_node("n3", cpu="8")
    bare["status"] = {}
    version = live.add_node(bare)
    _wait_version(version)
    body = args_body(go_pod("new", cpu="2", uid="uid-busy"), ["n3"])
    status, answer = _answer("filter", body, then=lambda: live.add_node(make_node("n3", cpu="8")))
    assert status == 200 and answer["NodeNames"] == [
        "n3"
    ]  # judged with its 8 CPUs, not with nothing allocatable


def test_a_pod_the_snapshot_lacks_waits_for_it_and_so_for_the_deletion_before_it(live):
    """Deleting `busy` frees n1; the pod created right after is judged with n1 free, once the
    snapshot holds the new pod (the pods watch delivers the deletion first)."""
    live.publish(ROOM)
    body = args_body(go_pod("next", cpu="2", uid="uid-next"), ["n1"])
    new_pod = make_pod("next", cpu="2", uid="uid-next")

    def watcher():
        live.state.delete_pod("uid-busy")
        live.writer.deltas([("pod.delete", "uid-busy")])
        live.add_pod(new_pod)

    status, answer = _answer("filter", body, then=watcher)
    assert status == 200 and answer["NodeNames"] == ["n1"]
    (decision,) = _decisions()
    assert decision["catchUp"]["pod"] is True and decision["catchUp"]["outcome"] == "caught-up"


def test_a_policy_that_reads_no_pod_does_not_wait_for_one(live):
    live.publish(LABELS_ONLY)
    body = args_body(go_pod("next", uid="uid-unseen"), ["n1"])
    result = entry.extender_answer_or_wait("filter", body)
    assert isinstance(result, tuple) and result[0] == 200


def test_a_node_never_created_is_judged_by_failure_policy_when_the_wait_runs_out(live, settings):
    settings.SCHEDWEB_EXTENDER_CATCH_UP_MS = 50
    live.publish(ROOM)
    body = args_body(go_pod("new", cpu="1", uid="uid-busy"), ["n2", "never"])
    status, answer = _answer("filter", body)
    assert status == 200 and answer["NodeNames"] == ["n2"]
    assert answer["FailedNodes"] == {
        "never": "schedweb has no data for this node yet (failurePolicy Fail)"
    }
    (decision,) = _decisions()
    assert decision["catchUp"]["outcome"] == "timed-out" and decision["catchUp"]["nodes"] == [
        "never"
    ]
    # nothing moved meanwhile: the next such request does not wait again
    again = entry.extender_answer_or_wait("filter", body)
    assert isinstance(again, tuple) and orjson.loads(again[1])["NodeNames"] == ["n2"]


def test_a_stale_snapshot_is_never_waited_for(live, settings):
    settings.SCHEDWEB_SNAPSHOT_STALE_SECONDS = 30
    live.store.meta_write({"status": "error", "error": "watch failed"})
    live.publish(ROOM)
    runtime().snapshot_refresh()
    assert runtime().snapshots.current().stale
    result = entry.extender_answer_or_wait("filter", args_body(go_pod("x"), ["never"]))
    assert isinstance(result, tuple)


def test_the_demo_cluster_is_never_waited_for(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    with redis_database(settings, 14):
        reset_runtime()
        try:
            result = entry.extender_answer_or_wait("filter", args_body(go_pod("x"), ["nowhere"]))
            assert isinstance(result, tuple)
        finally:
            reset_runtime()


def _wait_version(version: int) -> None:
    deadline = time.monotonic() + 60
    while runtime().snapshots.current().version < version:
        assert time.monotonic() < deadline, f"the runtime did not reach v{version}"
        time.sleep(0.01)
