"""The component gallery in a real browser: it renders cleanly, tables sort and filter, the
helpers work, dark mode uses the dark palette with readable verdict colors, and screenshots
of both palettes land in artifacts/screenshots/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from policies.ui.gallery import sample_nodes

# Dark palette tokens as app.css declares them (light-dark(light, dark)).
LIGHT_BG = "rgb(245, 246, 248)"  # #f5f6f8
DARK_BG = "rgb(14, 17, 22)"  # #0e1116


def _column(page, *, table: str, key: str) -> list[str]:
    """Visible cell texts of the column whose header has data-key=`key`."""
    return page.evaluate(
        """([table, key]) => {
          const t = document.querySelector(table);
          const col = [...t.tHead.rows[0].cells].findIndex((th) => th.dataset.key === key);
          return [...t.tBodies[0].rows].filter((r) => !r.hidden && !r.classList.contains("filter-empty"))
            .map((r) => (r.cells[col].dataset.sortValue ?? r.cells[col].textContent).trim());
        }""",
        [table, key],
    )


def _luminance(rgb: str) -> float:
    # WCAG 2 relative luminance of "rgb(r, g, b)".
    channels = []
    for v in (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3]):
        channels.append(v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4)
    r, g, b = channels
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(fg: str, bg: str) -> float:
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_gallery_renders_without_console_errors(gallery):
    gallery.get_by_role("tab", name="CLI").click()
    gallery.get_by_role("button", name="Info toast").click()
    gallery.locator("#toasts .toast--info").wait_for()  # the click has been handled
    assert gallery.console_errors == []
    assert gallery.locator("nav.nav a").all_inner_texts() == [
        "Dashboard",
        "Policies",
        "Cluster",
        "Decisions",
        "Connect",
        "API docs",
    ]
    assert gallery.locator(".cel-editor").count() == 1


def test_the_csrf_token_on_the_body_is_what_django_accepts(gallery):
    status = """async (withToken) => {
      const headers = withToken ? JSON.parse(document.body.getAttribute("hx-headers")) : {};
      const body = new URLSearchParams({document: "name: x"});
      const r = await fetch("/_dev/components/preview", {method: "POST", headers, body});
      return r.status;
    }"""
    assert gallery.evaluate(status, False) == 403  # Django's CSRF check is on
    assert gallery.evaluate(status, True) in (200, 422)  # the body's hx-headers pass it


def test_a_numeric_column_sorts_by_value_with_empty_cells_last(gallery):
    passing = [n["pack"] for n in sample_nodes() if n["verdict"] == "pass"]
    empties = sum(n["verdict"] != "pass" for n in sample_nodes())
    header = gallery.locator("#nodes th[data-key=pack] button")

    header.click()  # numbers start high-to-low
    values = _column(gallery, table="#nodes", key="pack")
    assert values == [str(v) for v in sorted(passing, reverse=True)] + [""] * empties
    assert gallery.locator("#nodes th[data-key=pack]").get_attribute("aria-sort") == "descending"

    header.click()
    values = _column(gallery, table="#nodes", key="pack")
    # Numerically 7 < 18 < 20; as text "7" would sort after "56".
    assert values == [str(v) for v in sorted(passing)] + [""] * empties
    assert values.index("7") < values.index("56")
    assert gallery.locator("#nodes th[data-key=pack]").get_attribute("aria-sort") == "ascending"


def test_a_header_sorts_from_the_keyboard(gallery):
    gallery.locator("#nodes th[data-key=node] button").focus()
    gallery.keyboard.press("Enter")  # text starts A-Z
    names = _column(gallery, table="#nodes", key="node")
    assert names == sorted(names)
    gallery.keyboard.press("Space")
    assert _column(gallery, table="#nodes", key="node") == sorted(names, reverse=True)


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        # every term must match somewhere in the row
        ("reject", lambda n: n["verdict"] == "reject"),
        ("gpu pass", lambda n: "gpu" in n["name"] and n["verdict"] == "pass"),
        # column:value looks in that column only ("cpu" also appears in rule names)
        ("node:cpu", lambda n: "cpu" in n["name"]),
        ("verdict:error", lambda n: n["verdict"] == "error"),
    ],
)
def test_the_filter_input_hides_rows_that_do_not_match(gallery, query, wanted):
    expected = [n["name"] for n in sample_nodes() if wanted(n)]
    gallery.get_by_placeholder("Filter nodes").fill(query)
    assert _column(gallery, table="#nodes", key="node") == expected
    assert gallery.locator("#nodes-count").inner_text() == f"{len(expected)} of 12 rows"


def test_a_filter_matching_nothing_says_so_and_clearing_it_shows_every_row(gallery):
    box = gallery.get_by_placeholder("Filter nodes")
    box.fill("no-such-node")
    assert gallery.locator("#nodes .filter-empty").inner_text() == "No rows match “no-such-node”."
    box.fill("")
    assert len(_column(gallery, table="#nodes", key="node")) == 12
    assert gallery.locator("#nodes .filter-empty").count() == 0


def test_slash_focuses_the_table_filter(gallery):
    gallery.locator("h1").click()
    gallery.keyboard.press("/")
    assert gallery.evaluate("document.activeElement.dataset.filterTable") == "#nodes"


def test_the_copy_button_puts_the_code_on_the_clipboard(gallery):
    gallery.context.grant_permissions(["clipboard-read", "clipboard-write"])
    button = gallery.get_by_role("button", name="Copy scheduler-config.yaml")
    button.click()
    expect(button).to_have_text("Copied")  # the clipboard write is asynchronous
    copied = gallery.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("apiVersion: kubescheduler.config.k8s.io/v1\n")
    assert "nodeCacheCapable: true" in copied


def test_toasts_appear_and_success_toasts_go_away_by_themselves(gallery):
    # the page's timers run on a clock the test moves (Playwright's): "after 4 s" is exact
    gallery.clock.install()
    gallery.clock.pause_at(gallery.evaluate("Date.now()") + 1000)
    gallery.get_by_role("button", name="Error toast").click()
    gallery.get_by_role("button", name="Success toast").click()
    error = gallery.locator(".toast--error")
    success = gallery.locator(".toast--success")
    assert error.get_attribute("role") == "alert"
    assert "Publish failed" in error.inner_text()
    gallery.clock.run_for(4000 - 1)
    assert success.is_visible()
    gallery.clock.run_for(1 + 200)  # 4 s shown, then 200 ms leaving
    assert success.count() == 0
    gallery.clock.run_for(60_000)
    assert error.is_visible()  # errors stay until dismissed
    error.get_by_role("button", name="Dismiss").click()
    gallery.clock.run_for(200)
    assert error.count() == 0


def test_relative_times_read_like_a_person_would_say_them(gallery):
    texts = gallery.locator("#relative-times time").all_inner_texts()
    assert re.fullmatch(r"\d+ s ago", texts[0])  # 3 s ago, give or take the page load
    assert texts[1:] == ["42 min ago", "5 h ago", "12 d ago"]


def test_tabs_switch_panels_with_arrow_keys(gallery):
    first = gallery.get_by_role("tab", name="Scheduler config")
    first.focus()
    gallery.keyboard.press("ArrowRight")
    assert gallery.get_by_role("tab", name="CLI").get_attribute("aria-selected") == "true"
    assert gallery.locator("#panel-cli").is_visible()
    assert gallery.locator("#panel-config").is_hidden()


def test_the_theme_button_pins_a_palette_that_survives_a_reload(gallery):
    toggle = gallery.locator("[data-theme-toggle]")
    background = "getComputedStyle(document.body).backgroundColor"
    assert gallery.evaluate(background) == LIGHT_BG
    toggle.click()  # auto -> light
    toggle.click()  # light -> dark
    assert toggle.get_attribute("aria-label") == "Color theme: dark"
    # waits out the palette's colour transition rather than sampling it half-way
    gallery.wait_for_function(f"{background} === {DARK_BG!r}")
    gallery.reload()
    assert gallery.evaluate("document.documentElement.dataset.theme") == "dark"
    gallery.wait_for_function(f"{background} === {DARK_BG!r}")


@pytest.mark.color_scheme("dark")
def test_dark_mode_renders_with_the_dark_palette(gallery):
    assert gallery.evaluate("getComputedStyle(document.body).backgroundColor") == DARK_BG
    surface = gallery.evaluate("getComputedStyle(document.querySelector('.card')).backgroundColor")
    assert surface == "rgb(22, 27, 34)"  # --surface dark: #161b22
    assert gallery.console_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_verdict_badges_and_code_tokens_are_readable_in_both_palettes(
    browser, live_server, settings, scheme
):
    settings.DEBUG = True
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/_dev/components/")
    pairs = page.evaluate(
        """() => {
          const out = [];
          const style = (el) => getComputedStyle(el);
          for (const b of document.querySelectorAll("#verdict-badges .badge, .badge--active, .badge--stale")) {
            out.push([b.textContent.trim(), style(b).color, style(b).backgroundColor]);
          }
          const editorBg = style(document.querySelector(".cel-editor")).backgroundColor;
          for (const cls of ["tok-key", "tok-str", "tok-num", "tok-comment", "tok-root", "tok-field",
                             "tok-func", "tok-macro", "tok-op", "tok-const"]) {
            const t = document.querySelector(".ce-highlight ." + cls);
            if (t) out.push([cls, style(t).color, editorBg]);
          }
          return out;
        }"""
    )
    ctx.close()
    assert len(pairs) >= 16
    # WCAG AA for normal text: 4.5:1.
    low = [(name, round(_contrast(fg, bg), 2)) for name, fg, bg in pairs if _contrast(fg, bg) < 4.5]
    assert low == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_of_the_gallery(browser, live_server, settings, screenshot, scheme):
    settings.DEBUG = True
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/_dev/components/")
    page.wait_for_function("window.CelEditor && document.querySelector('.cel-editor')")
    shots = [
        screenshot(page, f"components-{scheme}"),
        screenshot(page, f"components-{scheme}-full", full_page=True),
        screenshot(page, f"playground-{scheme}", selector="#playground"),
    ]
    ctx.close()
    for path in shots:
        assert path.stat().st_size > 20_000, path  # a rendered page, not a blank one
