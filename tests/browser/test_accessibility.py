"""axe-core (the accessibility engine browsers' own audits use) on every page, light and dark,
at a desktop and a phone's width: no serious or critical violation.

axe-core is fetched by scripts/axe-core.sh (make test runs it through scripts/bootstrap.sh dev).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from tests.conftest import PASSWORD, make_user

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
]


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def _violations(page) -> list[str]:
    found = page.evaluate(
        """async () => {
          const r = await axe.run(document, {resultTypes: ['violations']});
          return r.violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.help + ' @ ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
        }"""
    )
    return found


@pytest.mark.skipif(not AXE, reason="axe-core missing: run scripts/axe-core.sh")
@pytest.mark.parametrize(
    ("scheme", "viewport"),
    [("light", {"width": 1440, "height": 900}), ("dark", {"width": 390, "height": 844})],
    ids=["light-desktop", "dark-phone"],
)
def test_no_page_has_a_serious_or_critical_accessibility_violation(
    browser, live_server, scheme, viewport
):
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
    # the page's CSP allows no inline script: axe is injected past it (a test tool, not the page)
    ctx = browser.new_context(
        viewport=viewport, color_scheme=scheme, reduced_motion="reduce", bypass_csp=True
    )
    ctx.set_default_timeout(15000)
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
        for path in PAGES:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("load")
            page.add_script_tag(content=script)
            problems[path] = _violations(page)
    finally:
        ctx.close()
    problems = {path: found for path, found in problems.items() if found}
    assert problems == {}, "\n".join(f"{p}: {v}" for p, found in problems.items() for v in found)
