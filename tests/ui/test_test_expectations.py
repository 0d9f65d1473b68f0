"""The Test cases page: an expectation edited as YAML, the review of what the saved draft
changes in failing cases (old and new) and "Accept new results"; read-only for viewers."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from policies import services
from policies.engine.cel.deadline import deadline
from policies.models import AuditEvent, Policy, PolicyTestCase
from tests.clocks import StepClock
from tests.conftest import make_user, seed003_with_test_case

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
HTMX = {"HTTP_HX_REQUEST": "true"}
BASE = "/policies/seed-003-name-length/tests"
# seed-003 on the demo cluster: pod abc passes everywhere and cp-1, the one shortest node name,
# wins with extender score 10 (minmax: the shortest name scores 100). This expectation fails
# twice: cp-1 wins, not a-gpu-1, and its score 10 is above 5.
WRONG = {"winnerIn": ["a-gpu-1"], "scores": {"cp-1": {"atMost": 5}}}


@pytest.fixture
def users(db) -> dict[str, User]:
    return {r: make_user(r, r) for r in ("viewer", "editor")}


@pytest.fixture
def clients(users) -> dict[str, Client]:
    found = {}
    for role, user in users.items():
        found[role] = Client()
        found[role].force_login(user)
    return found


@pytest.fixture
def seed003(users) -> Policy:
    return seed003_with_test_case(users["editor"], expect=WRONG)


def stored() -> dict:
    return PolicyTestCase.objects.get(name="abc").expect


def test_an_editor_sees_each_expectation_in_a_form_and_a_viewer_read_only(clients, seed003):
    editor = clients["editor"].get(f"{BASE}/").content.decode()
    assert 'name="expect"' in editor and "Save expectation" in editor
    assert "winnerIn: [a-gpu-1]" in editor
    assert "policy-level: winner among 1, 1 score bound" in editor  # labelled as such
    viewer = clients["viewer"].get(f"{BASE}/").content.decode()
    assert 'name="expect"' not in viewer and "Save expectation" not in viewer
    assert "winnerIn: [a-gpu-1]" in viewer and "(read-only)" in viewer
    # both see the failures, and may review them
    for html in (editor, viewer):
        assert "(policy-level winnerIn) among a-gpu-1, got cp-1" in html
        assert "node cp-1: expected policy score at most 5, got 10" in html
        assert 'id="review-changes-button"' in html


def test_an_editor_saves_a_hand_written_expectation(clients, seed003):
    text = "winner: cp-1\nscores:\n  cp-1: {atLeast: 9}\nrejectedBy: {}\n"
    response = clients["editor"].post(f"{BASE}/expect", {"case": "abc", "expect": text}, **HTMX)
    assert response.status_code == 200
    assert stored() == {"winner": "cp-1", "scores": {"cp-1": {"atLeast": 9}}, "rejectedBy": {}}
    html = response.content.decode()
    assert "all 1 pass" in html and "Saved the expectation of abc" in response["HX-Trigger"]
    assert AuditEvent.objects.get(action="testcase.update").detail["changed"] == ["expect"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "scores:\n  cp-1: {atLeast: 11}\n",
            "expect.scores.cp-1.atLeast</span>: must be an integer from 0 to 10, got 11",
        ),
        ("winnerIn: []\n", "expect.winnerIn</span>: must be a non-empty list of node names"),
        ("winner: [a\n", "expect</span>: line 2: YAML syntax error"),
        ("- cp-1\n", "expect</span>: expect must be a mapping, got a list"),
        ("", "expect is empty: give at least one of"),
    ],
)
def test_a_bad_expectation_is_shown_with_its_field_path_and_the_text_kept(
    clients, seed003, text, shown
):
    response = clients["editor"].post(f"{BASE}/expect", {"case": "abc", "expect": text}, **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert shown in html
    assert 'aria-invalid="true" autofocus' in html and 'role="alert"' in html
    assert stored() == WRONG
    assert not AuditEvent.objects.filter(action="testcase.update").exists()


def test_the_review_lists_old_and_new_and_an_editor_accepts_them(clients, seed003):
    review = clients["editor"].post(f"{BASE}/review", **HTMX)
    assert review.status_code == 200 and review["HX-Retarget"] == "#tests-review"
    html = review.content.decode()
    # winnerIn [a-gpu-1] -> winner cp-1; scores.cp-1.atMost 5 -> 10
    assert '<th scope="row" class="mono">winnerIn</th>' in html
    assert '<th scope="row" class="mono">scores.<wbr>cp-1.<wbr>atMost</th>' in html
    assert '<td class="mono pg-review-old">a-gpu-1</td>' in html
    assert '<th scope="row" class="mono">winner</th>' in html
    assert '<td class="mono pg-review-new">cp-1</td>' in html
    assert '<td class="mono pg-review-old">5</td>' in html
    assert '<td class="mono pg-review-new">10</td>' in html
    assert 'name="cases" value="abc"' in html and 'id="accept-results-button"' in html
    revision = Policy.objects.get(pk=seed003.pk).draft_revision
    assert f'name="revision" value="{revision}"' in html
    accepted = clients["editor"].post(
        f"{BASE}/accept", {"revision": revision, "cases": ["abc"]}, **HTMX
    )
    assert accepted.status_code == 200
    assert stored() == {"winner": "cp-1", "scores": {"cp-1": {"atMost": 10}}}
    assert "all 1 pass" in accepted.content.decode()
    assert "Accepted the new results of 1 test case." in accepted["HX-Trigger"]
    audit = AuditEvent.objects.get(action="testcase.accept")
    assert audit.actor_name == "editor" and audit.detail["name"] == "abc"


def test_a_viewer_reviews_read_only_and_cannot_edit_or_accept(clients, seed003):
    html = clients["viewer"].post(f"{BASE}/review", **HTMX).content.decode()
    assert '<td class="mono pg-review-new">cp-1</td>' in html
    assert 'name="cases"' not in html and "accept-results-button" not in html
    assert "Read-only: an editor can accept these results." in html
    revision = Policy.objects.get(pk=seed003.pk).draft_revision
    refused = [
        clients["viewer"].post(f"{BASE}/accept", {"revision": revision, "cases": ["abc"]}),
        clients["viewer"].post(f"{BASE}/expect", {"case": "abc", "expect": "winner: cp-1"}),
    ]
    assert [r.status_code for r in refused] == [403, 403]
    assert stored() == WRONG


def test_accepting_after_the_draft_changed_is_refused_with_a_new_review(clients, users, seed003):
    reviewed = Policy.objects.get(pk=seed003.pk)
    revision = reviewed.draft_revision
    services.policy_update_draft(
        actor=users["editor"],
        policy=reviewed,
        document=reviewed.draft.replace("Seed", "seed", 1) + "\n",
        if_match=reviewed.etag,
    )
    response = clients["editor"].post(
        f"{BASE}/accept", {"revision": revision, "cases": ["abc"]}, **HTMX
    )
    assert response.status_code == 422 and response["HX-Retarget"] == "#tests-review"
    html = response.content.decode()
    assert "The draft changed since its results were shown" in html
    now = Policy.objects.get(pk=seed003.pk).draft_revision
    assert now != revision
    assert f'name="revision" value="{now}"' in html  # the review shown again is of the new draft
    assert stored() == WRONG


def test_accepting_nothing_ticked_says_so(clients, seed003):
    revision = Policy.objects.get(pk=seed003.pk).draft_revision
    response = clients["editor"].post(f"{BASE}/accept", {"revision": revision}, **HTMX)
    assert response.status_code == 422
    assert "Tick at least one test case" in response.content.decode()
    assert stored() == WRONG


def test_without_htmx_the_forms_still_work(clients, seed003):
    page = clients["viewer"].post(f"{BASE}/review")
    assert page.status_code == 200 and "<html" in page.content.decode()
    assert '<td class="mono pg-review-new">cp-1</td>' in page.content.decode()
    saved = clients["editor"].post(f"{BASE}/expect", {"case": "abc", "expect": "winner: cp-1"})
    assert saved.status_code == 302 and saved["Location"] == f"{BASE}/"
    assert stored() == {"winner": "cp-1"}


def test_review_and_accept_stop_a_slow_policy_in_words(clients, seed003, settings):
    revision = Policy.objects.get(pk=seed003.pk).draft_revision
    settings.SCHEDWEB_PREVIEW_SECONDS = 1e-9
    # a clock that moves a second each time it is read: the first look past the start is late
    with deadline(None, clock=StepClock()):
        review = clients["viewer"].post(f"{BASE}/review", **HTMX).content.decode()
        accepted = clients["editor"].post(
            f"{BASE}/accept", {"revision": revision, "cases": ["abc"]}, **HTMX
        )
    assert "The test cases could not run: the policy took longer than" in review
    assert accepted.status_code == 422
    assert "The test cases could not run" in accepted.content.decode()
    assert stored() == WRONG
