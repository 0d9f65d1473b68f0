"""The Connect page on a phone (390x844, touch): each output tab can be tapped (the options card
above them once stayed stuck on screen over them), and the second scheduler's manifests, what a
pod in the cluster runs, never call a loopback URL by default (`make run`'s
SCHEDWEB_EXTENDER_URL is https://127.0.0.1:8443/extender/): they name the chart's Service and
the page says why; the text follows the namespace typed in."""

from __future__ import annotations

import re

import pytest
import yaml

from policies.schedulerconfig import IN_CLUSTER_EXTENDER_URL
from tests.browser.looks import Look, fits, new_context, sign_in_cookie
from tests.conftest import make_user

PHONE = Look("phone", "light")
TABS = ("resource", "manifests", "webhook", "rbac", "profile")
LOOPBACK = re.compile(r"127\.0\.0\.1|localhost|\[::1\]")


@pytest.fixture(autouse=True)
def installation(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    settings.SCHEDWEB_EXTENDER_URL = "https://127.0.0.1:8443/extender/"  # make run's
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CA = "/srv/tls/ca.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CERT = "/srv/tls/client.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_KEY = "/srv/tls/client.key"


@pytest.fixture
def phone(browser, live_server):
    ctx = new_context(browser, PHONE, has_touch=True, is_mobile=True)
    sign_in_cookie(ctx, live_server, make_user("tina", "viewer"))
    page = ctx.new_page()
    yield page
    ctx.close()


def _hit(page, selector: str) -> bool:
    """True when the whole element is on screen and its centre is the element itself (nothing
    covers it, no row hides it past the screen's edge)."""
    return page.evaluate(
        """(sel) => {
          const el = document.querySelector(sel), r = el.getBoundingClientRect();
          if (r.left < 0 || r.right > window.innerWidth) return false;
          const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
          return at === el || el.contains(at);
        }""",
        selector,
    )


def test_every_output_tab_can_be_tapped_at_a_phones_width(phone, live_server, screenshot):
    page = phone
    page.goto(f"{live_server.url}/connect/")
    fits(page)
    for tab in TABS:
        button = f"#tab-{tab}"
        # Scrolled so that the tab row sits at the top of the screen, where a stuck card
        # would lie over it; tap() waits until the point it taps receives the touch.
        page.evaluate(
            "(sel) => window.scrollTo(0, document.querySelector(sel).getBoundingClientRect().top"
            " + window.scrollY - 80)",
            button,
        )
        assert _hit(page, button), f"{button} is covered"
        page.tap(button)
        assert page.locator(button).get_attribute("aria-selected") == "true"
        assert page.locator(f"#panel-{tab}").is_visible()
        hidden = [t for t in TABS if t != tab and page.locator(f"#panel-{t}").is_visible()]
        assert hidden == []
    screenshot(page, "connect-phone")


def test_the_in_cluster_manifests_call_no_loopback_url_and_follow_the_namespace(phone, live_server):
    page = phone
    page.goto(f"{live_server.url}/connect/?tab=manifests")
    manifests = page.locator("#config-manifests pre").inner_text()
    command = page.locator("#panel-manifests .code-block pre").last.inner_text()
    assert not LOOPBACK.search(manifests) and not LOOPBACK.search(command)
    [config_map] = [d for d in yaml.safe_load_all(manifests) if d and d["kind"] == "ConfigMap"]
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    assert config["extenders"][0]["urlPrefix"] == IN_CLUSTER_EXTENDER_URL
    assert f"--url {IN_CLUSTER_EXTENDER_URL}" in command
    warning = page.locator("#manifests-loopback")
    assert warning.is_visible() and "https://127.0.0.1:8443/extender/" in warning.inner_text()
    assert "kube-system" in page.locator("#manifests-lead").inner_text()

    # The namespace typed in: the manifests, the text above them and the command follow it.
    page.fill("#id_namespace", "ops")
    with page.expect_response(lambda r: "/connect/?" in r.url and r.status == 200):
        page.press("#id_namespace", "Enter")
    page.wait_for_function(
        "() => document.querySelector('#manifests-lead').textContent.includes('ops')"
    )
    lead = page.locator("#manifests-lead").inner_text()
    assert "kube-system" not in lead and "in ops with its own lease" in lead
    shown = [d for d in yaml.safe_load_all(page.locator("#config-manifests pre").inner_text()) if d]
    assert {d["metadata"].get("namespace") for d in shown if d["kind"] != "ClusterRoleBinding"} == {
        "ops"
    }
    assert "--namespace ops" in page.locator("#panel-manifests .code-block pre").last.inner_text()
