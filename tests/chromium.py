"""One headless Chromium per test session, for every test that drives a browser (tests/browser,
and tests/deploy's first access through NOTES.txt).

Playwright's sync API runs an event loop in the test thread for as long as it is open, and a
second `sync_playwright()` in the same thread is refused ("using Playwright Sync API inside the
asyncio loop"): a test that opened its own once failed whenever tests/browser ran before it. So
the session holds the only one, here. Debian's Chromium, never a downloaded build
(`scripts/bootstrap.sh dev` installs it; `playwright install` is never run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """The session's Chromium (skips when Debian's package is missing)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (scripts/bootstrap.sh dev)")
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is in requirements-dev.txt"
    )
    # Playwright's sync API runs an event loop in this thread; Django would then refuse ORM
    # calls from the tests' teardown (flush) as "async-unsafe". They are not: nothing is async.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
