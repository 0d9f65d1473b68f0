"""Issue 29 (the rough edges of a first hour) in a real browser, at 1440x900 and 390x844, light
and dark (the `look` fixture): each fix shows, works and nothing scrolls sideways.

| Point                                                  | Test here                                   |
|--------------------------------------------------------|---------------------------------------------|
| A designed 404 inside the app chrome (navigation)       | test_a_missing_page_keeps_the_navigation    |
| The playground opens on a pod seed 003 lets through;    | test_seed_003_opens_on_a_pod_it_places_...  |
|   the pod search's placeholder examples find pods       |                                             |
| Seed 002's test-case badge counts its document's cases | test_seed_002_counts_its_in_document_cases  |
| Rollback with an optional reason; the closed "Delete    | test_a_rollback_takes_a_reason_and_the_...  |
|   this policy" card says what it does                  |                                             |
| Plain-language type errors, CEL's own text on demand    | test_a_type_error_reads_plainly_...         |

The REST, `evaluate` and audit-label points have no browser surface beyond these; tests/api,
tests/web and tests/ui cover them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from policies.models import AuditEvent
from tests.browser.latency import playground_ready
from tests.browser.looks import fits, sign_in_cookie
from tests.browser.test_playground import replace_text, wait_for_preview
from tests.conftest import make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


def open_as(context, page, live_server, user, path: str):
    sign_in_cookie(context, live_server, user)
    return page.goto(f"{live_server.url}{path}")


def test_a_missing_page_keeps_the_navigation(live_server, look, context, page, screenshot):
    response = open_as(context, page, live_server, make_user("nia", "viewer"), "/policies/nope/")
    assert response.status == 404
    assert page.inner_text("h1") == "Nothing is here"
    assert page.locator("[data-status='404']").is_visible()
    if look.phone:
        page.click("[data-nav-toggle]")
    assert page.locator("#main-nav a[href='/policies/']").is_visible()
    fits(page)
    if look.phone:
        page.keyboard.press("Escape")  # the open menu covers the page
    screenshot(page, f"not-found-{look.id}")
    page.click(".error-page a[href='/policies/']")
    page.wait_for_url(f"{live_server.url}/policies/")
    assert [e for e in page.console_errors if "404" not in e] == []


def test_seed_003_opens_on_a_pod_it_places_and_the_search_examples_find_pods(
    live_server, look, context, page
):
    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-003-name-length"))
    open_as(context, page, live_server, editor, "/policies/seed-003-name-length/")
    playground_ready(page)
    assert page.input_value("#pod-select") == "default/abc"
    assert page.get_attribute("#preview-result", "data-state") != "error"
    assert "unschedulable" not in page.inner_text("#summary-pick")
    placeholder = page.get_attribute("#pod-search", "placeholder")
    for query in placeholder.removeprefix("Find a pod: ").split(", "):
        page.evaluate("document.querySelector('#pod-matches').replaceChildren()")
        page.fill("#pod-search", query)  # the previous query's answer is in: nothing in flight
        page.locator("#pod-matches .pg-pod-match").first.wait_for()
    fits(page)
    assert page.console_errors == []


def test_seed_002_counts_its_in_document_cases(live_server, look, context, page):
    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-002"))
    open_as(context, page, live_server, editor, "/policies/seed-002/")
    playground_ready(page)
    assert page.inner_text("#tests-count") == "3"
    page.goto(f"{live_server.url}/policies/seed-002/tests/")
    assert page.inner_text("#tests-count") == "3"
    assert page.locator("#tests-table tr[data-test]").count() == 3
    fits(page)


def test_a_rollback_takes_a_reason_and_the_closed_delete_card_says_what_it_does(
    live_server, look, context, page, screenshot
):
    admin = make_user("ada", "admin")
    policy = services.policy_create(actor=admin, document=example("seed-003-name-length"))
    services.policy_publish(actor=admin, policy=policy, message="v1", revision=1)
    policy.refresh_from_db()
    services.policy_update_draft(
        actor=admin,
        policy=policy,
        document=policy.draft.replace("< 5", "< 6"),
        if_match=policy.etag,
    )
    policy.refresh_from_db()
    services.policy_publish(
        actor=admin, policy=policy, message="v2", revision=policy.draft_revision
    )
    open_as(context, page, live_server, admin, "/policies/seed-003-name-length/versions/")
    closed = page.locator("#delete-summary")
    assert "Removes seed-003-name-length with its 2 versions" in closed.inner_text()
    assert page.locator("#delete-summary .pg-danger-open").is_visible()
    assert not page.locator("#confirm-name").is_visible()
    fits(page)
    screenshot(page, f"versions-{look.id}", full_page=True)
    page.fill("#rollback-message", "v2 lets long names in")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-rollback='1']")
    page.wait_for_selector("#toasts .toast--success")
    assert "v1 active" in page.inner_text(".pg-title")
    event = AuditEvent.objects.get(action="policy.rollback")
    assert event.detail["message"] == "v2 lets long names in"
    page.click("#delete-summary")
    assert page.locator("#confirm-name").is_visible()
    assert not page.locator("#delete-summary .pg-danger-open").is_visible()
    fits(page)


def test_a_type_error_reads_plainly_with_cels_own_words_on_demand(
    live_server, look, context, page, screenshot
):
    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-003-name-length"))
    open_as(context, page, live_server, editor, "/policies/seed-003-name-length/")
    playground_ready(page)
    # the second occurrence: the first is in the document's leading comment
    replace_text(page, "size(pod.name) < 5", "pod.labels['tier'] < 5", occurrence=2)
    wait_for_preview(page)
    problem = page.locator("#preview-problems .pg-problem-list li").first
    problem.wait_for()
    assert "'<' cannot compare a string with an int; convert one side" in problem.inner_text()
    cel = problem.locator(".pg-cel-message code")
    assert not cel.is_visible()  # on demand
    problem.locator(".pg-cel-message summary").click()
    assert "no matching overload for '<' applied to (string, int)" in cel.inner_text()
    fits(page)
    screenshot(page, f"type-error-{look.id}", selector="#preview-problems")
    assert [e for e in page.console_errors if "status of 422" not in e] == []
