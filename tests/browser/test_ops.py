"""Browser journeys through the ops pages: signing in (a wrong, then the right password) and out,
the dashboard with a published policy, recorded decisions and live extender numbers (its health
card refreshing by itself), a decision's breakdown with the chosen node highlighted, and the
connect page's copy button. Screenshots (light, 1280x800): artifacts/screenshots/dashboard.png,
decisions.png, decision-detail.png, connect.png.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User

from policies import services
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.policy import compile_policy
from policies.extender.decisions import decision_record
from policies.extender.metrics import MINUTE_KEY, Metrics
from policies.extender.service import ServedPolicy
from policies.models import Decision
from policies.redis import redis_client
from tests.browser.looks import fits, keyboard_focus
from tests.conftest import PASSWORD, make_user

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
SHARED_REDIS = os.environ.get("SCHEDWEB_REDIS_URL", "redis://127.0.0.1:6390/0")
OPS_REDIS = SHARED_REDIS.rsplit("/", 1)[0] + "/11"


@pytest.fixture(autouse=True)
def installation(settings):
    """Demo cluster, a test Redis database of our own, the extender URL the page shows."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    settings.SCHEDWEB_EXTENDER_URL = "http://10.0.0.7:8000/extender/"
    settings.REDIS_URL = OPS_REDIS
    redis_client.cache_clear()
    client = redis_client()

    def clear() -> None:
        keys = list(client.scan_iter(MINUTE_KEY.format(minute="*")))
        if keys:
            client.delete(*keys)

    clear()
    yield client
    clear()
    redis_client.cache_clear()


def sign_in(page, base: str, username: str, *, next_path: str = "/") -> None:
    page.goto(f"{base}{next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


def publish_bin_packing(actor: User):
    document = (EXAMPLES / "bin-packing.yaml").read_text()
    policy = services.policy_create(actor=actor, document=document)
    services.policy_publish(
        actor=actor, policy=policy, message="pack cpu first", revision=policy.draft_revision
    )
    return policy


def record_decisions(pods: list[str], *, runner_up: bool = False) -> list[tuple[Decision, object]]:
    """One prioritize decision per example pod, as the extender records it; the pod is bound to
    the extender's favourite, or with `runner_up` to the best node scoring below it."""
    compiled = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    served = ServedPolicy(name="bin-packing", version=1, compiled=compiled)
    cluster = cluster_load("demo")
    made = []
    now = time.time()
    for i, pod_file in enumerate(pods):
        pod = pod_view_from_text((EXAMPLES / "pods" / pod_file).read_text())
        evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
        item = decision_record(pod, served, "prioritize", evaluation)
        item["at"] = now - 40 * (len(pods) - i)
        services.decisions_store(batch=[item])
        decision = Decision.objects.order_by("-pk").first()
        ranked = sorted(
            (r for r in evaluation.rows() if r.passed), key=lambda r: (-r.total, r.node)
        )
        if runner_up:
            ranked = [r for r in ranked if r.total < ranked[0].total]
        if ranked:
            decision.chosen_node = ranked[0].node
            decision.save(update_fields=["chosen_node"])
        made.append((decision, evaluation))
    return made


def extender_traffic(client) -> None:
    """Five minutes of plausible extender traffic in the per-minute buckets the card reads."""
    metrics = Metrics()
    for i in range(600):
        seconds = 0.0012 if i % 50 else 0.0045  # 2% slower calls set the p99
        metrics.observe(verb="filter", code=200, seconds=seconds, policy="bin-packing", version=1)
        metrics.observe(
            verb="prioritize", code=200, seconds=seconds, policy="bin-packing", version=1
        )
    metrics.observe(verb="filter", code=400, seconds=0.0003, error="bad_request")
    metrics.flush(client)


def test_signing_in_with_a_wrong_then_the_right_password_and_out_again(
    live_server, page, screenshot
):
    make_user("alice", "editor")
    base = live_server.url
    page.goto(f"{base}/decisions/")
    page.wait_for_url(f"{base}/login/?next=/decisions/")
    assert page.locator("#id_username").evaluate("el => el === document.activeElement")

    page.fill("#id_username", "alice")
    page.fill("#id_password", "not-the-password")
    page.click("#login-form button[type=submit]")
    error = page.locator("#login-error")
    error.wait_for()
    assert "Wrong username or password" in error.inner_text()
    assert page.locator("#id_password").get_attribute("aria-invalid") == "true"
    assert page.input_value("#id_username") == "alice"  # kept; the password is not
    screenshot(page, "login-error")

    page.fill("#id_password", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{base}/decisions/")
    menu = page.locator("#user-menu summary")
    assert "alice" in menu.inner_text()
    assert page.locator("#user-menu [data-role-badge]").inner_text().strip() == "editor"

    menu.click()
    page.click("#user-menu button[type=submit]")
    page.wait_for_url(f"{base}/login/")
    assert "You have signed out." in page.locator("#toasts").inner_text()
    page.goto(f"{base}/")
    page.wait_for_url(f"{base}/login/?next=/")
    assert page.console_errors == []


def test_the_dashboard_shows_what_serves_and_refreshes_its_health_card(
    live_server, page, screenshot, installation
):
    publisher = make_user("pat", "publisher")
    publish_bin_packing(publisher)
    decisions = record_decisions(["web.yaml", "batch.yaml", "abc.yaml", "gpu-training.yaml"])
    extender_traffic(installation)
    make_user("vera", "viewer")
    base = live_server.url
    sign_in(page, base, "vera")

    policies = page.locator("#active-policies")
    assert "bin-packing" in policies.inner_text()
    assert policies.locator(".badge--active").inner_text() == "v1"
    assert "published by pat" in policies.inner_text()
    recent = page.locator("#recent-decisions tbody tr")
    assert recent.count() == len(decisions)
    newest = decisions[-1][0]
    assert recent.first.locator("a").inner_text() == f"{newest.pod_namespace}/{newest.pod_name}"
    assert "pat published bin-packing v1" in page.locator("#recent-audit").inner_text()
    # 1200 requests + 1 error over 5 full minutes plus the current part-minute: requests exist,
    # and 2% of them (the slow ones, <= 5 ms bucket) put the p99 in the 5 ms bucket.
    assert "1201 requests in 5 min" in page.locator("#health-rps").inner_text()
    assert page.locator("#health-p99 .stat-value").inner_text().replace("\n", "") == "5.0ms"
    assert " ".join(page.locator("#service-redis").inner_text().split()) == "Redis answers"

    # The health card replaces itself every 5 s (htmx polling): mark it and wait for a new one.
    page.evaluate("document.getElementById('health').dataset.seen = '1'")
    page.wait_for_function(
        "() => document.getElementById('health') && !document.getElementById('health').dataset.seen"
    )
    screenshot(page, "dashboard")
    assert page.console_errors == []


def test_the_decisions_pages_explain_where_a_pod_went(live_server, page, screenshot):
    make_user("vera", "viewer")
    publish_bin_packing(make_user("pat", "publisher"))
    made = record_decisions(
        ["abc.yaml", "gpu-training.yaml", "batch.yaml", "web.yaml"], runner_up=True
    )
    decision, evaluation = made[-1]  # web: bound to the runner-up
    base = live_server.url
    sign_in(page, base, "vera", next_path="/decisions/")
    rows = page.locator("#decisions tbody tr")
    assert rows.count() == len(made)
    screenshot(page, "decisions")

    page.click(f"#decisions a[href='/decisions/{decision.pk}/']")
    page.wait_for_url(f"{base}/decisions/{decision.pk}/")
    chosen = page.locator("#breakdown tbody tr.is-chosen")
    assert chosen.count() == 1
    assert chosen.get_attribute("data-node") == decision.chosen_node
    other = page.locator("#breakdown tbody tr:not(.is-chosen)").first
    background = "el => getComputedStyle(el).backgroundColor"
    assert chosen.evaluate(background) != other.evaluate(background)
    text = page.locator("main").inner_text()
    assert "Why not a node of policy rank 1?" in text and "policy rank" in text  # a column
    assert page.locator("#breakdown tbody tr").count() == evaluation.size
    href = page.locator("#open-playground").get_attribute("href")
    assert href == (
        f"/policies/bin-packing/?version=1&pod={decision.pod_namespace}/{decision.pod_name}"
        f"&decision={decision.pk}"
    )
    screenshot(page, "decision-detail")

    # Sort by total, lowest first: the first row holds the smallest total of the passing nodes.
    total = page.locator("#breakdown thead th[data-key=total] button")
    total.click()  # numbers start high-to-low
    total.click()
    lowest = min(r.total for r in evaluation.rows() if r.passed)
    first = page.locator("#breakdown tbody tr").first.get_attribute("data-node")
    assert next(r for r in evaluation.rows() if r.node == first).total == lowest

    # Filter to the rejected nodes only.
    rejected = sum(1 for r in evaluation.rows() if not r.passed)
    page.fill("input[data-filter-table='#breakdown']", "verdict:reject")
    visible = page.locator("#breakdown tbody tr:not([hidden]):not(.filter-empty)")
    assert visible.count() == rejected
    assert page.console_errors == []


def test_the_connect_page_copies_the_configuration_and_re_renders_options(
    live_server, context, page, screenshot
):
    make_user("vera", "viewer")
    base = live_server.url
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    sign_in(page, base, "vera", next_path="/connect/")

    page.click("#config-profile [data-copy]")
    page.wait_for_function(
        "() => document.querySelector('#config-profile [data-copy]').classList.contains('copied')"
    )
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#config-profile pre").inner_text()
    config = yaml.safe_load(copied)
    assert config["extenders"][0]["urlPrefix"] == "http://10.0.0.7:8000/extender/"
    assert config["extenders"][0]["ignorable"] is False

    # Options re-render with htmx; the selected tab survives the swap, the URL records them.
    page.click("#tab-rbac")
    assert "pods/binding" not in page.locator("#config-rbac pre").inner_text()
    with page.expect_response(lambda r: "/connect/?" in r.url):
        page.check("#id_bind")
    page.wait_for_function(
        "() => document.querySelector('#config-rbac pre').textContent.includes('pods/binding')"
    )
    assert page.locator("#tab-rbac").get_attribute("aria-selected") == "true"
    assert "bind=on" in page.url
    # with bind on, extending the cluster's own profiles is refused (kube-scheduler would send
    # every profile's binds to the extender): the profile tab says so instead of a configuration
    with page.expect_response(lambda r: "/connect/?" in r.url):
        page.uncheck("#id_bind")
    page.click("#tab-profile")
    with page.expect_response(lambda r: "/connect/?" in r.url):
        page.check("#id_ignorable")
    page.wait_for_function(
        "() => document.querySelector('#config-profile pre').textContent.includes('ignorable: true')"
    )

    # A bad weight shows its error at the field and no configuration.
    page.fill("#id_weight", "0")
    with page.expect_response(lambda r: "/connect/?" in r.url and r.status == 422):
        page.press("#id_weight", "Enter")
    page.locator("#connect .field-error").wait_for()
    assert "greater than or equal to 1" in page.locator("#connect .field-error").inner_text()
    page.fill("#id_weight", "2")
    with page.expect_response(lambda r: "/connect/?" in r.url and r.status == 200):
        page.press("#id_weight", "Enter")
    page.locator("#config-profile").wait_for()
    page.click("#tab-profile")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "connect")
    # Chromium logs every 4xx answer as a console error; the 422 above was asked for.
    assert [e for e in page.console_errors if "status of 422" not in e] == []


@pytest.mark.color_scheme("dark")
def test_the_dashboard_says_what_is_down_in_dark_mode_too(live_server, page, screenshot, settings):
    """Redis refusing connections: a sentence per card, the services row marks it, no error."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    redis_client.cache_clear()
    make_user("vera", "viewer")
    sign_in(page, live_server.url, "vera")
    health = page.locator("#health")
    assert (
        "Redis is down: extenders keep serving the last versions they hold" in health.inner_text()
    )
    assert "down (ConnectionError)" in page.locator("#service-redis").inner_text()
    assert "No active policies" in page.locator("#active-policies").inner_text()
    screenshot(page, "dashboard-degraded-dark")
    assert page.console_errors == []


def test_a_user_makes_an_api_token_from_the_account_menu_and_revokes_it(
    live_server, look, page, screenshot
):
    import json
    import urllib.error
    import urllib.request

    make_user("tina", "viewer")
    sign_in(page, live_server.url, "tina")
    page.click("#user-menu summary")
    page.click("#menu-tokens")
    page.fill("#token-name", "nightly-job")
    page.click("#token-create")
    raw = page.inner_text("#new-token-value").strip()
    fits(page)
    screenshot(page, f"api-tokens-{look.id}")

    def me() -> int:
        request = urllib.request.Request(
            f"{live_server.url}/api/v1/me", headers={"Authorization": f"Bearer {raw}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                assert json.loads(response.read())["username"] == "tina"
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert me() == 200
    page.once("dialog", lambda dialog: dialog.dismiss())  # "Revoke ...?" - no: nothing changes
    page.click("#tokens-table button[name=revoke]")
    assert page.locator("#tokens-table .badge--pass").count() == 1
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#tokens-table button[name=revoke]")
    page.wait_for_selector("#tokens-table .badge--neutral")
    fits(page)
    assert me() == 401
    assert page.console_errors == []


def test_the_api_docs_follow_dark_mode_and_lead_back_to_the_app(live_server, look, page):
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info")  # Swagger UI rendered the schema
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    swagger_filter = page.evaluate("getComputedStyle(document.querySelector('.swagger-ui')).filter")
    if look.scheme == "dark":
        assert background == "rgb(14, 17, 22)"
        assert "invert" in swagger_filter
    else:
        assert background == "rgb(255, 255, 255)" or "invert" not in swagger_filter
        assert "invert" not in swagger_filter
    fits(page)
    keyboard_focus(page, "#api-docs-back")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/**")
    assert page.console_errors == []
