"""The shadow report and the dashboard's shadow line in a real browser (issue 25), at 1440x900
and 390x844, light and dark: the counts, a differing pod opened to both versions' node
breakdowns, nothing scrolling sideways, no serious accessibility violation, and Promote from
the page (its confirmation asked, the versions page reached with the promoted version)."""

from __future__ import annotations

import pytest

from policies.models import PolicyActivation
from tests.browser.looks import fits, new_context, sign_in_cookie
from tests.browser.test_accessibility import AXE, _violations
from tests.conftest import make_user
from tests.rollout.test_shadow_report import _policy_with_shadow, _store


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def test_the_shadow_report_and_the_dashboard_line_read_well_in_every_look(
    browser, live_server, look
):
    _policy_with_shadow()
    _store([f"web-{i}" for i in range(3)] + ["a-pod-with-a-rather-long-name-for-a-phone-0123"])
    _store(["alike"], strict=False)
    _store(["web-past-the-record-rate"], listed=False)  # counted, not listed
    user = make_user("sam", "viewer")
    ctx = new_context(browser, look, bypass_csp=bool(AXE))
    page = ctx.new_page()
    try:
        sign_in_cookie(ctx, live_server, user)
        page.goto(f"{live_server.url}/policies/least/shadow/")
        judged = page.locator('[data-count="judged"] .stat-value')
        assert judged.inner_text() == "6"
        assert page.locator('[data-count="differed"] .stat-value').inner_text() == "5"
        records = page.locator("#shadow-records > li")
        assert records.count() == 4
        sample = page.locator("[data-sample]")
        assert sample.is_visible()
        assert sample.inner_text().startswith("4 of the 5 pods judged differently are listed")
        first = records.first
        first.locator("summary").click()
        table = first.locator("table.shadow-breakdown")
        assert table.is_visible()
        row = table.locator("tr.is-selected")  # the node whose verdicts differ
        assert row.count() == 1 and row.locator("td").first.inner_text() == "a-small-1"
        fits(page)
        if AXE:
            page.add_script_tag(content=AXE[-1].read_text())
            assert _violations(page) == []
        page.goto(f"{live_server.url}/")
        line = page.locator("#shadow-lines li[data-policy='least']")
        assert line.is_visible()
        assert "6 judged, 5 differently" in " ".join(line.inner_text().split())
        fits(page)
        if AXE:
            page.add_script_tag(content=AXE[-1].read_text())
            assert _violations(page) == []
    finally:
        ctx.close()


def test_promote_from_the_report_asks_first_then_serves_the_shadow_as_active(
    browser, live_server, context, page
):
    _policy_with_shadow()
    sign_in_cookie(context, live_server, make_user("pat", "publisher"))
    page.goto(f"{live_server.url}/policies/least/shadow/")
    page.fill("#promote-message", "v2 rejects nothing it should not")
    page.once("dialog", lambda dialog: dialog.dismiss())  # "Make v2 the active version?" - no
    page.click("#promote-button")
    assert PolicyActivation.objects.get(role="active", active=True).version.number == 1
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#promote-button")
    page.wait_for_url(f"{live_server.url}/policies/least/versions/")
    assert "v2 active" in page.locator(".pg-header").inner_text()
    assert page.locator("#shadow-line").count() == 0
    assert page.console_errors == []
