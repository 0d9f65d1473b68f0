"""The versions page's Backtest section in a real browser, at 1440x900 and 390x844, light and
dark (the `look` fixture): a draft that rejects the node most recorded pods were bound to lists
them as moved first, each opening to both breakdowns, and nothing scrolls sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies import services
from tests.backtest.conftest import BIN_PACKING, RECORDED_PODS, record, with_filter
from tests.browser.looks import fits, sign_in_cookie
from tests.conftest import make_user
from tests.redisdb import redis_database


@pytest.fixture
def stack(settings, transactional_db):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    with redis_database(settings, 15) as client:
        yield client


def test_the_backtest_lists_the_moved_pods_first_and_opens_each_to_both_breakdowns(
    stack, live_server, look, context, page, screenshot
):
    editor = make_user("bt-browser", "publisher")
    published = services.policy_create(actor=editor, document=BIN_PACKING)
    services.policy_publish(actor=editor, policy=published, message="v1", revision=1)
    published.refresh_from_db()
    recorded = {
        f"uid-{i}": record(pod_file, f"uid-{i}", at=1_700_000_000 + i)
        for i, pod_file in enumerate(RECORDED_PODS)
    }
    busiest = max(set(recorded.values()), key=list(recorded.values()).count)
    moved = sum(1 for node in recorded.values() if node == busiest)
    services.policy_update_draft(
        actor=editor,
        policy=published,
        document=with_filter(BIN_PACKING, f'node.name != "{busiest}"'),
        if_match=published.etag,
    )
    sign_in_cookie(context, live_server, editor)
    page.goto(f"{live_server.url}/policies/bin-packing/versions/")
    page.click("#backtest-button")
    answer = page.locator("#backtest-answer[data-status='done']")
    expect(answer).to_be_visible()
    expect(page.locator(".pg-backtest-counts li[data-class='moved'] .badge")).to_have_text(
        str(moved)
    )
    rows = page.locator("#backtest-rows > li")
    expect(rows.first).to_have_attribute("data-class", "moved")
    assert page.locator("#backtest-rows > li[data-class='moved']").count() == moved
    first = rows.first
    first.locator("summary").click()
    happened = first.get_by_role("region", name="What happened")
    expect(happened).to_be_visible()
    expect(happened).to_contain_text(f"Bound to {busiest}.")
    now = first.get_by_role("region", name="What the draft does now")
    pick = now.locator("p").first
    expect(pick).to_contain_text("kube-scheduler picks")
    assert busiest not in pick.inner_text()
    fits(page)
    screenshot(page, f"backtest-{look.id}", selector="#backtest")
