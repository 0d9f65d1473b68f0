"""Keyboard only: a publisher signs in, reviews and publishes a policy, and the focus stays
visible on the way - no mouse; at 1440x900 and 390x844, light and dark."""

from __future__ import annotations

from pathlib import Path

from policies import services
from policies.models import PolicyVersion
from tests.browser.looks import fits, tab_to
from tests.conftest import PASSWORD, make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def test_a_publisher_publishes_with_the_keyboard_only(live_server, look, page, settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    make_user("kim", "publisher")
    services.policy_create(
        actor=make_user("ed", "editor"),
        document=(EXAMPLES / "seed-003-name-length.yaml").read_text(),
    )
    page.goto(f"{live_server.url}/login/?next=/policies/seed-003-name-length/versions/")
    page.keyboard.type("kim")  # the username field has the focus on arrival
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/policies/seed-003-name-length/versions/")
    fits(page)

    tab_to(page, "#id_message")
    page.keyboard.type("First cut, by keyboard")
    tab_to(page, "#publish-check-button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#publish-confirm-button")
    fits(page)
    tab_to(page, "#publish-confirm-button")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=v1 active")
    fits(page)
    version = PolicyVersion.objects.get()
    assert (version.number, version.message) == (1, "First cut, by keyboard")
    assert page.console_errors == []
