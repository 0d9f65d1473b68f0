"""Issue 12 in a real browser, at 1440x900 and 390x844, light and dark (the `look` fixture):
each fix and feature a browser can show works, nothing scrolls sideways, and where the keyboard
is involved the focus is drawn.

Inventory: each of issue 12's browser-visible fixes and features, and the test that shows it
(all at the four looks unless said otherwise):

| Fix or feature                                       | Browser test                                     |
|------------------------------------------------------|--------------------------------------------------|
| Phone navigation menu (and inline nav on desktop)    | test_narrow::test_every_page_fits_with_its_navigation |
| Folded-expression error: results list = marker       | test_issue12::test_a_folded_expressions_error_is_listed_where_it_is_marked |
| schedulerName conflict at review, holder linked,     | test_issue12::test_a_scheduler_name_conflict_shows_at_review_and_at_confirm_keeps_the_message |
|   typed message kept at confirm                      |                                                  |
| Viewers' read-only hint                              | test_playground::test_a_viewer_previews_but_cannot_edit_and_a_forced_post_is_refused |
| API tokens page                                      | test_ops::test_a_user_makes_an_api_token_from_the_account_menu_and_revokes_it |
| /api/docs/ dark mode and the bar back to the app     | test_ops::test_the_api_docs_follow_dark_mode_and_lead_back_to_the_app |
| Completion: string methods, nothing on YAML keys     | test_issue12::test_completion_offers_string_methods_and_nothing_on_a_yaml_key |
|                                                      |   (and test_cel_editor's gallery tests, 1280x800 light) |
| Share links                                          | test_playground::test_a_share_link_shows_another_user_the_same_preview |
| Download / import of a policy with its tests         | test_issue12::test_a_downloaded_policy_is_imported_with_its_tests |
| Pod picker search                                    | test_playground::test_a_pod_found_by_search_is_previewed_and_kept_in_the_url |
| Pasted Deployment accepted                           | test_issue12::test_a_pasted_deployment_is_previewed_by_its_pod_template |
| Cluster page "Preview…" a pod                        | test_issue12::test_the_cluster_page_previews_a_pod_in_a_chosen_policy |
| Decision "Open in the playground", pod gone          | test_issue12::test_a_decisions_pod_opens_in_the_playground_after_it_is_gone |
| What-if edits listed and undoable                    | test_playground::test_what_if_cordoning_the_pick_moves_it_and_undo_brings_it_back |
| Test cases: edit, review, accept                     | test_test_expectations (the four looks; viewer: 2) |
| Keyboard-only publishing                             | test_keyboard::test_a_publisher_publishes_with_the_keyboard_only |
| axe: no serious or critical violation, every page    | test_accessibility (every page at the four looks) |

Users sign in by a session cookie here (sign_in_cookie): signing in is tested elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from policies.models import Policy, PolicyVersion
from tests.browser.latency import playground_ready
from tests.browser.looks import fits, keyboard_focus, sign_in_cookie
from tests.browser.test_ops import publish_bin_packing, record_decisions
from tests.conftest import make_user, seed003_with_test_case

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"

FOLDED = """\
name: folded
schedulerNames: [folded-only]
variables:
  - name: used
    expression: >-
      node.allocatable.cpu > 0 ?
      node.requested.cpu * 100 / node.allocatable.cpu : 0
scores:
  - name: anything
    expression: variables.used
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: schedweb
      containers:
        - name: web
          image: nginx
          resources: {requests: {cpu: 250m, memory: 64Mi}}
"""


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


def open_as(context, page, live_server, user, path: str) -> None:
    sign_in_cookie(context, live_server, user)
    page.goto(f"{live_server.url}{path}")


def go_to(page, line: int, column: int) -> None:
    page.evaluate("([l, c]) => CelEditor.get('#policy-editor').goTo(l, c)", [line, column])


def test_a_folded_expressions_error_is_listed_where_it_is_marked(live_server, look, context, page):
    editor = make_user("fay", "editor")
    services.policy_create(actor=editor, document=FOLDED)
    open_as(context, page, live_server, editor, "/policies/folded/")
    playground_ready(page)
    # a typo on the folded expression's second line: node.xrequested
    line = (
        FOLDED.splitlines().index("      node.requested.cpu * 100 / node.allocatable.cpu : 0") + 1
    )
    go_to(page, line, len("      node.") + 1)
    page.keyboard.type("x")
    page.wait_for_function("CelEditor.get('#policy-editor').markers?.length > 0")
    markers = page.evaluate("CelEditor.get('#policy-editor').markers")
    assert [(m["line"], m["column"]) for m in markers] == [(line, len("      node.") + 1)]
    problems = page.locator("#preview-problems .pg-problem-list li")
    problems.first.wait_for()
    assert f"(line {line}, column {len('      node.') + 1})" in problems.first.inner_text()
    fits(page)
    assert [e for e in page.console_errors if "status of 422" not in e] == []


def test_completion_offers_string_methods_and_nothing_on_a_yaml_key(
    live_server, look, context, page
):
    editor = make_user("cole", "editor")
    services.policy_create(actor=editor, document=FOLDED)
    open_as(context, page, live_server, editor, "/policies/folded/")
    playground_ready(page)
    last = FOLDED.splitlines().index("    expression: variables.used") + 1
    go_to(page, last, 1000)
    page.keyboard.type(' + size(node.labels["zone"].st')
    popup = page.locator(".ce-complete")
    popup.wait_for()
    options = page.locator(".ce-complete [role=option] .ce-option-name").all_inner_texts()
    assert options[0] == "startsWith"
    box = popup.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= look.viewport["width"] + 1
    fits(page)
    page.keyboard.press("Escape")
    assert popup.is_hidden()
    go_to(page, 1, 1)  # `name:`, a YAML key: no CEL there
    page.keyboard.press("Control+Space")
    assert popup.is_hidden()
    # the half-typed expression is previewed as invalid: a 422 Chromium logs
    assert [e for e in page.console_errors if "status of 422" not in e] == []


def test_a_scheduler_name_conflict_shows_at_review_and_at_confirm_keeps_the_message(
    live_server, look, context, page
):
    publisher = make_user("pia", "publisher")
    seed = services.policy_create(actor=publisher, document=example("seed-003-name-length"))
    open_as(context, page, live_server, publisher, "/policies/seed-003-name-length/versions/")
    # the name is free: the review offers the publish button ...
    page.fill("#id_message", "my careful words")
    page.click("#publish-check-button")
    page.wait_for_selector("#publish-confirm-button")
    # ... but another policy takes schedweb before the confirm: the message is kept, the
    # holder linked, nothing published
    holder = services.policy_create(actor=publisher, document=example("bin-packing"))
    services.policy_publish(
        actor=publisher, policy=holder, message="v1", revision=holder.draft_revision
    )
    page.click("#publish-confirm-button")
    page.wait_for_selector("#conflict-link")
    assert page.input_value("textarea[name=message]").strip() == "my careful words"
    assert not PolicyVersion.objects.filter(policy=seed).exists()
    fits(page)
    # checked again: the review shows the conflict, no publish button, the holder one Tab away
    page.goto(f"{live_server.url}/policies/seed-003-name-length/versions/")
    page.fill("#id_message", "again")
    page.click("#publish-check-button")
    page.wait_for_selector("#publish-conflict")
    assert "already served by policy bin-packing (v1)" in page.inner_text("#publish-conflict")
    assert page.locator("#publish-confirm-button").count() == 0
    fits(page)
    keyboard_focus(page, "#conflict-link")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/policies/bin-packing/versions/")
    assert [e for e in page.console_errors if "status of 409" not in e] == []


def test_a_downloaded_policy_is_imported_with_its_tests(live_server, look, context, page):
    editor = make_user("dan", "editor")
    seed003_with_test_case(editor, expect={"winnerIn": ["cp-1"]})
    open_as(context, page, live_server, editor, "/policies/seed-003-name-length/")
    playground_ready(page)
    fits(page)
    with page.expect_download() as download:
        page.click("#download-link")
    text = Path(download.value.path()).read_text()
    assert "tests:" in text and "winnerIn" in text
    page.goto(f"{live_server.url}/policies/")
    page.click("#import-open")
    page.fill("#import-text", text.replace("name: seed-003-name-length", "name: imported-copy", 1))
    fits(page)
    page.click("#import-submit")
    page.wait_for_url(f"{live_server.url}/policies/imported-copy/")
    playground_ready(page)
    # the test cases come in with the document's tests: (policy test runs them)
    page.wait_for_selector("text=(1 test case in it)")
    copy = Policy.objects.get(name="imported-copy")
    assert "winnerIn: [cp-1]" in copy.draft or "- cp-1" in copy.draft
    fits(page)
    assert page.console_errors == []


def test_a_pasted_deployment_is_previewed_by_its_pod_template(live_server, look, context, page):
    viewer = make_user("pam", "viewer")
    services.policy_create(actor=make_user("ed", "editor"), document=example("bin-packing"))
    open_as(context, page, live_server, viewer, "/policies/bin-packing/")
    playground_ready(page)
    page.select_option("#pod-select", "pasted")
    page.wait_for_selector("#pod-yaml", state="visible")
    page.fill("#pod-yaml", DEPLOYMENT)
    page.wait_for_function(
        "document.querySelector('#preview-result')?.textContent.includes('shop/web-deployment-template')"
    )
    assert page.get_attribute("#preview-result", "data-state") != "invalid"
    fits(page)
    # choosing "Paste a manifest…" previews the empty box first: a 422 Chromium logs
    assert [e for e in page.console_errors if "status of 422" not in e] == []


def test_the_cluster_page_previews_a_pod_in_a_chosen_policy(live_server, look, context, page):
    viewer = make_user("cleo", "viewer")
    services.policy_create(actor=make_user("ed", "editor"), document=example("bin-packing"))
    open_as(context, page, live_server, viewer, "/cluster/")
    fits(page)
    preview = page.locator("a[aria-label='Preview default/abc in a policy']")
    keyboard_focus(page, "a[aria-label='Preview default/abc in a policy']")
    assert preview.is_visible()
    page.keyboard.press("Enter")
    page.wait_for_selector("#preview-pod-banner")
    fits(page)
    page.click("a.pg-policy-link[href^='/policies/bin-packing/']")
    playground_ready(page)
    assert page.input_value("#pod-select") == "default/abc"
    assert "default/abc" in page.inner_text("#preview-result")
    fits(page)
    assert page.console_errors == []


def test_a_decisions_pod_opens_in_the_playground_after_it_is_gone(live_server, look, context, page):
    viewer = make_user("vera", "viewer")
    publish_bin_packing(make_user("pat", "publisher"))
    # web.yaml is an example pod, not a pod of the demo cluster: gone from the snapshot
    ((decision, _),) = record_decisions(["web.yaml"])
    open_as(context, page, live_server, viewer, f"/decisions/{decision.pk}/")
    fits(page)
    keyboard_focus(page, "#open-playground")
    page.keyboard.press("Enter")
    page.wait_for_selector("#recorded-pod-banner")
    playground_ready(page)
    ref = f"{decision.pod_namespace}/{decision.pod_name}"
    assert ref in page.inner_text("#preview-result")
    assert "Cannot evaluate" not in page.inner_text("main")
    fits(page)
    assert page.console_errors == []
