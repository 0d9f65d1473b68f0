"""axe-core (the accessibility engine browsers' own audits use) on every page, light and dark,
at a desktop's and a phone's size (1440x900, 390x844): no serious or critical violation.

axe-core is fetched by scripts/axe-core.sh (make test runs it through scripts/bootstrap.sh dev).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from tests.browser.looks import fits, new_context
from tests.browser.test_ops import record_decisions
from tests.conftest import PASSWORD, make_user, seed003_with_test_case

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "policies" / "examples"
AXE = sorted((ROOT / ".cache" / "axe").glob("axe-*.min.js"))
PAGES = [
    "/",
    "/policies/",
    "/policies/bin-packing/",
    "/policies/bin-packing/versions/",
    "/policies/bin-packing/tests/",
    "/policies/bin-packing/versions/1/diff/draft",
    "/cluster/",
    "/decisions/",
    "/connect/",
    "/connect/?tab=webhook",  # the queue webhook's tab (seed-002 is published)
    "/policies/seed-002/",  # the playground's Queue order panel
    "/account/tokens/",
    "/policies/?pod=default/abc",  # the Cluster page's Preview…: choose a policy
    "/api/docs/",
    "/policies/no-such-policy/",  # the 404 page inside the app's chrome
    "/help/policies/?policy=bin-packing",  # the language reference
    "/policies/bin-packing/?example=0",  # a reference example in the playground, unsaved
]


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


# Swagger UI's own markup (/api/docs/) nests its copy-link inside each operation's summary
# button; the product cannot change that markup, so that one rule is checked there outside it.
THIRD_PARTY = {"/api/docs/": {"nested-interactive": ".swagger-ui .opblock-summary"}}


def _violations(page, path: str = "") -> list[str]:
    waived = THIRD_PARTY.get(path, {})
    found = page.evaluate(
        """async (waived) => {
          const r = await axe.run(document, {resultTypes: ['violations']});
          for (const v of r.violations) {
            if (waived[v.id]) v.nodes = v.nodes.filter((n) => !document.querySelector(n.target[0])?.closest(waived[v.id]));
          }
          r.violations = r.violations.filter((v) => v.nodes.length);
          return r.violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.help + ' @ ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
        }""",
        waived,
    )
    return found


@pytest.mark.skipif(not AXE, reason="axe-core missing: run scripts/axe-core.sh")
def test_no_page_has_a_serious_or_critical_accessibility_violation(browser, live_server, look):
    publisher = make_user("ally", "publisher")
    policy = services.policy_create(
        actor=publisher, document=(EXAMPLES / "bin-packing.yaml").read_text()
    )
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    # seed-002 as a draft (the playground's Queue order panel over the demo's pending pods), and
    # a queue policy published for another schedulerName (the webhook tab's configuration)
    services.policy_create(actor=publisher, document=(EXAMPLES / "seed-002.yaml").read_text())
    queued = services.policy_create(
        actor=publisher,
        document="name: queued\nschedulerNames: [schedweb-queue]\n"
        "queue: {expression: 'pod.priority', min: 0, max: 9}\n",
    )
    services.policy_publish(
        actor=publisher, policy=queued, message="v1", revision=queued.draft_revision
    )
    services.api_token_create(actor=publisher, user=publisher, name="ci")  # the tokens table
    ((decision, _evaluation),) = record_decisions(["web.yaml"])  # a decision, its pod gone
    pages = [
        *PAGES,
        f"/decisions/{decision.pk}/",
        f"/policies/bin-packing/?pod=default/web&decision={decision.pk}",
    ]
    # the page's CSP allows no inline script: axe is injected past it (a test tool, not the page)
    ctx = new_context(browser, look, bypass_csp=True)
    page = ctx.new_page()
    script = AXE[-1].read_text()
    problems = {}
    try:
        page.goto(f"{live_server.url}/login/")
        page.add_script_tag(content=script)
        problems["/login/"] = _violations(page)
        page.fill("#id_username", "ally")
        page.fill("#id_password", PASSWORD)
        page.press("#id_password", "Enter")
        page.wait_for_url(f"{live_server.url}/")
        for path in pages:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("load")
            fits(page)  # and nothing scrolls sideways
            page.add_script_tag(content=script)
            problems[path] = _violations(page, path)
    finally:
        ctx.close()
    problems = {path: found for path, found in problems.items() if found}
    assert problems == {}, "\n".join(f"{p}: {v}" for p, found in problems.items() for v in found)


@pytest.mark.skipif(not AXE, reason="axe-core missing: run scripts/axe-core.sh")
def test_test_case_expectations_their_errors_and_the_review_have_no_serious_violation(
    browser, live_server, look
):
    """The Test cases page's states added with hand-written expectations (issue 12): an
    expectation open for editing, refused with its field path, the review of new results, and
    the same read-only for a viewer."""
    editor = make_user("edna", "editor")
    make_user("vic", "viewer")
    seed003_with_test_case(
        editor, expect={"winnerIn": ["a-gpu-1"], "scores": {"cp-1": {"atMost": 5}}}
    )
    script = AXE[-1].read_text()
    problems: dict[str, list[str]] = {}
    for user in ("edna", "vic"):
        ctx = new_context(browser, look, bypass_csp=True)
        page = ctx.new_page()
        try:
            page.goto(f"{live_server.url}/login/?next=/policies/seed-003-name-length/tests/")
            page.fill("#id_username", user)
            page.fill("#id_password", PASSWORD)
            page.press("#id_password", "Enter")
            page.wait_for_url("**/tests/")
            page.click("tr[data-expect='abc'] summary")
            if user == "edna":
                page.fill("tr[data-expect='abc'] textarea", "scores: {cp-1: {atMost: 11}}")
                page.click("tr[data-expect='abc'] button[type=submit]")
                page.wait_for_selector(".pg-expect-errors")
                page.add_script_tag(content=script)
                problems[f"{user}: a refused expectation"] = _violations(page)
            page.click("#review-changes-button")
            page.wait_for_selector("#tests-review-card")
            page.add_script_tag(content=script)
            problems[f"{user}: the review"] = _violations(page)
        finally:
            ctx.close()
    problems = {state: found for state, found in problems.items() if found}
    assert problems == {}, "\n".join(f"{s}: {v}" for s, found in problems.items() for v in found)
