"""One headless Chromium per test package, for every test that drives a browser (tests/browser,
and tests/deploy's first access through NOTES.txt).

Playwright's sync API runs an event loop in the test thread for as long as it is open: a second
`sync_playwright()` in that thread is refused ("using Playwright Sync API inside the asyncio
loop"), and so is any `asyncio.run()` (tests/extender's catch-up tests). So the browser lives no
longer than the package of tests that asks for it: tests/browser and tests/deploy each declare a
package-scoped `browser` fixture over `chromium()` in their conftest (a fixture declared here, a
plugin, would be the session's), and no test opens its own. Debian's Chromium, never a downloaded build
(`scripts/bootstrap.sh dev` installs it; `playwright install` is never run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@contextmanager
def chromium() -> Iterator[object]:
    """Playwright driving Debian's Chromium, headless (skips when the package is missing)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (scripts/bootstrap.sh dev)")
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is in requirements-dev.txt"
    )
    # Playwright's sync API runs an event loop in this thread; Django would then refuse ORM
    # calls from the tests' teardown (flush) as "async-unsafe". They are not: nothing is async.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
