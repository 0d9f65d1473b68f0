"""The per-node memo of the fused code (policies/engine/fastpath.py, FastPath._memo_loop): pods
that read the same from the pod get, on a node view evaluated before, exactly the results a
fresh evaluation gives; a replaced view (a pod bound, the node updated) is evaluated again."""

from __future__ import annotations

import random

import pytest

from policies.engine import fastpath

from ..clocks import StepClock
from .inputs import ListCluster, node_view, pod_view
from .test_policy import policy

RULES = """\
filters:
  - name: enough-cpu
    expression: node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu
    message: '"needs " + string(pod.requests.cpu) + "m, the pod asks"'
  - name: not-cordoned
    expression: '!node.unschedulable'
scores:
  - name: least-cpu
    expression: (node.allocatable.cpu - node.requested.cpu) * 100 / node.allocatable.cpu
    weight: 2
  - name: zone-a
    expression: 'has(node.labels.zone) && node.labels.zone == "a" ? 100 : 0'
"""


def rows(evaluation) -> list[dict]:
    return [row.to_dict() for row in evaluation.rows()]


DOUBLE_AND_MINMAX = (
    RULES
    + """\
  - name: headroom
    expression: double(node.allocatable.cpu - node.requested.cpu) / double(pod.requests.cpu)
    normalize: minmax
"""
)


@pytest.mark.parametrize(("rules", "per_node_finish"), [(RULES, True), (DOUBLE_AND_MINMAX, False)])
def test_equivalent_pods_on_changing_nodes_get_what_the_exact_path_gives(rules, per_node_finish):
    memoised = policy(rules)
    assert memoised._fast.finish_per_node is per_node_finish
    rng = random.Random(11)
    nodes = [
        node_view(
            f"n{i}", cpu=4000, requested_cpu=rng.randint(0, 4000), labels={"zone": "ab"[i % 2]}
        )
        for i in range(60)
    ]
    for step in range(120):
        # as a cluster changes under the extender: a few nodes get new views each step
        for i in rng.sample(range(len(nodes)), 3):
            nodes[i] = node_view(
                nodes[i]["name"],
                cpu=4000,
                requested_cpu=rng.randint(0, 4000),
                labels=nodes[i]["labels"],
                unschedulable=rng.random() < 0.1,
            )
        pod = pod_view(f"p{step}", cpu=rng.choice([100, 500, 2000]))  # three equivalence classes
        candidates = rng.sample(nodes, 40)
        got = memoised.evaluate(pod, candidates, memo=True)
        want = memoised.evaluate(pod, candidates, fast=False)  # the exact path: no memo
        assert rows(got) == rows(want)
        assert got.normalized == want.normalized
        assert got.extender == want.extender and got.total == want.total
    assert memoised._fast._memo, "the memo was used"


def test_a_replaced_node_view_is_evaluated_again_and_an_unchanged_one_is_not():
    p = policy(RULES)
    full = node_view("n0", cpu=4000, requested_cpu=3900)
    free = node_view("n1", cpu=4000)
    pod = pod_view(cpu=500)
    p.evaluate(
        pod, [full, free], memo=True
    )  # the first pod of its kind: remembered from the next one
    first = p.evaluate(pod_view("again", cpu=500), [full, free], memo=True)
    assert first.passed == [False, True]
    assert first.messages[0] == "needs 500m, the pod asks"
    calls = []
    loop = p._fast._loop

    def counting(pod, nodes, *args):
        calls.append([n["name"] for n in nodes])
        return loop(pod, nodes, *args)

    p._fast._loop = counting
    emptied = node_view("n0", cpu=4000, requested_cpu=0)  # same name, a pod left: a new view
    second = p.evaluate(pod_view("other", cpu=500), [emptied, free], memo=True)
    assert calls == [["n0"]]  # n1's view is the one evaluated before
    assert second.passed == [True, True]
    assert second.raw[0] == [100, 100]


def test_pods_that_read_differently_are_not_mixed_up():
    p = policy(RULES)
    node = node_view("n0", cpu=4000, requested_cpu=3000)
    assert p.evaluate(pod_view(cpu=500), [node], memo=True).passed == [True]
    assert p.evaluate(pod_view(cpu=1500), [node], memo=True).passed == [False]
    assert p.evaluate(pod_view(cpu=500), [node], memo=True).passed == [True]


def test_the_key_tells_cel_values_apart_that_python_calls_equal():
    fast = policy(RULES)._fast
    pod = pod_view(cpu=1)

    def key(*pod_vars):
        return fast._memo_key(pod, pod_vars, True)

    assert len({key(1), key(1.0), key(True)}) == 3
    assert key(0.0) != key(-0.0)
    assert key(float("nan")) == key(float("nan"))  # one value, one key (NaN is never == NaN)
    assert key([1]) is None and key({"a": 1}) is None  # not a scalar: no memo


def test_rules_that_read_the_cluster_or_the_whole_pod_are_not_memoised():
    spread = policy(
        """\
        scores:
          - name: spread
            expression: 'cluster.countPodsOnNode(node.name, "", {"app": "web"})'
        """
    )
    assert spread._fast._key is None
    nodes = [node_view("a"), node_view("b")]
    pods = [pod_view("w1", labels={"app": "web"}, node_name="a")]
    assert spread.evaluate(pod_view(), nodes, ListCluster(nodes, pods), memo=True).raw == [[1, 0]]
    pods.append(pod_view("w2", labels={"app": "web"}, node_name="b"))
    pods.append(pod_view("w3", labels={"app": "web"}, node_name="b"))
    # the same node views, another cluster: no stale answer
    assert spread.evaluate(pod_view(), nodes, ListCluster(nodes, pods), memo=True).raw == [[1, 2]]

    by_labels = policy(
        """\
        filters:
          - name: same-team
            expression: pod.labels.all(k, k in node.labels)
        """
    )
    node = node_view("a", labels={"team": "x"})
    assert by_labels.evaluate(pod_view(labels={"team": "y"}), [node], memo=True).passed == [True]
    assert by_labels.evaluate(pod_view(labels={"owner": "y"}), [node], memo=True).passed == [False]


def test_the_memo_is_bounded_and_kept_only_for_pods_seen_twice():
    p = policy(RULES)
    nodes = [node_view(f"n{i}") for i in range(5)]
    for cpu in range(fastpath._MEMO_SEEN * 2):
        p.evaluate(pod_view(cpu=cpu + 1), nodes, memo=True)  # every pod different: no memo at all
        assert not p._fast._memo and len(p._fast._seen) <= fastpath._MEMO_SEEN
    for cpu in range(fastpath._MEMO_KEYS * 3):
        p.evaluate(pod_view(cpu=cpu + 1), nodes, memo=True)
        p.evaluate(pod_view(cpu=cpu + 1), nodes, memo=True)
        assert 0 < len(p._fast._memo) <= fastpath._MEMO_KEYS


def test_a_request_past_its_deadline_is_stopped_even_when_the_memo_knows_every_node():
    from policies.engine.cel.deadline import EvaluationTimeout, deadline

    p = policy(RULES)
    nodes = [node_view(f"n{i}") for i in range(3)]
    p.evaluate(pod_view(cpu=100), nodes, memo=True)
    p.evaluate(pod_view(cpu=100), nodes, memo=True)  # every node in the memo now
    # set at look 1 (t=1, due at 1.5): the first look of the evaluation is past it
    with pytest.raises(EvaluationTimeout), deadline(0.5, clock=StepClock()):
        p.evaluate(pod_view(cpu=100), nodes, memo=True)


def test_only_callers_that_ask_use_the_memo():
    """Previews, test cases and the model of kube-scheduler evaluate afresh; the extender asks."""
    p = policy(RULES)
    nodes = [node_view(f"n{i}") for i in range(3)]
    for _ in range(3):
        p.evaluate(pod_view(cpu=100), nodes)
    assert not p._fast._memo and not p._fast._seen
    for _ in range(2):
        p.evaluate(pod_view(cpu=100), nodes, memo=True)
    assert p._fast._memo


def test_names_given_by_the_caller_give_the_evaluation_the_views_names_give():
    """The extender passes the request's names (the views' names, in order) so that no view is
    read for its name (issue 28); the evaluation is the same, memo or not."""
    nodes = [node_view(f"n{i}", cpu=4000, requested_cpu=500 * i) for i in range(8)]
    cluster = ListCluster(nodes, [])
    names = [f"n{i}" for i in range(8)]
    plain_policy, given_policy = policy(RULES), policy(RULES)
    for memo in (False, True, True, True):  # the memo answers from the second pod on
        pod = pod_view(cpu=1000)
        plain = plain_policy.evaluate(pod, nodes, cluster, memo=memo)
        given = given_policy.evaluate(pod, nodes, cluster, memo=memo, names=names)
        assert given.node_names == names and rows(given) == rows(plain)
    # a list that does not match the nodes is not trusted
    short = policy(RULES).evaluate(pod_view(cpu=1000), nodes, cluster, names=names[:3])
    assert short.node_names == names
