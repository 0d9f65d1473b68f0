"""Keyboard only: a publisher signs in, reviews and publishes a policy, and the focus stays
visible on the way - no mouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from policies.models import PolicyVersion
from tests.conftest import PASSWORD, make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def _tab_to(page, selector: str, *, limit: int = 60) -> None:
    """Presses Tab until `selector` has the focus (and checks the focus is drawn)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement === document.querySelector({selector!r})"):
            outline = page.evaluate(
                "getComputedStyle(document.activeElement).outlineStyle + ' ' + "
                "getComputedStyle(document.activeElement).boxShadow"
            )
            assert outline != "none none", f"{selector} has the focus but shows no focus ring"
            return
    pytest.fail(f"{selector} is not reachable with Tab")


def test_a_publisher_publishes_with_the_keyboard_only(live_server, page):
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

    _tab_to(page, "#id_message")
    page.keyboard.type("First cut, by keyboard")
    _tab_to(page, "#publish-check-button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#publish-confirm-button")
    _tab_to(page, "#publish-confirm-button")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=v1 active")
    version = PolicyVersion.objects.get()
    assert (version.number, version.message) == (1, "First cut, by keyboard")
    assert page.console_errors == []
