"""One evaluation per pod and candidate set (policies/extender/shared.py): prioritize reuses what
filter evaluated, and never a stale answer: a new snapshot, policy version, candidate set or pod
content is evaluated afresh (whatever uid it claims: tests/extender/test_cache_poisoning.py).
Policies are published into a real Redis."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from policies.cluster.demo import demo_objects
from policies.cluster.state import ClusterState
from policies.extender.runtime import runtime
from tests.asgiclient import extender_post

from .conftest import args_body, example, go_pod, runtime_by_hand

pytestmark = pytest.mark.django_db

NAMES = ["cp-1", "a-small-1", "worker-medium-a-1", "a-spot-1"]

# Min-max normalised over the passing nodes, and a filter that rejects some: the scores of the
# same node differ between candidate sets, so reusing the wrong set's answer would show.
SPREAD = """
name: spread
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: no-spot
    expression: '!node.name.contains("spot")'
scores:
  - name: short-node-name
    expression: 20 - size(node.name)
    weight: 1
    normalize: minmax
"""


def _prioritize(pod: dict, names: list[str]) -> list[dict]:
    response = extender_post("prioritize", args_body(pod, names))
    assert response.status_code == 200
    return orjson.loads(response.content)


def _filter(pod: dict, names: list[str]) -> dict:
    response = extender_post("filter", args_body(pod, names))
    assert response.status_code == 200
    return orjson.loads(response.content)


def _fresh(pod: dict, names: list[str]) -> list[dict]:
    """What prioritize answers with nothing shared: evaluated from scratch."""
    shared = runtime().extender.shared
    shared.clear()
    answer = _prioritize(pod, names)
    shared.clear()
    return answer


def test_prioritize_after_filter_reuses_the_filter_evaluation_with_the_same_answer(publish):
    publish(SPREAD)
    pod = go_pod("abc")
    expected = _fresh(pod, ["cp-1", "a-small-1", "worker-medium-a-1"])
    shared = runtime().extender.shared
    passed = _filter(pod, NAMES)["NodeNames"]
    assert passed == ["cp-1", "a-small-1", "worker-medium-a-1"]  # the spot node is rejected
    hits = shared.hits
    # kube-scheduler asks prioritize about the names filter let through: one evaluation only.
    assert _prioritize(pod, passed) == expected
    assert shared.hits == hits + 1
    assert expected == [
        {"Host": "cp-1", "Score": 10},
        {"Host": "a-small-1", "Score": 6},
        {"Host": "worker-medium-a-1", "Score": 0},
    ]


def test_a_different_candidate_set_is_evaluated_and_normalised_over_its_own_nodes(publish):
    publish(SPREAD)
    pod = go_pod("abc")
    shared = runtime().extender.shared
    _filter(pod, NAMES)
    misses = shared.misses
    subset = ["a-small-1", "worker-medium-a-1"]
    answer = _prioritize(pod, subset)
    assert shared.misses == misses + 1
    # Min-max over these two: a-small-1 is now the best (10), not 6 as among three.
    assert answer == [{"Host": "a-small-1", "Score": 10}, {"Host": "worker-medium-a-1", "Score": 0}]
    assert answer == _fresh(pod, subset)
    # Same names in another order: another set as far as the cache knows, the answer in order.
    reordered = list(reversed(subset))
    assert _prioritize(pod, reordered) == list(reversed(answer))


def test_a_new_policy_version_is_evaluated_afresh(publish):
    publish(SPREAD)
    pod = go_pod("abc")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    _filter(pod, names)
    shared = runtime().extender.shared
    # Same name, next version, the opposite preference: long node names win.
    publish(SPREAD.replace("20 - size(node.name)", "size(node.name)"))
    misses = shared.misses
    response = extender_post("prioritize", args_body(pod, names))
    assert response["X-Schedweb-Policy"] == "spread/v2"
    assert shared.misses == misses + 1
    assert orjson.loads(response.content) == [
        {"Host": "cp-1", "Score": 0},
        {"Host": "a-small-1", "Score": 4},
        {"Host": "worker-medium-a-1", "Score": 10},
    ]


def test_a_new_snapshot_is_evaluated_afresh(publish):
    publish(example("least-allocated"))
    pod = go_pod("web-2", cpu="500m")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    before = _filter(pod, names)
    assert before["NodeNames"] == names
    first = _prioritize(pod, names)
    snapshots = runtime().snapshots
    current = snapshots.current()
    # The next snapshot: a-small-1 now runs a pod that takes nearly all its CPU.
    nodes, pods = demo_objects()
    node = next(n for n in nodes if n["metadata"]["name"] == "a-small-1")
    hog = go_pod("hog", cpu=node["status"]["allocatable"]["cpu"], memory="1Mi", uid="hog-uid")
    hog["spec"]["nodeName"] = "a-small-1"
    hog["status"]["phase"] = "Running"
    state = ClusterState.from_objects(nodes, [*pods, hog]).freeze()
    snapshots._snapshot = dataclasses.replace(current, state=state, version=current.version + 1)
    shared = runtime().extender.shared
    misses = shared.misses
    after = _filter(pod, names)
    assert shared.misses == misses + 1
    assert after["NodeNames"] == ["cp-1", "worker-medium-a-1"]
    assert "a-small-1" in after["FailedNodes"] | after["FailedAndUnresolvableNodes"]
    second = _prioritize(pod, after["NodeNames"])
    assert [e["Host"] for e in second] == ["cp-1", "worker-medium-a-1"]
    assert second == _fresh(pod, after["NodeNames"])
    assert first != second


def test_the_same_snapshot_version_with_another_state_is_not_reused(publish):
    """The frozen state itself is compared, not only the version number (a reader reset after
    a Redis flush starts counting again)."""
    publish(SPREAD)
    pod = go_pod("abc")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    _filter(pod, names)
    snapshots = runtime().snapshots
    current = snapshots.current()
    nodes, pods = demo_objects()
    nodes = [n for n in nodes if n["metadata"]["name"] != "cp-1"]
    snapshots._snapshot = dataclasses.replace(
        current, state=ClusterState.from_objects(nodes, pods).freeze()
    )
    # cp-1 is no longer in the snapshot: unknown, passed through with no score.
    assert _prioritize(pod, names) == [
        {"Host": "cp-1", "Score": 0},
        {"Host": "a-small-1", "Score": 10},
        {"Host": "worker-medium-a-1", "Score": 0},
    ]


def test_a_pod_with_a_new_resource_version_or_other_content_is_evaluated_afresh(publish):
    publish(SPREAD)
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    pod = go_pod("abc")
    _filter(pod, names)
    shared = runtime().extender.shared
    changed = go_pod("abc")
    changed["metadata"]["resourceVersion"] = "123457"
    misses, hits = shared.misses, shared.hits
    _prioritize(changed, names)
    assert (shared.misses, shared.hits) == (misses + 1, hits)
    relabelled = go_pod("abc", labels={"app": "other"})  # same uid and resourceVersion
    _prioritize(relabelled, names)
    assert (shared.misses, shared.hits) == (misses + 2, hits)


def test_a_sampled_prioritize_decision_shows_the_evaluation_it_answered_from(publish):
    publish(SPREAD)
    pod = go_pod("abc")
    state = runtime_by_hand()  # the decisions are taken here, not by a round of its thread
    state.decisions.take()
    passed = _filter(pod, NAMES)["NodeNames"]
    _prioritize(pod, passed)
    records = [r for r in state.decisions.take() if r.get("verb") == "prioritize"]
    assert len(records) == 1
    record = records[0]
    # The evaluation filter made: the rejected spot node with its rule, the others scored.
    by_name = {n["n"]: n for n in record["nodes"]}
    assert set(by_name) == set(NAMES)
    assert by_name["a-spot-1"]["ok"] is False and by_name["a-spot-1"]["rule"] == "no-spot"
    assert by_name["cp-1"]["ext"] == 10 and record["winners"] == ["cp-1"]


def test_the_cache_keeps_no_replaced_snapshot_alive(publish):
    """A process lets go of its snapshot before loading the next, and the shadow lane when idle
    (issue 28): the evaluations kept for prioritize must not hold the old one, nor answer from
    it."""
    import gc
    import weakref

    publish(SPREAD)
    pod = go_pod("abc")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    snapshots = runtime().snapshots
    current = snapshots.current()
    nodes, pods = demo_objects()
    snapshots._snapshot = dataclasses.replace(
        current, state=ClusterState.from_objects(nodes, pods).freeze()
    )
    _filter(pod, names)
    assert len(runtime().extender.shared) == 1  # every candidate passed: one key
    held = weakref.ref(snapshots._snapshot.state)
    snapshots._snapshot = current
    gc.collect()
    assert held() is None
    assert _prioritize(pod, names) == _fresh(pod, names)


def test_the_cache_stays_bounded(publish):
    publish(SPREAD)
    shared = runtime().extender.shared
    for i in range(20):
        _filter(go_pod(f"p{i}"), ["cp-1", "a-small-1"])
    assert len(shared) <= 4


def test_what_an_answer_replaced_is_kept_until_after_answer_and_stays_bounded(publish):
    """Evicted evaluations and the previous parse are freed after the answer is written
    (after_answer), not before it; a caller that never says so holds a bounded number."""
    publish(SPREAD)
    extender = runtime().extender
    shared = extender.shared
    for i in range(30):
        _filter(go_pod(f"q{i}"), ["cp-1", "a-small-1", "a-spot-1"])
        assert len(shared.evicted) <= 2 * 4 + 2 and len(extender._replaced) <= 5
    assert shared.evicted and extender._replaced
    evicted = shared.evicted[0]
    assert all(evicted is not entry for entry in shared._items.values())
    extender.after_answer()
    assert shared.evicted == [] and extender._replaced == []
    # Nothing the next request needs was freed: prioritize still answers from filter's entry.
    pod = go_pod("after-answer")
    expected = _fresh(pod, ["cp-1", "a-small-1"])
    assert _filter(pod, ["cp-1", "a-small-1", "a-spot-1"])["NodeNames"] == ["cp-1", "a-small-1"]
    extender.after_answer()
    hits = shared.hits
    assert _prioritize(pod, ["cp-1", "a-small-1"]) == expected
    assert shared.hits == hits + 1


def test_prioritize_answered_from_the_body_built_after_filter_is_the_cold_answer(publish):
    """After a filter every node passed, after_answer encodes prioritize's answer ahead; the
    prioritize that follows sends those bytes, equal to a cold extender's answer. When some
    node failed, nothing is built ahead (prioritize asks about fewer names)."""
    publish(SPREAD)
    extender = runtime().extender
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    pod = go_pod("ahead")
    expected = _fresh(pod, names)
    body = args_body(pod, names)
    assert extender.filter(body).status == 200
    extender.after_answer()
    ahead = extender._scores_ahead
    assert ahead is not None and orjson.loads(ahead[1]) == expected
    answer = extender.prioritize(body)
    assert answer.body is ahead[1] and orjson.loads(answer.body) == expected

    other = go_pod("not-all-pass")
    assert extender.filter(args_body(other, NAMES)).status == 200
    extender.after_answer()
    assert extender._scores_ahead is ahead  # unchanged: a-spot-1 failed
    passed = ["cp-1", "a-small-1", "worker-medium-a-1"]
    assert orjson.loads(extender.prioritize(args_body(other, passed)).body) == _fresh(other, passed)


@pytest.mark.parametrize(
    "names",
    [
        ["cp-1", "cp-1", "a-small-1"],  # a name twice
        ["cp-1", "no-such-node", "a-small-1"],  # a name the snapshot does not know
        [],  # no candidates
    ],
)
def test_odd_candidate_lists_after_an_early_encoded_answer_get_the_cold_answer(publish, names):
    """Whatever filter was sent, prioritize with the same bytes after after_answer answers as
    an extender with nothing shared does (never a body encoded for another list)."""
    publish(SPREAD)
    extender = runtime().extender
    pod = go_pod("odd")
    expected = _fresh(pod, names)
    body = args_body(pod, names)
    assert extender.filter(body).status == 200
    extender.after_answer()
    assert orjson.loads(extender.prioritize(body).body) == expected


def test_prioritize_with_the_filter_bodys_bytes_answers_as_if_parsed_afresh(publish):
    """kube-scheduler usually sends prioritize the very bytes it sent filter: the parse is
    reused, the answer is the one a cold extender gives."""
    publish(SPREAD)
    pod = go_pod("same-bytes")
    names = ["cp-1", "a-small-1"]
    expected = _fresh(pod, names)
    extender = runtime().extender
    body = args_body(pod, names)
    assert extender_post("filter", body).status_code == 200
    assert extender._last_parsed is not None and extender._last_parsed[0] == body
    response = extender_post("prioritize", body)
    assert response.status_code == 200 and orjson.loads(response.content) == expected


def test_prioritize_with_other_bytes_is_parsed_and_checked(publish):
    """Only equal bytes reuse the parse: a malformed or different prioritize body after a
    filter is parsed (a 400 names the field), never answered from the filter's arguments."""
    publish(SPREAD)
    pod = go_pod("other-bytes")
    assert extender_post("filter", args_body(pod, NAMES)).status_code == 200
    bad = orjson.dumps({"Pod": go_pod("other-bytes"), "NodeNames": ["cp-1", 7]})
    response = extender_post("prioritize", bad)
    assert response.status_code == 400
    assert "NodeNames[1]" in orjson.loads(response.content)["detail"]
    answer = _prioritize(pod, ["a-small-1"])
    assert [entry["Host"] for entry in answer] == ["a-small-1"]


# -- a snapshot that moved between filter and prioritize (the live reader applies in place) ----

# Reads the cluster: a pod landing anywhere may change every node's score.
CROWD = """
name: crowd
schedulerNames: [schedweb]
scores:
  - name: fewer-web-pods
    expression: 'cluster.countPods(pod.namespace, {"app": "web"}) + (node.name == "cp-1" ? 1 : 0)'
    weight: 1
    normalize: minmax
"""


def _in_place():
    """The runtime's snapshot on a mutable state, as the live reader holds it (deltas applied
    to the same state object, each at a new version); the state, for the test to change."""
    snapshots = runtime().snapshots
    current = snapshots.current()
    nodes, pods = demo_objects()
    state = ClusterState.from_objects(nodes, pods)
    snapshots._snapshot = dataclasses.replace(current, state=state, version=current.version + 1)
    return state


def _apply(state, node: str, uid: str, cpu: str = "3") -> None:
    """A running pod bound to `node`, applied to `state` as a watch delta, at the next version."""
    pod = go_pod(f"pod-{uid}", cpu=cpu, memory="1Mi", uid=uid)
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    state.apply_pod(pod)
    snapshots = runtime().snapshots
    current = snapshots.current()
    snapshots._snapshot = dataclasses.replace(current, version=current.version + 1)


def test_only_a_policy_that_reads_nothing_but_pod_and_node_is_node_local():
    from policies.engine.policy import compile_policy

    assert compile_policy(SPREAD).node_local
    assert compile_policy(example("least-allocated")).node_local
    assert not compile_policy(CROWD).node_local
    assert not compile_policy(example("seed-002-gang")).node_local


def _filtered_in_place(publish):
    """least-allocated published, the snapshot on a mutable state, and a pod's filter over
    three candidates answered: the pod, the names, the state and the shared evaluations."""
    publish(example("least-allocated"))
    pod = go_pod("web-2", cpu="500m")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    state = _in_place()
    assert _filter(pod, names)["NodeNames"] == names
    return pod, names, state, runtime().extender.shared


def test_a_snapshot_moved_on_elsewhere_still_shares_filters_evaluation(publish):
    """A change to nodes that are not candidates leaves filter's evaluation exact: prioritize
    answers from it (before, it evaluated every candidate again: issue 28's 5000-node runs)."""
    pod, names, state, shared = _filtered_in_place(publish)
    _apply(state, "b-large-1", "elsewhere")
    hits, moved, misses = shared.hits, shared.moved, shared.misses
    answer = _prioritize(pod, names)
    assert (shared.hits, shared.moved, shared.misses) == (hits + 1, moved + 1, misses)
    assert answer == _fresh(pod, names)


def test_a_change_to_a_candidate_is_evaluated_afresh(publish):
    pod, names, state, shared = _filtered_in_place(publish)
    before = _fresh(pod, names)
    _filter(pod, names)
    # a-small-1 now runs a pod that takes most of its CPU: its view is a new object
    _apply(state, "a-small-1", "on-a-candidate", cpu="1500m")
    moved, misses = shared.moved, shared.misses
    answer = _prioritize(pod, names)
    assert (shared.moved, shared.misses) == (moved, misses + 1)
    assert answer == _fresh(pod, names)
    assert answer != before


def test_a_policy_reading_the_cluster_is_evaluated_afresh_once_the_snapshot_moved(publish):
    publish(CROWD)
    pod = go_pod("web-2")
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    state = _in_place()
    shared = runtime().extender.shared
    _filter(pod, names)
    _apply(state, "b-large-1", "another-web-pod")  # not a candidate, but counted by every node
    moved, misses = shared.moved, shared.misses
    answer = _prioritize(pod, names)
    assert (shared.moved, shared.misses) == (moved, misses + 1)
    assert answer == _fresh(pod, names)


def test_a_candidate_list_sent_again_sees_the_pod_bound_inside_it_since(publish):
    """The window's views come from the extender's cache (windows.py), brought up to date by
    the node changed since: the pod bound there counts against its free CPU."""
    _pod, names, state, _shared = _filtered_in_place(publish)
    windows = runtime().extender.windows
    _apply(state, "a-small-1", "inside", cpu="1")  # 1520m free before, 520m now
    hits = windows.hits
    answer = _filter(go_pod("web-3", cpu="1"), names)
    assert windows.hits == hits + 1
    assert answer["NodeNames"] == ["cp-1", "worker-medium-a-1"]
    assert answer["FailedAndUnresolvableNodes"] == {
        "a-small-1": "enough-cpu: needs 1000m CPU, 520m free"
    }
