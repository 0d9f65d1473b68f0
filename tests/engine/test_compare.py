"""Draft vs published: a node changes when its verdict or total does; ranks are competition
ranks (equal totals share one) in the comparison and in the preview table alike."""

from __future__ import annotations

from policies.engine.compare import compare_evaluations, ranks
from policies.engine.results import Evaluation


def _ev(totals: dict[str, float | None]) -> Evaluation:
    """None = rejected by rule `r`."""
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
        total=[t if t is not None else 0.0 for t in totals.values()],
        extender=[round((t or 0.0) / 10) for t in totals.values()],
    )


def test_equal_totals_share_a_rank_and_the_next_one_skips():
    # a and b tie at 80 (rank 1), c is third; 0.1 + 0.2 and 0.3 are one tie
    assert ranks(_ev({"a": 80.0, "b": 80.0, "c": 50.0, "d": None})) == {"a": 1, "b": 1, "c": 3}
    assert ranks(_ev({"x": 0.1 + 0.2, "y": 0.3})) == {"x": 1, "y": 1}


def test_a_node_that_only_moves_because_another_changed_is_not_a_change():
    # b rises from 40 to 90 and passes a (70) and c (60): a and c drop a rank each, their
    # totals are unchanged, so b is the only change
    before = _ev({"a": 70.0, "b": 40.0, "c": 60.0})
    after = _ev({"a": 70.0, "b": 90.0, "c": 60.0})
    result = compare_evaluations(before, after)
    assert [c["node"] for c in result["changes"]] == ["b"]
    assert (
        result["changes"][0]["before"]["rank"] == 3 and result["changes"][0]["after"]["rank"] == 1
    )
    assert result["winnersBefore"] == ["a"] and result["winnersAfter"] == ["b"]


def test_a_verdict_change_counts_and_an_unchanged_tie_does_not():
    # b is rejected in the draft; a and c stay tied at 50 (rank 1 both times)
    before = _ev({"a": 50.0, "b": 50.0, "c": 50.0})
    after = _ev({"a": 50.0, "b": None, "c": 50.0})
    result = compare_evaluations(before, after)
    assert [c["node"] for c in result["changes"]] == ["b"]
    assert result["verdictChanges"] == 1
    assert result["changes"][0]["before"]["rank"] == 1
