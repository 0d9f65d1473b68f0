"""Browser test harness: Playwright driving Debian's Chromium headless against pytest-django's
live server on 127.0.0.1.

Never run `playwright install`: browser downloads are blocked here, and the Debian package is the
browser we test with (`scripts/bootstrap.sh dev` installs it). One browser (tests/chromium.py), a fresh
context (cookies, storage) per test at 1280x800, or, for a test that asks for the `look`
fixture, once per look: 1440x900 and 390x844, light and dark (issue 12's matrix). `page.console_errors` collects console errors
and uncaught exceptions; `screenshot(page, name)` writes artifacts/screenshots/<name>.png.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.browser.looks import LOOKS, WAIT_MS, Look, new_context
from tests.chromium import chromium

VIEWPORT = {"width": 1280, "height": 800}
LOOPBACK = "127.0.0.1"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in requirements-dev.txt"
)
playwright_api.expect.set_options(timeout=WAIT_MS)  # expect() waits as long as the rest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests that drive the browser get the `browser` marker (`pytest -m "not browser"` skips them).
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def live_server(request: pytest.FixtureRequest):
    """pytest-django's live server, forced onto 127.0.0.1 (its default, "localhost", may
    resolve elsewhere); an address on another host is refused, never used."""
    from pytest_django.live_server_helper import LiveServer

    addr = (
        request.config.getvalue("liveserver")
        or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS")
        or LOOPBACK
    )
    host = addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr
    if host != LOOPBACK:
        raise pytest.UsageError(
            f"browser tests bind the live server to {LOOPBACK} only, not {addr!r} "
            "(--liveserver / DJANGO_LIVE_TEST_SERVER_ADDRESS)"
        )
    server = LiveServer(addr)
    bound = server.thread.httpd.server_address[0]
    if bound != LOOPBACK:
        server.stop()
        raise RuntimeError(f"live server bound to {bound}, expected {LOOPBACK}")
    yield server
    server.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    """One Chromium for this package's tests, closed before the next package (tests/chromium.py)."""
    with chromium() as opened:
        yield opened


@pytest.fixture
def debug_on(settings) -> None:
    """The component gallery exists only with DEBUG on (pytest-django turns it off)."""
    settings.DEBUG = True


@pytest.fixture(params=LOOKS, ids=lambda look: look.id)
def look(request: pytest.FixtureRequest) -> Look:
    """Each of the four looks in turn; `context` (and so `page`) takes it on."""
    return request.param


@pytest.fixture
def context(browser, request: pytest.FixtureRequest):
    """A fresh browser context per test; `@pytest.mark.color_scheme("dark")` emulates dark mode;
    a test asking for `look` gets its viewport and scheme."""
    if "look" in request.fixturenames:
        ctx = new_context(browser, request.getfixturevalue("look"))
        yield ctx
        ctx.close()
        return
    marker = request.node.get_closest_marker("color_scheme")
    scheme = marker.args[0] if marker else "light"
    ctx = browser.new_context(viewport=VIEWPORT, color_scheme=scheme, reduced_motion="reduce")
    ctx.set_default_timeout(WAIT_MS)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    """A page whose console errors and uncaught exceptions are kept in `page.console_errors`."""
    pg = context.new_page()
    errors: list[str] = []

    def on_console(msg) -> None:
        if msg.type != "error":
            return
        text = f"console.{msg.type}: {msg.text}"
        # hx-sync="this:replace" aborts a preview still in flight when a newer one starts (the
        # playground's design), and htmx logs every abort as two console errors, afterRequest
        # then sendAbort. Whether a preview is still in flight depends on the machine's speed,
        # so an abort is not an error; a failed request (sendError, timeout) still is.
        if msg.text.startswith("htmx:sendAbort"):
            for k in range(len(errors) - 1, -1, -1):
                if errors[k].startswith("console.error: htmx:afterRequest"):
                    del errors[k]
                    break
            return
        errors.append(text)

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    pg.console_errors = errors
    return pg


@pytest.fixture
def screenshot() -> Callable[..., Path]:
    """screenshot(page, name, full_page=False, selector=None) -> the PNG's path under
    artifacts/screenshots/; with a selector, only that element is captured."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str, *, full_page: bool = False, selector: str | None = None) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        if selector:
            page.locator(selector).screenshot(path=str(path), animations="disabled")
        else:
            page.screenshot(path=str(path), full_page=full_page, animations="disabled")
        return path

    return take


@pytest.fixture
def gallery(live_server, debug_on, page):
    """The component gallery, loaded, with its scripts initialised."""
    page.goto(f"{live_server.url}/_dev/components/")
    page.wait_for_function("window.schedweb && window.CelEditor && window.htmx")
    return page


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "color_scheme(name): emulate prefers-color-scheme for the browser context"
    )
