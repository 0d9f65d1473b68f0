"""Test-case expectations: their structure, their failures as sentences, recording (only what
the author pins) and re-recording. Where the pod lands is kube-scheduler's answer (a Placement);
winner, winnerIn, verdicts and scores are the policy's alone over every node (policy-level)."""

from __future__ import annotations

import pytest

from policies.engine.document import parse_text
from policies.engine.placement import NodePlacement, Placement
from policies.engine.results import Evaluation
from policies.engine.spec_build import build_spec
from policies.engine.testcases import (
    check_expectations,
    expect_canonical,
    expect_errors,
    expectation_changes,
    record_expectation,
    rerecord,
)
from policies.schedmodel.profile import FILTERS


def evaluation(*rows: tuple[str, str | None, float, int], applies: bool = True) -> Evaluation:
    """rows: (node, rejecting rule or None, total 0..100, extender score 0..10)."""
    n = len(rows)
    return Evaluation(
        policy="p",
        applies=applies,
        reason="" if applies else "spec.schedulerName default-scheduler is not targeted",
        node_names=[r[0] for r in rows],
        passed=[r[1] is None for r in rows],
        failed_rule=[r[1] for r in rows],
        messages=[None if r[1] is None else "too small" for r in rows],
        unresolvable=[False] * n,
        errors={},
        total=[r[2] for r in rows],
        extender=[r[3] for r in rows],
    )


# a-1 and a-2 tie at 80 (extender round(80/10) = 8), b-1 scores 45 (round(4.5) = 5, halves
# up), cp-1 is rejected by no-control-plane
TIE = evaluation(
    ("a-1", None, 80.0, 8),
    ("a-2", None, 80.0, 8),
    ("b-1", None, 45.0, 5),
    ("cp-1", "no-control-plane", 0.0, 0),
)
# b-1 alone wins
ONE = evaluation(("a-1", None, 30.0, 3), ("b-1", None, 90.0, 9), ("cp-1", "no-cp", 0.0, 0))
THROUGH = evaluation(("a-1", None, 0.0, 0), ("b-1", None, 0.0, 0), applies=False)

TAINT = "node(s) had untolerated taint(s)"
# kube-scheduler around ONE: cp-1 is tainted, so the policy never sees it; its plugins favour
# a-1 enough that a-1 (300 + 30 = 700... its final total) beats b-1, the policy's top node
PLACED_ONE = Placement(
    (
        NodePlacement("a-1", final=700, policy_total=30.0, policy_score=3),
        NodePlacement("b-1", final=650, policy_total=90.0, policy_score=9),
        NodePlacement("cp-1", plugin="TaintToleration", plugin_reasons=(TAINT,)),
    ),
    ("a-1",),
    filter_plugins=FILTERS,
)
# around TIE: a-1 and a-2 tie; cp-1 reaches the policy, which rejects it
PLACED_TIE = Placement(
    (
        NodePlacement("a-1", final=600, policy_total=80.0, policy_score=8),
        NodePlacement("a-2", final=600, policy_total=80.0, policy_score=8),
        NodePlacement("b-1", final=550, policy_total=45.0, policy_score=5),
        NodePlacement("cp-1", rule="no-control-plane", message="too small"),
    ),
    ("a-1", "a-2"),
    filter_plugins=FILTERS,
)
# nowhere: every node is rejected, by a plugin or by the policy
PLACED_NONE = Placement(
    (
        NodePlacement("a-1", rule="no-cp", message="too small"),
        NodePlacement("b-1", rule="no-cp", message="too small"),
        NodePlacement("cp-1", plugin="TaintToleration", plugin_reasons=(TAINT,)),
    ),
    (),
    filter_plugins=FILTERS,
)
PLACED_THROUGH = Placement(
    (NodePlacement("a-1", final=500), NodePlacement("b-1", final=400)),
    ("a-1",),
    applies=False,
    filter_plugins=FILTERS,
)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expect", "path", "message"),
    [
        ([], "expect", "expect must be a mapping, got a list"),
        ({}, "expect", "expect is empty: give at least one of applies, landsIn, unschedulable"),
        ({"winer": "a"}, "expect.winer", "unknown key (use applies, landsIn, unschedulable"),
        ({"landsIn": "a-1"}, "expect.landsIn", "must be a non-empty list of node names"),
        ({"landsIn": ["a", "a"]}, "expect.landsIn[1]", "a is listed twice"),
        ({"unschedulable": "yes"}, "expect.unschedulable", "must be true, false or a non-empty"),
        ({"unschedulable": []}, "expect.unschedulable", "must be true, false or a non-empty"),
        ({"unschedulable": ["ok", 3]}, "expect.unschedulable[1]", "must be a reason (text)"),
        ({"unschedulable": ["x" * 1025]}, "expect.unschedulable[0]", "longer than 1024"),
        ({"unschedulable": ["r"] * 101}, "expect.unschedulable", "at most 100 reasons, got 101"),
        (
            {"landsIn": ["a"], "unschedulable": True},
            "expect.unschedulable",
            "give landsIn (the pod gets a node) or unschedulable, not both",
        ),
        ({"applies": "yes"}, "expect.applies", "must be true or false, got a string"),
        ({"winner": 3}, "expect.winner", "must be a node name, got a number"),
        ({"winner": "a", "winnerIn": ["a"]}, "expect.winnerIn", "give winner (one node) or"),
        ({"winnerIn": "a-1"}, "expect.winnerIn", "must be a non-empty list of node names"),
        ({"winnerIn": []}, "expect.winnerIn", "must be a non-empty list of node names, got a list"),
        ({"winnerIn": ["a", 7]}, "expect.winnerIn[1]", "must be a node name, got a number"),
        ({"winnerIn": ["a", "a"]}, "expect.winnerIn[1]", "a is listed twice"),
        ({"verdicts": ["a"]}, "expect.verdicts", "must map node names to values, got a list"),
        ({"verdicts": {1: "pass"}}, "expect.verdicts", "node names must be strings, got 1"),
        ({"verdicts": {"a": "ok"}}, "expect.verdicts.a", "must be pass or reject, got 'ok'"),
        (
            {"rejectedBy": {"a": True}},
            "expect.rejectedBy.a",
            "must be a rule or filter plugin name, got a boolean",
        ),
        ({"extenderScores": {"a": 11}}, "expect.extenderScores.a", "from 0 to 10, got 11"),
        ({"extenderScores": {"a": True}}, "expect.extenderScores.a", "from 0 to 10, got True"),
        ({"scores": {"a": 7}}, "expect.scores.a", "must be a mapping with atLeast and/or atMost"),
        ({"scores": {"a": {}}}, "expect.scores.a", "must be a mapping with atLeast and/or atMost"),
        ({"scores": {"a": {"above": 3}}}, "expect.scores.a.above", "unknown key (use atLeast"),
        ({"scores": {"a": {"atLeast": -1}}}, "expect.scores.a.atLeast", "0 to 10, got -1"),
        ({"scores": {"a": {"atMost": 2.5}}}, "expect.scores.a.atMost", "0 to 10, got 2.5"),
        (
            {"scores": {"a": {"atLeast": 7, "atMost": 3}}},
            "expect.scores.a.atLeast",
            "atLeast 7 is above atMost 3",
        ),
    ],
)
def test_each_malformed_shape_is_named_by_its_field_path(expect, path, message):
    errors = expect_errors(expect)
    assert len(errors) == 1, errors
    assert errors[0][0] == path
    assert message in errors[0][1]


def test_hostile_sizes_are_cut_short_in_paths_and_messages():
    huge = "x" * 100_000
    errors = expect_errors(
        {
            huge: 1,
            "winner": "n" * 254,
            "verdicts": {"a": huge},
            "scores": {"a": {huge: 1}},
        }
    )
    assert [path for path, _ in errors] == [
        "expect.'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...",
        "expect.winner",
        "expect.verdicts.a",
        "expect.scores.a.'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...",
    ]
    assert "is longer than 253 characters" in errors[1][1]
    assert all(len(message) < 140 for _, message in errors)  # the key list is the longest


def test_every_problem_is_reported_at_once():
    errors = expect_errors({"winnerIn": [1], "scores": {"a": {"atLeast": 11}}, "x": 1})
    assert [path for path, _ in errors] == [
        "expect.x",
        "expect.winnerIn[0]",
        "expect.scores.a.atLeast",
    ]


def test_a_hand_written_expectation_of_every_kind_is_well_formed():
    expect = {
        "applies": True,
        "landsIn": ["a-1", "a-2"],
        "winnerIn": ["a-1", "a-2"],
        "verdicts": {"b-1": "pass"},
        "rejectedBy": {"cp-1": "no-control-plane"},
        "extenderScores": {"b-1": 5},
        "scores": {"a-1": {"atLeast": 7}, "b-1": {"atLeast": 4, "atMost": 6}},
    }
    assert expect_errors(expect) == []
    assert check_expectations(TIE, expect, placement=PLACED_TIE) == []


# --- failures as sentences ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "placed", "expect", "failures"),
    [
        # landsIn: kube-scheduler's pick; a tie passes when every tied node is listed
        (TIE, PLACED_TIE, {"landsIn": ["a-1", "a-2", "b-1"]}, []),
        (
            TIE,
            PLACED_TIE,
            {"landsIn": ["a-1", "b-1"]},
            [
                "expected the pod to land in a-1, b-1, but kube-scheduler picks one of a-1, a-2 "
                "(a tie: kube-scheduler picks at random) (final total 600)"
            ],
        ),
        # the policy's top node (b-1) is not where the pod lands (a-1)
        (
            ONE,
            PLACED_ONE,
            {"landsIn": ["b-1"]},
            ["expected the pod to land in b-1, but kube-scheduler picks a-1 (final total 700)"],
        ),
        (
            ONE,
            PLACED_NONE,
            {"landsIn": ["a-1"]},
            [
                "expected the pod to land in a-1, but it is unschedulable: 0/3 nodes are "
                f"available: 2 no-cp: too small, 1 {TAINT}"
            ],
        ),
        # unschedulable: with reasons, each a part of one kube-scheduler gives
        (ONE, PLACED_NONE, {"unschedulable": True}, []),
        (ONE, PLACED_NONE, {"unschedulable": ["too small", "untolerated taint"]}, []),
        (
            ONE,
            PLACED_NONE,
            {"unschedulable": ["Insufficient cpu"]},
            [
                "expected the reason 'Insufficient cpu', but kube-scheduler gives: "
                f"2x no-cp: too small; 1x {TAINT}"
            ],
        ),
        (
            ONE,
            PLACED_ONE,
            {"unschedulable": True},
            ["expected the pod to be unschedulable, but it lands on a-1 (final total 700)"],
        ),
        (ONE, PLACED_ONE, {"unschedulable": False}, []),
        # rejectedBy a filter plugin: kube-scheduler's filters
        (ONE, PLACED_ONE, {"rejectedBy": {"cp-1": "TaintToleration"}}, []),
        (
            ONE,
            PLACED_ONE,
            {"rejectedBy": {"a-1": "NodeResourcesFit", "gone": "NodeAffinity"}},
            [
                "node a-1: expected rejection by NodeResourcesFit, got nothing (it passes every "
                "filter)",
                "node gone is not in the cluster",
            ],
        ),
        (
            TIE,
            PLACED_TIE,
            {"rejectedBy": {"cp-1": "TaintToleration"}},
            ["node cp-1: expected rejection by TaintToleration, got no-control-plane"],
        ),
        # winnerIn (policy-level): a tie is fine when every tied node is in the set
        (TIE, PLACED_TIE, {"winnerIn": ["a-1", "a-2", "b-1"]}, []),
        (ONE, PLACED_ONE, {"winnerIn": ["a-1", "b-1"]}, []),
        (
            ONE,
            PLACED_ONE,
            {"winnerIn": ["a-1", "cp-1"]},
            [
                "expected the policy's top node (policy-level winnerIn) among a-1, cp-1, got "
                "b-1 (policy total 90.00)"
            ],
        ),
        (
            THROUGH,
            PLACED_THROUGH,
            {"winnerIn": ["a-1"]},
            [
                "expected the policy's top node (policy-level winnerIn) among a-1, but the pod "
                "passes through: spec.schedulerName default-scheduler is not targeted"
            ],
        ),
        (
            evaluation(("a-1", "f", 0.0, 0)),
            PLACED_NONE,
            {"winnerIn": ["a-1"]},
            [
                "expected the policy's top node (policy-level winnerIn) among a-1, but no node "
                "passes the policy"
            ],
        ),
        # scores (policy-level): bounds on the policy's score 0..10, inclusive
        (TIE, PLACED_TIE, {"scores": {"b-1": {"atLeast": 5, "atMost": 5}}}, []),
        (
            TIE,
            PLACED_TIE,
            {"scores": {"b-1": {"atLeast": 6}}},
            ["node b-1: expected policy score at least 6, got 5"],
        ),
        (
            TIE,
            PLACED_TIE,
            {"scores": {"a-1": {"atLeast": 2, "atMost": 7}}},
            ["node a-1: expected policy score at least 2 and at most 7, got 8"],
        ),
        (
            TIE,
            PLACED_TIE,
            {"scores": {"cp-1": {"atLeast": 0}}},
            [
                "node cp-1: expected policy score at least 0, but the policy rejects it "
                "(no-control-plane: too small)"
            ],
        ),
        (
            THROUGH,
            PLACED_THROUGH,
            {"scores": {"a-1": {"atMost": 3}}},
            [
                "node a-1: expected policy score at most 3, but the pod passes through: "
                "spec.schedulerName default-scheduler is not targeted"
            ],
        ),
        (
            TIE,
            PLACED_TIE,
            {"scores": {"gone": {"atLeast": 1}}},
            ["node gone is not in the cluster"],
        ),
        # the older recorded kinds keep their meaning, labelled policy-level
        (
            TIE,
            PLACED_TIE,
            {"rejectedBy": {"b-1": "no-control-plane"}},
            [
                "node b-1: expected rejection by no-control-plane, got nothing (the policy passes it)"
            ],
        ),
        (
            TIE,
            PLACED_TIE,
            {"verdicts": {"cp-1": "pass"}},
            ["node cp-1: expected the policy's pass, got reject (no-control-plane: too small)"],
        ),
        (
            TIE,
            PLACED_TIE,
            {"winner": "a-1"},
            ["expected the policy's top node (policy-level winner) a-1, but it ties with a-2"],
        ),
    ],
)
def test_each_failure_says_what_was_expected_and_what_came(result, placed, expect, failures):
    assert expect_errors(expect) == []
    assert check_expectations(result, expect, placement=placed) == failures


def test_a_kube_scheduler_level_case_without_the_model_fails_saying_so():
    assert check_expectations(ONE, {"landsIn": ["a-1"]}) == [
        "kube-scheduler's answer is not available to check this case"
    ]


# --- recording and accepting new results -------------------------------------------------------


def test_a_recording_pins_the_pick_and_the_policys_rejections_never_every_verdict():
    # the policy rejects cp-1 in the cycle (TIE); kube-scheduler picks the tie a-1, a-2
    assert record_expectation(TIE, PLACED_TIE) == {
        "landsIn": ["a-1", "a-2"],
        "rejectedBy": {"cp-1": "no-control-plane"},
    }
    # cp-1 is rejected by a plugin, not the policy: nothing of it is pinned by default
    assert record_expectation(ONE, PLACED_ONE) == {"landsIn": ["a-1"]}
    assert record_expectation(ONE, PLACED_NONE) == {
        "unschedulable": ["no-cp: too small", TAINT],
        "rejectedBy": {"a-1": "no-cp", "b-1": "no-cp"},
    }
    # a pod that passes through: where it lands, and that the policy does not apply
    assert record_expectation(THROUGH, PLACED_THROUGH) == {"applies": False, "landsIn": ["a-1"]}


def test_the_author_chooses_what_a_recording_pins():
    assert record_expectation(ONE, PLACED_ONE, ("pluginRejects",)) == {
        "rejectedBy": {"cp-1": "TaintToleration"}
    }
    assert record_expectation(ONE, PLACED_ONE, ("pick", "pluginRejects", "applies")) == {
        "applies": True,
        "landsIn": ["a-1"],
        "rejectedBy": {"cp-1": "TaintToleration"},
    }
    # nothing left to pin (no node rejected): at least whether the policy applies
    assert record_expectation(ONE, PLACED_ONE, ("policyRejects",)) == {"applies": True}
    for pins in [("pick",), ("pick", "policyRejects"), ("pluginRejects", "applies")]:
        recorded = record_expectation(ONE, PLACED_ONE, pins)
        assert expect_errors(recorded) == []
        assert check_expectations(ONE, recorded, placement=PLACED_ONE) == []


@pytest.mark.parametrize(
    ("expect", "result", "placed", "accepted"),
    [
        # what holds stays as written; a failing bound moves to the score it got (5)
        (
            {"winnerIn": ["a-1", "a-2"], "scores": {"b-1": {"atLeast": 7, "atMost": 9}}},
            TIE,
            PLACED_TIE,
            {"winnerIn": ["a-1", "a-2"], "scores": {"b-1": {"atLeast": 5, "atMost": 9}}},
        ),
        # a winner that now ties becomes the tied set
        ({"winner": "b-1"}, TIE, PLACED_TIE, {"winnerIn": ["a-1", "a-2"]}),
        # a winnerIn that misses takes the single winner
        ({"winnerIn": ["a-1", "cp-1"]}, ONE, PLACED_ONE, {"winner": "b-1"}),
        # landsIn follows kube-scheduler's pick; an unschedulable pod gets its reasons
        ({"landsIn": ["b-1"]}, ONE, PLACED_ONE, {"landsIn": ["a-1"]}),
        (
            {"landsIn": ["a-1"]},
            ONE,
            PLACED_NONE,
            {"unschedulable": ["no-cp: too small", TAINT]},
        ),
        ({"unschedulable": True}, ONE, PLACED_ONE, {"landsIn": ["a-1"]}),
        # listed reasons still given are kept; none left: the reasons given now
        (
            {"unschedulable": ["too small", "Insufficient cpu"]},
            ONE,
            PLACED_NONE,
            {"unschedulable": ["too small"]},
        ),
        (
            {"unschedulable": ["Insufficient cpu"]},
            ONE,
            PLACED_NONE,
            {"unschedulable": ["no-cp: too small", TAINT]},
        ),
        # a plugin that no longer rejects: the policy's rule, or a pass verdict
        (
            {"rejectedBy": {"cp-1": "NodeUnschedulable", "a-1": "TaintToleration"}},
            ONE,
            PLACED_ONE,
            {"rejectedBy": {"cp-1": "TaintToleration"}, "verdicts": {"a-1": "pass"}},
        ),
        # a rule that no longer rejects becomes a pass verdict; a scored node now rejected, a
        # reject verdict; a node that left the cluster is dropped
        (
            {
                "applies": True,
                "rejectedBy": {"a-1": "no-cp", "cp-1": "old-rule"},
                "scores": {"cp-1": {"atLeast": 1}, "gone": {"atMost": 2}},
            },
            ONE,
            PLACED_ONE,
            {"applies": True, "rejectedBy": {"cp-1": "no-cp"}, "verdicts": {"a-1": "pass"}},
        ),
        (
            {"extenderScores": {"a-1": 9, "gone": 1}},
            ONE,
            PLACED_ONE,
            {"extenderScores": {"a-1": 3}},
        ),
        # the pod now passes through: that is expected, and where it lands if that was
        (
            {"winner": "a-1", "verdicts": {"a-1": "pass"}},
            THROUGH,
            PLACED_THROUGH,
            {"applies": False},
        ),
        (
            {"landsIn": ["b-1"], "verdicts": {"a-1": "reject"}},
            THROUGH,
            PLACED_THROUGH,
            {"applies": False, "landsIn": ["a-1"]},
        ),
        # expected to pass through, now applies: recorded afresh
        ({"applies": False}, ONE, PLACED_ONE, record_expectation(ONE, PLACED_ONE)),
        # nothing left of it (its only node is gone): recorded afresh
        (
            {"applies": True, "verdicts": {"gone": "pass"}},
            ONE,
            PLACED_ONE,
            record_expectation(ONE, PLACED_ONE),
        ),
    ],
)
def test_accepting_new_results_edits_only_what_fails(expect, result, placed, accepted):
    assert check_expectations(result, expect, placement=placed) != []
    new = rerecord(result, expect, placement=placed)
    assert new == accepted
    assert expect_errors(new) == []
    assert check_expectations(result, new, placement=placed) == []


def test_an_expectation_that_holds_is_accepted_unchanged():
    expect = {
        "applies": True,
        "landsIn": ["a-1", "a-2", "b-1"],
        "winnerIn": ["a-1", "a-2", "b-1"],
        "scores": {"b-1": {"atMost": 6}},
    }
    assert rerecord(TIE, expect, placement=PLACED_TIE) == expect


def test_the_review_lists_each_changed_entry_old_and_new():
    old = {
        "winner": "b-1",
        "verdicts": {"a-1": "pass", "cp-1": "pass"},
        "scores": {"b-1": {"atLeast": 7}},
    }
    new = {
        "verdicts": {"a-1": "pass", "cp-1": "reject"},
        "scores": {"b-1": {"atLeast": 5}},
        "winnerIn": ["a-1", "a-2"],
    }
    # by kind (applies, winner, winnerIn, verdicts, ...), then path, whatever the keys' order
    assert expectation_changes(old, new) == [
        {"path": "winner", "old": "b-1", "new": None},
        {"path": "winnerIn", "old": None, "new": ["a-1", "a-2"]},
        {"path": "verdicts.cp-1", "old": "pass", "new": "reject"},
        {"path": "scores.b-1.atLeast", "old": 7, "new": 5},
    ]
    assert expectation_changes(dict(reversed(old.items())), new) == expectation_changes(old, new)
    assert expectation_changes(old, old) == []


def test_a_documents_malformed_expectation_points_at_its_line():
    text = (
        "name: p\nschedulerNames: [s]\ntests:\n  - name: t\n    pod: {metadata: {name: a}}\n"
        "    expect:\n      scores:\n        a-1: {atLeast: 12}\n"
    )
    parsed = parse_text(text)
    _, errors = build_spec(parsed.data, parsed.positions)
    [error] = [e for e in errors if e.path.startswith("tests")]
    assert error.path == "tests[0].expect.scores.a-1.atLeast"
    assert "must be an integer from 0 to 10, got 12" in error.message
    assert error.doc_line == 8


def test_the_canonical_order_is_the_same_whatever_order_the_storage_keeps():
    # PostgreSQL's jsonb gives keys back shortest first: scores before winnerIn, cp-1 first
    stored = {
        "scores": {"cp-1": {"atMost": 9, "atLeast": 2}, "a-gpu-1": {"atLeast": 1}},
        "verdicts": {"cp-1": "pass", "a-small-1": "reject"},
        "winnerIn": ["cp-1", "a-gpu-1"],
    }
    canonical = expect_canonical(stored)
    assert canonical == stored
    assert list(canonical) == ["winnerIn", "verdicts", "scores"]
    assert list(canonical["verdicts"]) == ["a-small-1", "cp-1"]
    assert list(canonical["scores"]) == ["a-gpu-1", "cp-1"]
    assert list(canonical["scores"]["cp-1"]) == ["atLeast", "atMost"]
    assert canonical["winnerIn"] == ["cp-1", "a-gpu-1"]  # a list keeps its order
