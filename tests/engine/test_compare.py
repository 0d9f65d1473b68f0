"""Draft vs published, as the cluster would see it: the pick, the feasible set and the reasons
side by side; a node counts as a change only when its verdict or final total does (then with
its final rank before and after); the policy's own ranking is not compared."""

from __future__ import annotations

from policies.engine.compare import compare_placements, ranks
from policies.engine.placement import NodePlacement, Placement
from policies.engine.results import Evaluation


def placement(*nodes: NodePlacement) -> Placement:
    """The pick is the highest final total (its tie group), as kube-scheduler picks."""
    finals = [n.final for n in nodes if n.final is not None]
    best = max(finals, default=None)
    pick = tuple(n.node for n in nodes if best is not None and n.final == best)
    return Placement(tuple(nodes), pick)


def scored(name: str, final: int, policy_total: float = 50.0) -> NodePlacement:
    return NodePlacement(name, final=final, policy_total=policy_total, policy_score=5)


TAINT = ("node(s) had untolerated taint(s)",)


def test_a_change_that_moves_no_pod_says_so_in_one_sentence():
    # the policy's totals move (50 -> 90 on b) but no final total, verdict or reason does
    before = placement(
        scored("a", 600), scored("b", 500), NodePlacement("cp", "TaintToleration", TAINT)
    )
    after = placement(
        scored("a", 600, 10.0),
        scored("b", 500, 90.0),
        NodePlacement("cp", "TaintToleration", TAINT),
    )
    result = compare_placements(before, after)
    assert result["moves"] is False and result["changes"] == []
    assert result["summary"] == (
        "No change in the cluster: kube-scheduler picks a either way, from the same 2 feasible "
        "nodes."
    )
    assert "\n" not in result["summary"]


def test_a_node_that_only_moves_in_rank_because_another_changed_is_not_a_change():
    # b rises from 400 to 700 and passes a (600) and c (500): a and c drop a rank each, their
    # final totals are unchanged, so b is the only change; the pick moves from a to b
    before = placement(scored("a", 600), scored("b", 400), scored("c", 500))
    after = placement(scored("a", 600), scored("b", 700), scored("c", 500))
    result = compare_placements(before, after)
    assert [c["node"] for c in result["changes"]] == ["b"]
    assert result["changes"][0]["before"]["rank"] == 3
    assert result["changes"][0]["after"]["rank"] == 1
    assert result["pickBefore"] == ["a"] and result["pickAfter"] == ["b"]
    assert result["moves"] and result["pickChanged"]
    assert result["summary"] == "The pick moves from a to b."


def test_a_rejection_changes_the_feasible_set_and_the_reasons_side_by_side():
    # the draft's rule rejects b: b leaves the feasible set and a reason appears
    before = placement(scored("a", 600), scored("b", 500))
    after = placement(scored("a", 600), NodePlacement("b", rule="no-b", message="b is out"))
    result = compare_placements(before, after)
    assert result["feasibleRemoved"] == ["b"] and result["feasibleAdded"] == []
    assert result["reasonsBefore"] == {} and result["reasonsAfter"] == {"no-b: b is out": 1}
    assert result["verdictChanges"] == 1
    (change,) = result["changes"]
    assert change["before"] == {"verdict": "pass", "by": None, "final": 500, "rank": 2}
    assert change["after"] == {"verdict": "reject", "by": "no-b", "final": None, "rank": None}
    assert result["summary"] == "The pick stays a; feasible nodes 2 -> 1; the reasons change."


def test_an_unschedulable_pod_that_stays_so_for_the_same_reasons_does_not_move():
    gone = (NodePlacement("a", "TaintToleration", TAINT), NodePlacement("b", rule="r", message="m"))
    result = compare_placements(placement(*gone), placement(*gone))
    assert result["moves"] is False
    assert result["summary"] == (
        "No change in the cluster: kube-scheduler picks nowhere (unschedulable) either way, "
        "for the same reasons."
    )


def test_the_policys_own_ranks_are_competition_ranks_over_the_nodes_it_passes():
    # a and b tie at 80 (rank 1), c is third; 0.1 + 0.2 and 0.3 are one tie
    def ev(totals: dict[str, float | None]) -> Evaluation:
        names = list(totals)
        passed = [totals[n] is not None for n in names]
        return Evaluation(
            policy="p",
            applies=True,
            reason="",
            node_names=names,
            passed=passed,
            failed_rule=[None if ok else "r" for ok in passed],
            messages=[None if ok else "no" for ok in passed],
            unresolvable=[False] * len(names),
            errors={},
            total=[t or 0.0 for t in totals.values()],
            extender=[round((t or 0.0) / 10) for t in totals.values()],
        )

    assert ranks(ev({"a": 80.0, "b": 80.0, "c": 50.0, "d": None})) == {"a": 1, "b": 1, "c": 3}
    assert ranks(ev({"x": 0.1 + 0.2, "y": 0.3})) == {"x": 1, "y": 1}


# --- rule_changes: what the publish review and the diff's chips list -------------------------

SEED002_LIKE = """name: q
schedulerNames: [s]
queue:
  expression: 'pod.qosClass == "Guaranteed" ? 2 : 0'
  min: 0
  max: 2
gang: {}
filters:
  - name: f
    expression: "true"
"""


def test_a_changed_queue_or_gang_is_a_changed_setting_like_a_rule():
    from policies.engine.compare import rule_changes

    queue = SEED002_LIKE.replace("max: 2", "max: 3")
    gang = SEED002_LIKE.replace("gang: {}", "gang: {minCount: 3}")
    assert rule_changes(SEED002_LIKE, queue) == {"added": [], "removed": [], "changed": ["queue"]}
    assert rule_changes(SEED002_LIKE, gang) == {"added": [], "removed": [], "changed": ["gang"]}
    assert rule_changes(SEED002_LIKE, SEED002_LIKE + "# a comment\n") == {
        "added": [],
        "removed": [],
        "changed": [],
    }


def test_adding_or_removing_queue_and_gang_is_listed():
    from policies.engine.compare import rule_changes

    plain = SEED002_LIKE.split("queue:")[0] + SEED002_LIKE.split("gang: {}\n")[1]
    assert rule_changes(plain, SEED002_LIKE)["added"] == ["gang", "queue"]
    assert rule_changes(SEED002_LIKE, plain)["removed"] == ["gang", "queue"]
