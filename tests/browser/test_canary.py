"""The canary's status and the guard's notice in a real browser (issue 25, item 3), at
1440x900 and 390x844, light and dark: the versions page's canary line with each arm's figures
and the guard's threshold, the dashboard's canary line, the guard's rollback as a notice on
both; nothing scrolls sideways, no serious accessibility violation; Abort asks first."""

from __future__ import annotations

import pytest

from policies import services
from policies.models import Policy, PolicyActivation
from policies.redis import redis_client
from policies.rollout.canary import canary_guard_rollback, canary_rollout
from policies.rollout.guard import KEY, trip_claim
from tests.api.conftest import document
from tests.browser.looks import fits, new_context, sign_in_cookie
from tests.browser.test_accessibility import AXE, _violations
from tests.conftest import make_user
from tests.rollout.test_canary_lifecycle import TRIP


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    yield
    client = redis_client()  # the counts and trips of this test's canary
    keys = list(client.scan_iter(match="schedweb:canary:*", count=1000))
    if keys:
        client.delete(*keys)


def _canary(version_text: str = "candidate") -> Policy:
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(actor=publisher, policy=policy, message="v1", revision=1)
    policy = Policy.objects.get(pk=policy.pk)
    Policy.objects.filter(pk=policy.pk).update(
        draft=document().replace("test policy", version_text), draft_revision=2
    )
    services.policy_publish(
        actor=publisher,
        policy=Policy.objects.get(pk=policy.pk),
        message="v2 for team a",
        revision=2,
        canary=canary_rollout(
            selector="team in (payments-platform-long-name, search), tier!=batch",
            guard={"minPods": 20},
        ),
    )
    # counts as the extender processes leave them: 40 judged by the canary, 3 rejected
    key = KEY.format(policy="least", version=2)
    redis_client().hset(
        key, mapping={"canary:judged": 40, "canary:rejected": 3, "stable:judged": 160}
    )
    return Policy.objects.get(pk=policy.pk)


def _check(page) -> None:
    fits(page)
    if AXE:
        page.add_script_tag(content=AXE[-1].read_text())
        assert _violations(page) == []


def test_the_canary_status_reads_well_in_every_look(browser, live_server, look):
    _canary()
    ctx = new_context(browser, look, bypass_csp=bool(AXE))
    page = ctx.new_page()
    try:
        sign_in_cookie(ctx, live_server, make_user("sam", "viewer"))
        page.goto(f"{live_server.url}/policies/least/versions/")
        line = page.locator("#canary-line")
        assert line.is_visible()
        text = " ".join(line.inner_text().split())
        assert "v2 canary decides pods matching team in (payments-platform-long-name" in text
        canary = page.locator('tr[data-arm="canary"] td')
        assert [canary.nth(i).inner_text() for i in range(4)] == ["v2 canary", "40", "7.5%", "0.0%"]
        assert "after 20 pods" in page.locator(".canary-guard").inner_text()
        _check(page)
        page.goto(f"{live_server.url}/")
        item = page.locator("#canary-lines li[data-policy='least']")
        assert item.is_visible()
        assert "canary 40 judged, 7.5% rejected" in " ".join(item.inner_text().split())
        _check(page)
    finally:
        ctx.close()


def test_the_guard_s_notice_reads_well_in_every_look(browser, live_server, look):
    _canary()
    client = redis_client()
    trip_claim(client, "least", 2, TRIP)
    assert canary_guard_rollback(name="least", version=2, client=client)
    ctx = new_context(browser, look, bypass_csp=bool(AXE))
    page = ctx.new_page()
    try:
        sign_in_cookie(ctx, live_server, make_user("sam", "viewer"))
        for path, notice in (
            ("/policies/least/versions/", "#guard-notice"),
            ("/", "#canary-lines .canary-notice"),
        ):
            page.goto(f"{live_server.url}{path}")
            box = page.locator(notice)
            assert box.is_visible()
            words = " ".join(box.inner_text().split())
            assert "The guard rolled back" in words and "100.0% of 20 pods" in words
            _check(page)
    finally:
        ctx.close()


def test_abort_from_the_page_asks_first_then_goes_back_to_stable(
    browser, live_server, context, page
):
    _canary()
    sign_in_cookie(context, live_server, make_user("pat", "publisher"))
    page.goto(f"{live_server.url}/policies/least/versions/")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#canary-abort")
    assert PolicyActivation.objects.filter(role="canary", active=True).exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#canary-abort")
    page.wait_for_url(f"{live_server.url}/policies/least/versions/")
    page.wait_for_selector("#canary-line", state="detached")
    assert not PolicyActivation.objects.filter(role="canary", active=True).exists()
    assert page.console_errors == []
