"""At a phone's width (390x844) every page keeps its navigation behind a menu button, fits the
screen (no sideways scrolling) and keeps the account menu on screen; at a desktop's (1440x900)
the navigation shows inline and nothing scrolls sideways either; in light and dark mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from tests.browser.looks import fits, keyboard_focus, sign_in_cookie
from tests.conftest import make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
PAGES = [
    "/",
    "/policies/",
    "/policies/bin-packing/",
    "/policies/bin-packing/versions/",
    "/cluster/",
    "/decisions/",
    "/connect/",
    "/account/tokens/",
]


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def test_every_page_fits_with_its_navigation(browser, live_server, look, context, page, screenshot):
    user = make_user("nora", "publisher")
    services.policy_create(actor=user, document=(EXAMPLES / "bin-packing.yaml").read_text())
    sign_in_cookie(context, live_server, user)
    width = look.viewport["width"]
    for path in PAGES:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        fits(page)
        menu = page.locator("#user-menu summary").bounding_box()
        assert menu and menu["x"] + menu["width"] <= width, f"{path}: account menu off-screen"
        link = page.locator("#main-nav a[href='/cluster/']")
        if not look.phone:
            assert link.is_visible() and not page.is_visible("[data-nav-toggle]")
            continue
        assert not link.is_visible()
        keyboard_focus(page, "[data-nav-toggle]")
        page.keyboard.press("Enter")  # the menu button works from the keyboard
        assert link.is_visible(), f"{path}: the menu does not open"
        box = link.bounding_box()
        assert box["width"] > 100 and box["x"] >= 0
        fits(page)
        if path == "/policies/bin-packing/":
            screenshot(page, f"phone-playground-menu-{look.scheme}")
        page.keyboard.press("Escape")
        assert not link.is_visible()
    if look.phone:
        page.goto(f"{live_server.url}/")
        page.click("[data-nav-toggle]")
        page.click("#main-nav a[href='/cluster/']")
    else:
        page.click("#main-nav a[href='/cluster/']")
    page.wait_for_url(f"{live_server.url}/cluster/")
    assert page.console_errors == []
