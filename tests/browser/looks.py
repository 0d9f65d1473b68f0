"""The looks issue 12 asks every feature to work at (1440x900 and 390x844, light and dark), and
the checks each browser test makes at them: nothing scrolls sideways, the focus is drawn."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Look:
    """A viewport and a colour scheme the product must work at."""

    size: str  # "desktop" or "phone"
    scheme: str  # "light" or "dark"

    @property
    def viewport(self) -> dict[str, int]:
        return SIZES[self.size]

    @property
    def phone(self) -> bool:
        return self.size == "phone"

    @property
    def id(self) -> str:
        return f"{self.size}-{self.scheme}"


SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
LOOKS = [Look(size, scheme) for size in SIZES for scheme in ("light", "dark")]

# How long a browser test waits for a condition (an element, a function, a navigation) before
# it fails. A wait ends as soon as its condition holds, so a generous one costs nothing when the
# product works, and a loaded 2-core CI machine can take seconds over a page (issue 22).
WAIT_MS = 30_000


def new_context(browser, look: Look, **options):
    """A context at `look`'s viewport and colour scheme, motion reduced."""
    ctx = browser.new_context(
        viewport=look.viewport, color_scheme=look.scheme, reduced_motion="reduce", **options
    )
    ctx.set_default_timeout(WAIT_MS)
    return ctx


def sign_in_cookie(context, live_server, user) -> None:
    """Signs `user` in by a session cookie (no sign-in page): for tests whose subject is not
    the sign-in itself."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
    )


def fits(page) -> None:
    """Nothing scrolls sideways: the document is no wider than the window (on failure, the
    innermost elements reaching past it are named)."""
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    if width > inner:
        culprits = page.evaluate(
            """(inner) => [...document.querySelectorAll('body *')]
              .filter((el) => el.getBoundingClientRect().right > inner + 1
                && ![...el.children].some((c) => c.getBoundingClientRect().right > inner + 1))
              .slice(0, 5)
              .map((el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : ''))""",
            inner,
        )
        pytest.fail(f"{page.url}: {width} px wide in a {inner} px window; past it: {culprits}")


def tab_to(page, selector: str, *, limit: int = 80) -> None:
    """Presses Tab until `selector` has the focus, and checks the focus is drawn."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement === document.querySelector({selector!r})"):
            focus_visible(page)
            return
    pytest.fail(f"{selector} is not reachable with Tab")


def keyboard_focus(page, selector: str) -> None:
    """Gives `selector` the focus as the keyboard would (from its neighbour, Shift+Tab then
    Tab: a mouse click earlier would otherwise hide the ring), and checks the ring is drawn."""
    page.focus(selector)
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    assert page.evaluate(f"document.activeElement === document.querySelector({selector!r})"), (
        f"{selector}: Shift+Tab then Tab does not come back to it"
    )
    focus_visible(page)


def focus_visible(page) -> None:
    """The focused element draws a focus ring (an outline or a box shadow) and is on screen."""
    ring, box = page.evaluate(
        """() => {
          const el = document.activeElement, s = getComputedStyle(el);
          const r = el.getBoundingClientRect();
          return [s.outlineStyle + ' ' + s.boxShadow, [r.left, r.right, r.width]];
        }"""
    )
    assert ring != "none none", f"{page.url}: the focused element shows no focus ring"
    assert box[2] > 0 and box[0] >= -1 and box[1] <= page.viewport_size["width"] + 1, (
        f"{page.url}: the focused element is off screen: {box}"
    )
