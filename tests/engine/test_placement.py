"""kube-scheduler's answer as plain data: the pick (its tie group), the reasons it counts, the
final ranks and the policy's own ranks among the nodes it scored."""

from __future__ import annotations

from policies.engine.placement import NodePlacement, Placement, competition_ranks

TAINT = "node(s) had untolerated taint(s)"
# a 600 and b 600 tie (the pick is both), c 500; cp is tainted, d the policy rejects
NODES = (
    NodePlacement("a", final=600, policy_total=80.0, policy_score=8),
    NodePlacement("b", final=600, policy_total=95.0, policy_score=10),
    NodePlacement("c", final=500, policy_total=80.0, policy_score=8),
    NodePlacement("cp", plugin="TaintToleration", plugin_reasons=(TAINT,)),
    NodePlacement("d", rule="no-d", message="d is out"),
    NodePlacement("e", rule="no-d", message="d is out"),
)


def test_equal_values_share_a_rank_and_the_next_one_skips():
    # a and b tie at 80: both rank 1, c is third
    assert competition_ranks({"a": 80, "b": 80, "c": 50}) == {"a": 1, "b": 1, "c": 3}


def test_a_tie_is_the_answer_and_the_policys_rank_is_only_a_column():
    placed = Placement(NODES, ("a", "b"))
    assert placed.final_ranks() == {"a": 1, "b": 1, "c": 3}
    # the policy ranks b first (95), a and c second (80): not where the pod lands
    assert placed.policy_ranks() == {"b": 1, "a": 2, "c": 2}
    assert placed.feasible() == ["a", "b", "c"]
    assert placed.summary() == "lands on one of a, b (a tie: kube-scheduler picks at random)"
    assert placed.to_dict() == {
        "outcome": "scheduled",
        "pick": ["a", "b"],
        "tie": True,
        "finalTotal": 600,
        "feasible": 3,
        "nodes": 6,
        "reasons": {"no-d: d is out": 2, TAINT: 1},
        "policyApplies": True,
        "failedScheduling": None,
        "summary": "lands on one of a, b (a tie: kube-scheduler picks at random)",
    }


def test_an_unschedulable_pod_counts_every_reason_most_first():
    placed = Placement(NODES[3:], ())
    assert not placed.scheduled and placed.final_total() is None
    # the policy's rejections count as kube-scheduler reports an extender's: "rule: message"
    assert placed.reasons() == {"no-d: d is out": 2, TAINT: 1}
    # without the model's message (a Placement built by hand), the counts approximate it
    assert placed.summary() == (
        f"unschedulable: 0/3 nodes are available: 2 no-d: d is out, 1 {TAINT}"
    )


def test_an_unschedulable_pod_is_said_with_kube_schedulers_whole_message():
    # the model's FailedScheduling message (policies/schedmodel/message.py) is the answer's why
    message = (
        f"0/3 nodes are available: 1 {TAINT}, 2 no-d: d is out. no new claims to deallocate, "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    placed = Placement(NODES[3:], (), failed_scheduling=message)
    assert placed.summary() == f"unschedulable: {message}"
    answer = placed.to_dict()
    assert answer["failedScheduling"] == message and answer["summary"] == placed.summary()
    assert answer["reasons"] == {"no-d: d is out": 2, TAINT: 1}  # the counts stay beside it
    # a scheduled pod has no FailedScheduling message, whatever was given
    assert Placement(NODES, ("a",), failed_scheduling=message).to_dict()["failedScheduling"] is None
