"""Issue 29 (the rough edges of a first hour) in a real browser, at 1440x900 and 390x844, light
and dark (the `look` fixture): each fix shows, works and nothing scrolls sideways.

| Point                                                  | Test here                                   |
|--------------------------------------------------------|---------------------------------------------|
| A designed 404 inside the app chrome (navigation)       | test_a_missing_page_keeps_the_navigation    |
| The playground opens on a pod seed 003 lets through;    | test_seed_003_opens_on_a_pod_it_places_...  |
|   the pod search's placeholder examples find pods       |                                             |
| Seed 002's test-case badge counts its document's cases;| test_seed_002_counts_its_in_document_...    |
|   the publish review lists `queue:` and `gang:` changes |                                             |
| Rollback with an optional reason; the closed "Delete    | test_a_rollback_takes_a_reason_and_the_...  |
|   this policy" card says what it does                  |                                             |
| Plain-language type errors, CEL's own text on demand,   | test_a_type_error_reads_plainly_...         |
|   a link to the reference's section about it           |                                             |
| Every tab and badge on screen with a long name; one     | test_policy_pages_with_every_badge_and_...  |
|   toolbar row at 1440 px; the cluster pill whole       |                                             |
| No key hints on touch screens                          | test_key_hints_are_not_shown_on_a_touch_... |
| Phones: "Preview updated" when the answer is out of     | test_on_a_phone_a_new_preview_out_of_...    |
|   sight                                                |                                             |
| The versions diff pairs lines by rule                  | test_the_versions_diff_pairs_lines_by_rule  |
| "Recent changes" in words (a rollback with its reason) | test_a_rollback_takes_a_reason_and_the_...  |
| The language reference: one click from the playground, | test_the_reference_is_one_click_from_...    |
|   searchable, a fragment per heading, examples run    |                                             |
| A node editor for what-if: row action, drill-down,     | test_the_node_editor_writes_what_if_...     |
|   field errors, keyboard, a sheet on a phone           |                                             |

Each test checks that no page it opens scrolls sideways (`fits`), at 390 px too, in the states it
creates: badges, errors, long names, a search, the node editor open. The REST and `evaluate`
points have no browser surface; tests/api and tests/web cover them (and the rollback reason of
`manage.py policy rollback -m`, tests/api/test_served.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from policies.models import AuditEvent
from policies.ui.reference import reference
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


def seed003_playground(context, page, live_server):
    """seed-003 created by an editor, its playground open and ready."""
    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-003-name-length"))
    open_as(context, page, live_server, editor, "/policies/seed-003-name-length/")
    playground_ready(page)


def published_with_a_changed_draft(
    user, *, name="seed-003-name-length", change=None, source="seed-003-name-length"
):
    """The example `source` (named `name`) published as v1 by `user`, then its draft changed by
    `change` (seed-003's name limit 5 -> 6 unless given)."""
    text = example(source).replace(f"name: {source}", f"name: {name}")
    policy = services.policy_create(actor=user, document=text)
    services.policy_publish(actor=user, policy=policy, message="v1", revision=1)
    policy.refresh_from_db()
    changed = change(text) if change else text.replace("< 5", "< 6")
    services.policy_update_draft(actor=user, policy=policy, document=changed, if_match=policy.etag)
    policy.refresh_from_db()
    return policy


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
    seed003_playground(context, page, live_server)
    assert page.input_value("#pod-select") == "default/abc"
    assert page.get_attribute("#preview-result", "data-state") != "error"
    assert "unschedulable" not in page.inner_text("#summary-pick")
    placeholder = page.get_attribute("#pod-search", "placeholder")
    for query in placeholder.removeprefix("Find: ").split(", "):
        page.evaluate("document.querySelector('#pod-matches').replaceChildren()")
        page.fill("#pod-search", query)  # the previous query's answer is in: nothing in flight
        page.locator("#pod-matches .pg-pod-match").first.wait_for()
    fits(page)
    assert page.console_errors == []


def test_seed_002_counts_its_in_document_cases_and_its_publish_review_lists_queue_and_gang(
    live_server, look, context, page
):
    publisher = make_user("pia", "publisher")
    published_with_a_changed_draft(
        publisher,
        name="seed-002",
        source="seed-002",
        change=lambda text: text.replace("max: 29", "max: 28").replace(
            "gang: {}", "gang: {minCount: 3}"
        ),
    )
    open_as(context, page, live_server, publisher, "/policies/seed-002/")
    playground_ready(page)
    assert page.inner_text("#tests-count") == "3"
    page.goto(f"{live_server.url}/policies/seed-002/tests/")
    assert page.inner_text("#tests-count") == "3"
    assert page.locator("#tests-table tr[data-test]").count() == 3
    fits(page)
    page.goto(f"{live_server.url}/policies/seed-002/versions/")
    page.fill("#publish-form textarea, #publish-form input[name=message]", "queue and gang")
    page.click("#publish-check-button")
    review = page.locator("#publish-review")
    review.wait_for()
    chips = review.locator(".pg-rule--changed").all_inner_texts()
    assert "~ queue" in chips and "~ gang" in chips, chips
    assert review.locator(".pg-check-results > li").count() == 3  # the document's own cases ran
    fits(page)


def test_a_rollback_takes_a_reason_and_the_closed_delete_card_says_what_it_does(
    live_server, look, context, page, screenshot
):
    admin = make_user("ada", "admin")
    policy = published_with_a_changed_draft(admin)
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
    page.goto(f"{live_server.url}/")  # "Recent changes" says it in words, reason included
    feed = page.inner_text("#recent-audit")
    assert "rolled back" in feed and "v2 lets long names in" in feed
    assert "policy.rollback" not in feed
    fits(page)
    page.goto(f"{live_server.url}/policies/seed-003-name-length/versions/")
    page.click("#delete-summary")
    assert page.locator("#confirm-name").is_visible()
    assert not page.locator("#delete-summary .pg-danger-open").is_visible()
    fits(page)


def test_a_type_error_reads_plainly_with_cels_own_words_on_demand(
    live_server, look, context, page, screenshot
):
    seed003_playground(context, page, live_server)
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
    help_link = problem.locator(".pg-problem-help")  # the reference's section on it
    assert help_link.get_attribute("href").endswith("#4-semantics-worth-knowing")
    assert help_link.is_visible()
    fits(page)
    screenshot(page, f"type-error-{look.id}", selector="#preview-problems")
    assert [e for e in page.console_errors if "status of 422" not in e] == []


LONG = "a-policy-name-as-long-as-kubernetes-allows-for-a-label-value-x1"  # 63 characters


def test_policy_pages_with_every_badge_and_a_long_name_fit_and_show_every_tab(
    live_server, look, context, page, screenshot
):
    admin = make_user("ada", "admin")
    published_with_a_changed_draft(admin, name=LONG)
    sign_in_cookie(context, live_server, admin)
    for path in ("", "versions/", "tests/", "diff/?a=1&b=draft"):
        page.goto(f"{live_server.url}/policies/{LONG}/{path}")
        page.wait_for_load_state("load")
        if path in ("", "versions/"):
            assert page.locator(".pg-title .badge--draft").is_visible()  # "draft changed"
        fits(page)
        tabs = page.locator(".pg-tabs > a")
        width = look.viewport["width"]
        for i in range(tabs.count()):  # every tab on screen, none cut off or scrolled away
            box = tabs.nth(i).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (path, i, box)
    page.goto(f"{live_server.url}/policies/{LONG}/?compare=1")
    playground_ready(page)
    fits(page)
    pill = page.locator("#cluster-pill")  # whole, on screen, not cut mid-word
    box = pill.bounding_box()
    assert box and box["x"] + box["width"] <= look.viewport["width"]
    assert pill.evaluate("(e) => e.scrollWidth <= e.clientWidth")
    assert pill.inner_text().strip().startswith("demo cluster")
    screenshot(page, f"long-name-playground-{look.id}")
    if not look.phone:  # "Compare with published" does not wrap the toolbar at 1440 px
        tops = page.evaluate(
            "[...document.querySelectorAll('.pg-toolbar > :not([hidden])')]"
            ".filter((e) => e.offsetParent).map((e) => Math.round(e.getBoundingClientRect().top))"
        )
        # one row: items of different heights, centred, start within a few px of each other;
        # a wrapped item starts a row lower (the toolbar's rows are 30 px or more apart)
        assert max(tops) - min(tops) < 24, tops


def test_key_hints_are_not_shown_on_a_touch_screen(browser, live_server, look):
    from tests.browser.looks import new_context

    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-003-name-length"))
    # a phone is a touch screen; at 1440 px, a tablet (touch) and a desktop (mouse)
    for touch in (True,) if look.phone else (True, False):
        context = new_context(browser, look, has_touch=touch, is_mobile=touch)
        try:
            page = context.new_page()
            sign_in_cookie(context, live_server, editor)
            page.goto(f"{live_server.url}/policies/seed-003-name-length/")
            playground_ready(page)
            hints = [
                page.locator("#save-button kbd").first.is_visible(),
                page.locator(".ce-hints").first.is_visible(),
            ]
            assert hints == [not touch, not touch], (touch, hints)
            fits(page)
        finally:
            context.close()


def test_on_a_phone_a_new_preview_out_of_sight_is_announced_and_one_tap_away(
    live_server, look, context, page
):
    seed003_playground(context, page, live_server)
    chip = page.locator("#preview-updated")
    page.evaluate("window.scrollTo(0, 0)")
    replace_text(page, "weight: 1", "weight: 2")
    wait_for_preview(page)
    if not look.phone:  # side by side: the results are in sight, nothing to announce
        assert page.locator("#preview-result").is_visible() and not chip.is_visible()
        return
    page.wait_for_function("window.scrollY < 50")  # still at the editor
    assert chip.is_visible() and "Preview updated" in chip.inner_text()
    fits(page)
    chip.click()
    page.wait_for_function(
        "(() => { const b = document.querySelector('#preview-result').getBoundingClientRect();"
        " return b.top < window.innerHeight && b.bottom > 0; })()"
    )
    assert not chip.is_visible()


def test_the_versions_diff_pairs_lines_by_rule(live_server, look, context, page, screenshot):
    admin = make_user("ada", "admin")
    added = "  - name: fewer-pods\n    expression: 100 - node.podCount\n    weight: 1\n"
    published_with_a_changed_draft(
        admin, change=lambda text: text.replace("weight: 1", "weight: 2") + added
    )
    open_as(context, page, live_server, admin, "/policies/seed-003-name-length/diff/?a=1&b=draft")
    page.wait_for_url("**/versions/1/diff/draft")
    assert page.locator("#diff tr.pg-diff-replace").count() == 1
    assert page.inner_text("#diff tr.pg-diff-replace .pg-diff-left mark") == "1"
    assert page.locator("#diff tr.pg-diff-insert").count() == 3
    fits(page)
    screenshot(page, f"rule-aligned-diff-{look.id}")


def test_the_reference_is_one_click_from_the_playground_searchable_and_its_examples_run(
    live_server, look, context, page, screenshot
):
    seed003_playground(context, page, live_server)
    page.click("#reference-link")
    page.wait_for_url("**/help/policies/?policy=seed-003-name-length")
    page.wait_for_selector("#reference-body h2[id='3-functions']")
    fits(page)
    screenshot(page, f"reference-{look.id}")
    page.fill("#reference-search", "asApproximateFloat")
    page.wait_for_function(
        "document.querySelector('#reference-count').textContent.endsWith('match')"
    )
    assert page.locator("#quantities").is_visible()
    assert not page.locator("#worked-example").is_visible()
    assert not page.locator("#reference-toc a[href='#worked-example']").is_visible()
    marks = page.locator("#reference-body mark")
    assert marks.count() >= 2 and marks.first.inner_text() == "asApproximateFloat"
    fits(page)
    screenshot(page, f"reference-search-{look.id}")
    page.press("#reference-search", "Escape")
    page.locator("#worked-example").wait_for()
    assert marks.count() == 0
    # the quantities section's first CEL block, run in the playground
    example = next(
        e for e in reference()[1].values() if e.block.section == "quantities" and e.kind == "cel"
    )
    page.goto(f"{live_server.url}/help/policies/?policy=seed-003-name-length#quantities")
    page.click(f"[data-try='{example.number}']")
    page.wait_for_url(f"**/policies/seed-003-name-length/?example={example.number}")
    playground_ready(page)
    assert page.input_value("#policy-editor") == example.document(name="seed-003-name-length")
    assert page.locator("#example-banner").is_visible()
    assert page.locator("#dirty-flag").is_visible()  # unsaved: the draft is as it was
    fits(page)
    pod = next(e for e in reference()[1].values() if e.kind == "pod")  # a Pod: pasted, previewed
    page.goto(f"{live_server.url}/policies/seed-003-name-length/?example={pod.number}")
    playground_ready(page)
    assert page.input_value("#pod-select") == "pasted"
    assert page.input_value("#pod-yaml") == pod.block.text
    assert page.locator("#example-banner").is_visible()
    fits(page)
    assert page.console_errors == []


def _in_dialog(page) -> bool:
    return page.evaluate("!!document.activeElement.closest('#node-editor')")


def test_the_node_editor_writes_what_if_edits_and_works_on_a_phone_and_by_keyboard(
    live_server, look, context, page, screenshot
):
    seed003_playground(context, page, live_server)
    dialog = page.locator("#node-editor")
    page.click("#nodes [data-edit-node='b-large-1']")  # the row action
    dialog.locator("#node-editor-form").wait_for()
    assert _in_dialog(page)
    for _ in range(40):  # focus stays in the dialog, however far one tabs
        page.keyboard.press("Tab")
        assert _in_dialog(page)
    page.click("#node-editor [data-row-add='label']")
    page.keyboard.type("disk")
    page.keyboard.press("Tab")
    page.keyboard.type("ssd")
    page.check("#ne-unschedulable")
    page.fill("#ne-cpu", "lots")
    page.fill("#ne-copy-name", "b-large-1-with-a-long-name-for-the-copy-of-it")
    page.click("#node-editor-apply")
    error = dialog.locator("#ne-cpu-err")
    error.wait_for()
    assert (
        error.inner_text()
        == "cpu: 'lots': expected a number with an optional suffix such as m, Ki, Mi, Gi, k, M, G or e3"
    )
    assert page.evaluate("document.activeElement.id") == "ne-cpu"  # the wrong field first
    fits(page)
    screenshot(page, f"node-editor-error-{look.id}")
    page.fill("#ne-cpu", "8")
    page.click("#node-editor-apply")
    dialog.wait_for(state="hidden")
    lines = page.input_value("#what-if").splitlines()
    assert lines == [
        "- label: {node: b-large-1, key: disk, value: ssd}",
        "- cordon: b-large-1",
        "- allocatable: {node: b-large-1, cpu: '8'}",
        "- addNode: {name: b-large-1-with-a-long-name-for-the-copy-of-it, like: b-large-1}",
    ]
    page.locator("#preview-result .pg-what-if-edit").nth(3).wait_for()
    page.locator("#nodes tr[data-node='b-large-1-with-a-long-name-for-the-copy-of-it']").wait_for()
    fits(page)
    # the drill-down's button opens the node as the edits left it; Escape closes
    page.click("#nodes .pg-drill-open[data-node='b-large-1']")
    page.click("#node-drill [data-edit-node='b-large-1']")
    dialog.locator("#node-editor-form").wait_for()
    assert page.is_checked("#ne-unschedulable") and page.input_value("#ne-cpu") == "8"
    fits(page)
    screenshot(page, f"node-editor-{look.id}")
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.evaluate("document.activeElement.dataset.editNode") == "b-large-1"
    assert [e for e in page.console_errors if "status of 422" not in e] == []
