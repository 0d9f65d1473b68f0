"""Test cases' expectations over the API: edited by hand (PATCH), reviewed (tests/run's
`proposed` and `changes`) and accepted (tests/accept), by editors only, audited."""

from __future__ import annotations

import pytest

from policies.engine.cel.deadline import deadline
from policies.models import AuditEvent, PolicyTestCase
from tests.api.conftest import POD
from tests.clocks import StepClock

TESTS = "/api/v1/policies/least/tests"
# POD (500m CPU) on the demo cluster under `least` (free CPU %): five nodes tie at total 99,
# a-small-1 gets extender score 4 (the numbers are read from the run, never assumed)
WRONG = {"winnerIn": ["cp-1"], "scores": {"a-small-1": {"atLeast": 10}}}


@pytest.fixture
def case(api, created) -> dict:
    body = {"name": "web", "pod": POD, "cluster": "demo", "expect": WRONG}
    response = api.post(TESTS, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def run(client) -> dict:
    response = client.post(f"{TESTS}/run")
    assert response.status_code == 200, response.content
    return {r["name"]: r for r in response.json()}


def etag(client) -> str:
    return client.get("/api/v1/policies/least")["ETag"]


def test_the_run_shows_what_accepting_would_write_old_and_new(clients, case):
    result = run(clients["viewer"])["web"]
    assert result["passed"] is False
    winners = result["proposed"]["winnerIn"]
    assert len(winners) > 1 and "cp-1" not in winners
    got = result["proposed"]["scores"]["a-small-1"]["atLeast"]
    assert got < 10
    assert f"node a-small-1: expected policy score at least 10, got {got}" in result["failures"]
    assert any(
        f.startswith("expected the policy's top node (policy-level winnerIn) among cp-1, got ")
        for f in result["failures"]
    )
    assert result["changes"] == [
        {"path": "winnerIn", "old": ["cp-1"], "new": winners},
        {"path": "scores.a-small-1.atLeast", "old": 10, "new": got},
    ]


def test_an_editor_edits_an_expectation_by_hand_and_the_edit_is_audited(clients, case):
    proposed = run(clients["editor"])["web"]["proposed"]
    got = proposed["scores"]["a-small-1"]["atLeast"]
    hand = {
        "winnerIn": proposed["winnerIn"],
        "scores": {"a-small-1": {"atLeast": got, "atMost": got}},
        "verdicts": {"a-small-2": "reject"},
    }
    response = clients["editor"].patch(f"{TESTS}/web", {"expect": hand}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["expect"] == hand
    stored = PolicyTestCase.objects.get(name="web")
    assert stored.expect == hand and stored.pod == case["pod"] and stored.cluster == "demo"
    audit = AuditEvent.objects.get(action="testcase.update")
    assert (audit.actor_name, audit.policy_name) == ("editor", "least")
    assert audit.detail == {"name": "web", "changed": ["expect"]}
    assert run(clients["viewer"])["web"] == {"name": "web", "passed": True, "failures": []}


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        (
            {"expect": {"winnerIn": [], "scores": {"a-small-1": {"atLeast": 11}}}},
            ["expect.winnerIn", "expect.scores.a-small-1.atLeast"],
        ),
        ({"expect": {"winner": "a", "winnerIn": ["b"]}}, ["expect.winnerIn"]),
        (
            {"expect": {"scores": {"a-1": {"atLeast": 8, "atMost": 2}}}},
            ["expect.scores.a-1.atLeast"],
        ),
        ({"expect": {"verdicts": {"a-1": "maybe"}}}, ["expect.verdicts.a-1"]),
        # kube-scheduler's level: where the pod lands, or why not (bounded, every field named)
        ({"expect": {"landsIn": "a-1"}}, ["expect.landsIn"]),
        ({"expect": {"landsIn": ["a-1", 7]}}, ["expect.landsIn[1]"]),
        ({"expect": {"landsIn": ["a-1"], "unschedulable": True}}, ["expect.unschedulable"]),
        ({"expect": {"unschedulable": ["r"] * 101}}, ["expect.unschedulable"]),
        (
            {"expect": {"unschedulable": ["x" * 2000, {}]}},
            ["expect.unschedulable[0]", "expect.unschedulable[1]"],
        ),
        ({"expect": {"rejectedBy": {"a-1": ["TaintToleration"]}}}, ["expect.rejectedBy.a-1"]),
        ({"expect": {"winer": "a-1"}}, ["expect.winer"]),
        ({"expect": {}}, ["expect"]),
        ({"expect": ["a-1"]}, ["expect"]),
        ({}, ["expect"]),
        ({"expected": {"winner": "a-1"}}, ["expected"]),
    ],
)
def test_a_bad_edit_is_400_naming_each_field_and_changes_nothing(clients, case, body, paths):
    response = clients["editor"].patch(f"{TESTS}/web", body, format="json")
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["errors"]] == paths
    assert PolicyTestCase.objects.get(name="web").expect == WRONG
    assert not AuditEvent.objects.filter(action="testcase.update").exists()


def test_a_case_stated_at_kube_schedulers_level_runs_and_is_re_recorded_to_the_pick(clients, case):
    # POD on the demo under `least`: where kube-scheduler puts it, read from the REST preview
    preview = clients["viewer"].post(
        "/api/v1/preview", {"policy": "least", "pod": POD, "cluster": "demo"}, format="json"
    )
    pick = preview.json()["answer"]["pick"]
    assert pick and "cp-1" not in pick
    wrong = {"landsIn": ["cp-1"], "rejectedBy": {"cp-1": "TaintToleration"}}
    response = clients["editor"].patch(f"{TESTS}/web", {"expect": wrong}, format="json")
    assert response.status_code == 200, response.content
    result = run(clients["viewer"])["web"]
    assert result["failures"][0].startswith(
        f"expected the pod to land in cp-1, but kube-scheduler picks {pick[0]}"
        if len(pick) == 1
        else "expected the pod to land in cp-1, but kube-scheduler picks one of "
    )
    assert len(result["failures"]) == 1  # cp-1 is rejected by its taint, as stated
    assert result["proposed"] == {"landsIn": pick, "rejectedBy": {"cp-1": "TaintToleration"}}
    assert result["changes"] == [{"path": "landsIn", "old": ["cp-1"], "new": pick}]


def test_accepting_new_results_writes_the_reviewed_proposal_and_audits_each_case(clients, case):
    editor = clients["editor"]
    reviewed = run(editor)["web"]
    response = editor.post(f"{TESTS}/accept", {}, format="json", HTTP_IF_MATCH=etag(editor))
    assert response.status_code == 200, response.content
    assert response.json() == [
        {"name": "web", "expect": reviewed["proposed"], "changes": reviewed["changes"]}
    ]
    assert PolicyTestCase.objects.get(name="web").expect == reviewed["proposed"]
    assert run(editor)["web"]["passed"] is True
    audit = AuditEvent.objects.get(action="testcase.accept")
    assert (audit.actor_name, audit.policy_name, audit.detail["name"]) == ("editor", "least", "web")
    assert audit.detail["changes"] == reviewed["changes"]
    # nothing fails now: accepting again writes nothing
    again = editor.post(f"{TESTS}/accept", {}, format="json", HTTP_IF_MATCH=etag(editor))
    assert again.status_code == 200 and again.json() == []
    assert AuditEvent.objects.filter(action="testcase.accept").count() == 1


def test_accepting_named_cases_leaves_the_others_alone(api, clients, case):
    other = {"name": "other", "pod": POD, "cluster": "demo", "expect": {"winnerIn": ["cp-1"]}}
    assert api.post(TESTS, other, format="json").status_code == 201
    editor = clients["editor"]
    response = editor.post(
        f"{TESTS}/accept", {"cases": ["other"]}, format="json", HTTP_IF_MATCH=etag(editor)
    )
    assert [c["name"] for c in response.json()] == ["other"]
    assert PolicyTestCase.objects.get(name="web").expect == WRONG
    assert run(editor)["other"]["passed"] is True


def test_accepting_results_of_a_draft_that_changed_since_the_review_is_412(clients, case):
    editor = clients["editor"]
    reviewed = etag(editor)
    document = editor.get("/api/v1/policies/least").json()["draft"]
    saved = editor.put(
        "/api/v1/policies/least",
        {"document": document.replace("test policy", "changed")},
        format="json",
        HTTP_IF_MATCH=reviewed,
    )
    assert saved.status_code == 200, saved.content
    stale = editor.post(f"{TESTS}/accept", {}, format="json", HTTP_IF_MATCH=reviewed)
    assert stale.status_code == 412 and "review the changes again" in stale.json()["detail"]
    missing = editor.post(f"{TESTS}/accept", {}, format="json")
    assert missing.status_code == 428 and "accepting new results takes" in missing.json()["detail"]
    assert PolicyTestCase.objects.get(name="web").expect == WRONG
    assert not AuditEvent.objects.filter(action="testcase.accept").exists()


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"cases": ["web", "nope"]}, ["cases[1]"]),
        ({"cases": []}, ["cases"]),
        ({"cases": "web"}, ["cases"]),
        ({"case": "web"}, ["case"]),
    ],
)
def test_accepting_unknown_or_malformed_case_names_is_400(clients, case, body, paths):
    editor = clients["editor"]
    response = editor.post(f"{TESTS}/accept", body, format="json", HTTP_IF_MATCH=etag(editor))
    assert response.status_code == 400, response.content
    assert [e["path"] for e in response.json()["errors"]] == paths
    assert PolicyTestCase.objects.get(name="web").expect == WRONG


def test_viewers_review_but_cannot_edit_or_accept(clients, case):
    viewer = clients["viewer"]
    assert "proposed" in run(viewer)["web"]
    edit = viewer.patch(f"{TESTS}/web", {"expect": {"applies": True}}, format="json")
    assert edit.status_code == 403
    accept = viewer.post(f"{TESTS}/accept", {}, format="json", HTTP_IF_MATCH=etag(viewer))
    assert accept.status_code == 403
    assert PolicyTestCase.objects.get(name="web").expect == WRONG
    assert not AuditEvent.objects.filter(action__in=["testcase.update", "testcase.accept"]).exists()


def test_a_case_named_accept_is_still_reachable_by_its_name(api, created):
    body = {"name": "accept", "pod": POD, "cluster": "demo", "expect": {"applies": True}}
    assert api.post(TESTS, body, format="json").status_code == 201
    assert api.get(f"{TESTS}/accept").json()["expect"] == {"applies": True}
    response = api.patch(f"{TESTS}/accept", {"expect": {"applies": False}}, format="json")
    assert response.status_code == 200 and response.json()["expect"] == {"applies": False}
    assert api.delete(f"{TESTS}/accept").status_code == 204


def test_running_and_accepting_stop_a_slow_policy_with_503(clients, case, settings):
    editor = clients["editor"]
    tag = etag(editor)
    settings.SCHEDWEB_PREVIEW_SECONDS = 1e-9
    # a clock that moves a second each time it is read: the first look past the start is late
    with deadline(None, clock=StepClock()):
        ran = editor.post(f"{TESTS}/run")
        accepted = editor.post(f"{TESTS}/accept", {}, format="json", HTTP_IF_MATCH=tag)
    assert (ran.status_code, accepted.status_code) == (503, 503)
    assert "simplify its expressions" in accepted.json()["detail"]
    assert "SCHEDWEB_" not in accepted.json()["detail"]
    assert PolicyTestCase.objects.get(name="web").expect == WRONG
