"""At a phone's width (390x844) every page keeps its navigation behind a menu button, fits the
screen (no sideways scrolling) and keeps the account menu on screen; in light and dark mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from tests.conftest import PASSWORD, make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
PHONE = {"width": 390, "height": 844}
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


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_fits_a_phone_with_its_menu(browser, live_server, scheme, screenshot):
    user = make_user("nora", "publisher")
    services.policy_create(actor=user, document=(EXAMPLES / "bin-packing.yaml").read_text())
    ctx = browser.new_context(viewport=PHONE, color_scheme=scheme, reduced_motion="reduce")
    ctx.set_default_timeout(10000)
    page = ctx.new_page()
    try:
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", "nora")
        page.fill("#id_password", PASSWORD)
        page.press("#id_password", "Enter")
        page.wait_for_url(f"{live_server.url}/")
        for path in PAGES:
            page.goto(f"{live_server.url}{path}")
            page.wait_for_load_state("load")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{path}: {width} px wide at {PHONE['width']}"
            menu = page.locator("#user-menu summary").bounding_box()
            assert menu and menu["x"] + menu["width"] <= PHONE["width"], (
                f"{path}: account menu off-screen"
            )
            assert not page.is_visible("#main-nav a[href='/cluster/']")
            page.click("[data-nav-toggle]")
            link = page.locator("#main-nav a[href='/cluster/']")
            assert link.is_visible(), f"{path}: the menu does not open"
            box = link.bounding_box()
            assert box["width"] > 100 and box["x"] >= 0
            if path == "/policies/bin-packing/":
                screenshot(page, f"phone-playground-menu-{scheme}")
            page.keyboard.press("Escape")
            assert not link.is_visible()
        page.goto(f"{live_server.url}/")
        page.click("[data-nav-toggle]")
        page.click("#main-nav a[href='/cluster/']")
        page.wait_for_url(f"{live_server.url}/cluster/")
    finally:
        ctx.close()
