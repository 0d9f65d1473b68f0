"""The ops pages: sign-in and sign-out, the dashboard (and its polled health card), decisions and
the connect page. Status codes, login redirects, role refusals, htmx fragments, and sources that
are down (Redis, the database, the cluster) becoming sentences instead of 500s.

Decisions are recorded the way the extender records them (policies.extender.decisions.decision_record over
a real evaluation of the demo cluster); expected values come from the engine's own rows, never
from the view code.
"""

from __future__ import annotations

import html
import io
import json
import os
import shlex
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import OperationalError

from policies import services
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.policy import compile_policy
from policies.extender.decisions import decision_record
from policies.extender.metrics import MINUTE_KEY, Metrics
from policies.extender.service import ServedPolicy
from policies.models import AuditEvent, Decision
from policies.redis import redis_client
from policies.schedulerconfig import IN_CLUSTER_EXTENDER_URL
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
SHARED_REDIS = os.environ.get("SCHEDWEB_REDIS_URL", "redis://127.0.0.1:6390/0")
OPS_REDIS = SHARED_REDIS.rsplit("/", 1)[0] + "/11"  # a database of its own: metric keys are global
PAGES = ["/", "/dashboard/health", "/decisions/", "/decisions/1/", "/connect/"]


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def demo_cluster(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    settings.SCHEDWEB_EXTENDER_URL = "http://10.0.0.7:8000/extender/"


@pytest.fixture
def ops_redis(settings):
    """The process's Redis client on a database of these tests, metric buckets cleared."""
    settings.REDIS_URL = OPS_REDIS
    redis_client.cache_clear()
    client = redis_client()
    try:
        client.ping()
    except Exception:
        pytest.fail(f"no Redis at {OPS_REDIS}: run `scripts/services.sh redis 6390`", pytrace=False)

    def clear() -> None:
        keys = list(client.scan_iter(MINUTE_KEY.format(minute="*")))
        if keys:
            client.delete(*keys)

    clear()
    yield client
    clear()
    redis_client.cache_clear()


@pytest.fixture
def redis_down(settings):
    """Redis pointed at a loopback port nobody listens on (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    redis_client.cache_clear()
    yield
    redis_client.cache_clear()


@pytest.fixture
def publisher() -> User:
    return make_user("pat", "publisher")


@pytest.fixture
def published(publisher):
    """bin-packing, published as v1 by pat (its document targets schedulerName schedweb)."""
    document = (EXAMPLES / "bin-packing.yaml").read_text()
    policy = services.policy_create(actor=publisher, document=document)
    services.policy_publish(
        actor=publisher, policy=policy, message="first cut", revision=policy.draft_revision
    )
    return policy


def record_decision(
    *,
    pod_file: str = "web.yaml",
    verb: str = "prioritize",
    chosen: str = "",
    at: float | None = None,
):
    """A decision as the extender stores it: bin-packing v1 over the demo cluster.
    Returns (Decision, the engine's Evaluation)."""
    compiled = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    cluster = cluster_load("demo")
    pod = pod_view_from_text((EXAMPLES / "pods" / pod_file).read_text())
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    served = ServedPolicy(name="bin-packing", version=1, compiled=compiled)
    item = decision_record(pod, served, verb, evaluation)
    if at is not None:
        item["at"] = at
    services.decisions_store(batch=[item])
    decision = Decision.objects.order_by("-pk").first()
    if chosen:
        decision.chosen_node = chosen
        decision.save(update_fields=["chosen_node"])
    return decision, evaluation


# --- sign-in, sign-out, access --------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES)
def test_every_page_sends_an_anonymous_visitor_to_sign_in(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_an_htmx_poll_without_a_session_redirects_the_whole_page(client):
    response = client.get(
        "/dashboard/health",
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/?x=1"},
    )
    assert response.status_code == 204
    assert response["HX-Redirect"] == "/login/?next=%2F%3Fx%3D1"


def test_the_sign_in_page_renders_a_form_with_labels(client):
    response = client.get("/login/?next=/decisions/")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="login-form"' in body
    assert '<label for="id_username">' in body and '<label for="id_password">' in body
    assert 'value="/decisions/"' in body


def test_a_wrong_password_gets_a_clear_error_and_no_session(client):
    make_user("ann", "viewer", password="right-password-1")
    response = client.post("/login/", {"username": "ann", "password": "wrong"})
    assert response.status_code == 200
    assert "Wrong username or password" in response.content.decode()
    assert client.get("/").status_code == 302


def test_the_right_password_goes_to_next(client):
    make_user("ann", "viewer", password="right-password-1")
    response = client.post(
        "/login/", {"username": "ann", "password": "right-password-1", "next": "/decisions/"}
    )
    assert (response.status_code, response["Location"]) == (302, "/decisions/")
    assert client.get("/").status_code == 200


def test_a_next_on_another_host_is_ignored(client):
    make_user("ann", "viewer", password="right-password-1")
    response = client.post(
        "/login/",
        {"username": "ann", "password": "right-password-1", "next": "https://evil.example/"},
    )
    assert response["Location"] == "/"


def test_signing_out_takes_a_post_and_says_so(client):
    client.force_login(make_user("ann", "viewer"))
    confirm = client.get("/logout/")
    assert confirm.status_code == 200 and 'action="/logout/"' in confirm.content.decode()
    assert client.get("/").status_code == 200  # a GET signs nobody out
    response = client.post("/logout/", follow=True)
    assert response.redirect_chain[0] == ("/login/", 302)
    assert "You have signed out." in response.content.decode()
    assert client.get("/").status_code == 302


@pytest.mark.parametrize("role", ["viewer", "editor", "publisher", "admin"])
def test_the_user_menu_shows_the_username_and_the_role_badge(role):
    body = client_for(role, username=f"{role}-jo").get("/").content.decode()
    assert f'<span class="nowrap">{role}-jo</span>' in body
    badge = body.split("data-role-badge>", 1)[1].split("</span>", 1)[0]
    assert f">{role}" in badge
    assert 'action="/logout/"' in body


@pytest.mark.parametrize("url", ["/", "/decisions/", "/connect/"])
def test_a_user_without_a_role_is_refused_with_a_reason(url):
    response = client_for(None).get(url)
    assert response.status_code == 403
    body = response.content.decode()
    assert "needs the viewer role" in body and "no role" in body


@pytest.mark.parametrize("url", ["/", "/decisions/", "/connect/", "/dashboard/health"])
def test_the_read_only_pages_refuse_a_post(url):
    client = client_for("admin")
    client.handler.enforce_csrf_checks = False
    assert client.post(url).status_code == 405


# --- dashboard ------------------------------------------------------------------------------------


def test_the_dashboard_lists_the_active_policy_with_its_version_names_and_publisher(published):
    body = client_for("viewer").get("/").content.decode()
    section = body.split('id="active-policies"', 1)[1].split("</section>", 1)[0]
    assert 'href="/policies/bin-packing/"' in section
    assert ">v1<" in section
    assert '<code class="ops-chip">schedweb</code>' in section
    assert "published by <strong>pat</strong>" in section


def test_a_rollback_shows_who_rolled_back(published, publisher):
    services.policy_update_draft(
        actor=publisher,
        policy=published,
        document=published.draft.replace("weight: 2", "weight: 3"),
        if_match=published.etag,
    )
    published.refresh_from_db()
    services.policy_publish(
        actor=publisher, policy=published, message="heavier cpu", revision=published.draft_revision
    )
    services.policy_rollback(actor=make_user("rob", "publisher"), policy=published, number=1)
    section = client_for("viewer").get("/").content.decode().split('id="active-policies"', 1)[1]
    assert ">v1<" in section.split("</section>", 1)[0]
    assert "rolled back by <strong>rob</strong>" in section


def test_the_dashboard_shows_the_ten_newest_decisions_and_audit_events(published, publisher):
    now = time.time()
    decisions = [record_decision(at=now - 60 * i)[0] for i in range(12)]  # i=0 is the newest
    body = client_for("viewer").get("/").content.decode()
    recent = body.split('id="recent-decisions"', 1)[1].split("</section>", 1)[0]
    shown = [d for d in decisions if f'href="/decisions/{d.pk}/"' in recent]
    assert shown == decisions[:10]
    audit = body.split('id="recent-audit"', 1)[1].split("</section>", 1)[0]
    # pat created then published bin-packing: both are in the feed, newest first
    assert audit.index('data-action="policy.publish"') < audit.index('data-action="policy.create"')
    assert "<strong>pat</strong> published" in audit and "first cut" in audit


def test_recent_changes_name_every_audited_action_in_words(published):
    import re

    from policies.ui.ops_views import _AUDIT_VERBS

    root = Path(__file__).resolve().parents[2] / "policies"
    sources = "\n".join(p.read_text() for p in root.rglob("*.py"))
    audited = set(re.findall(r'action="([a-z_]+\.[a-z_]+)"', sources))
    assert "testcase.accept" in audited
    assert audited <= set(_AUDIT_VERBS), sorted(audited - set(_AUDIT_VERBS))
    AuditEvent.objects.create(
        actor_name="ana", action="testcase.accept", policy_name="bin-packing", detail={"name": "c"}
    )
    AuditEvent.objects.create(actor_name="ana", action="widget.made_up", policy_name="bin-packing")
    feed = client_for("viewer").get("/").content.decode().split('id="recent-audit"', 1)[1]
    feed = feed.split("</section>", 1)[0]
    text = re.sub(r"<[^>]+>", " ", feed)  # what a reader sees, not the data-action attributes
    assert "ana</strong> accepted new results for a test case of" in feed
    assert "testcase.accept" not in text and "widget made up" in text


def test_the_dashboard_without_policies_or_decisions_says_what_to_do():
    body = client_for("viewer").get("/").content.decode()
    assert "No active policies" in body
    assert "No decisions yet" in body
    assert "Nothing has changed yet" in body


def test_redis_down_is_a_sentence_on_the_dashboard_and_its_health_card(redis_down):
    client = client_for("viewer")
    for url in ("/", "/dashboard/health"):
        response = client.get(url)
        assert response.status_code == 200
        body = response.content.decode()
        assert "Redis is down: extenders keep serving the last versions they hold" in body
        assert "down (ConnectionError)" in body
        assert "no extender numbers until it is back" in body


def test_the_health_card_alone_is_a_fragment_that_keeps_polling(ops_redis):
    response = client_for("viewer").get("/dashboard/health", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="health"')
    assert 'hx-trigger="every 5s"' in body and "<html" not in body


def test_the_extender_numbers_come_from_the_minute_buckets_in_redis(ops_redis):
    metrics = Metrics()
    # 99 fast requests (<= 1 ms bucket) and 1 slow one (<= 5 ms bucket), one of them an error:
    # 99 of 100 observations lie in buckets up to 1 ms, 99 >= 0.99 * 100, so p99 = 1.0 ms.
    for _ in range(99):
        metrics.observe(verb="filter", code=200, seconds=0.0008, policy="bin-packing", version=1)
    metrics.observe(verb="filter", code=400, seconds=0.004, error="bad_request")
    metrics.flush(ops_redis)
    body = client_for("viewer").get("/dashboard/health").content.decode()
    p99 = body.split('id="health-p99"', 1)[1].split("</div>", 1)[0]
    assert '1.0<span class="ops-unit">ms</span>' in p99
    assert "100 requests in 5 min" in body
    errors = body.split('id="health-errors"', 1)[1].split("</div>", 1)[0]
    # 1 error of 100 requests = 1.0%
    assert ">1<" in errors and "1.0% of requests" in errors


def test_no_extender_traffic_points_to_the_connect_page(ops_redis):
    body = client_for("viewer").get("/dashboard/health").content.decode()
    assert "no requests in 5 min" in body and 'href="/connect/"' in body


def test_a_live_source_without_a_snapshot_says_why(settings, ops_redis):
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = "ops-test-nothing-here"
    response = client_for("viewer").get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "No cluster snapshot" in body
    assert 'data-status="ok"' not in body


def test_a_database_error_in_one_section_is_a_sentence(published):
    with mock.patch(
        "policies.selectors.decision_list", side_effect=OperationalError("disk I/O error")
    ):
        response = client_for("viewer").get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "The database is not answering (OperationalError), so recent decisions cannot" in body
    assert 'href="/policies/bin-packing/"' in body  # the other sections still show


def test_a_database_that_cannot_load_the_session_gets_a_page_not_a_500(redis_down):
    client = client_for("viewer")
    with mock.patch(
        "django.contrib.auth.get_user", side_effect=OperationalError("connection refused")
    ):
        page = client.get("/decisions/")
        card = client.get("/dashboard/health", headers={"HX-Request": "true"})
    assert page.status_code == 503
    assert "schedweb cannot reach its database" in page.content.decode()
    assert "Extenders keep serving" in page.content.decode()
    assert "Redis is down too (ConnectionError)" in page.content.decode()
    assert card.status_code == 200  # htmx swaps it in place of the numbers
    assert card.content.decode().startswith('<section id="health"')


# --- decisions ------------------------------------------------------------------------------------


def test_the_decision_list_shows_passing_counts_the_chosen_node_and_the_policys_rank_1():
    decision, evaluation = record_decision(chosen="")
    winner = evaluation.winners()[0]
    decision.chosen_node = winner
    decision.save()
    response = client_for("viewer").get("/decisions/")
    (summary,) = response.context["rows"]
    assert summary["winners"] == evaluation.winners()
    row = response.content.decode().split(f'href="/decisions/{decision.pk}/"', 1)[1]
    row = row.split("</tr>", 1)[0]
    assert f"{sum(evaluation.passed)} / {evaluation.size}" in row
    assert f"{winner}</td>" in row  # the chosen node's cell, with no "not top" badge
    assert "not top" not in row
    assert ">Policy rank 1</th>" in response.content.decode()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"namespace": "web"}, {"web"}),
        ({"namespace": "batch"}, {"batch"}),
        ({"pod": "web-6d5f8b7c9d-x2k4p"}, {"web"}),
        ({"policy": "another"}, set()),
    ],
)
def test_the_decision_list_filters_by_exact_names(params, expected):
    record_decision(pod_file="web.yaml")
    record_decision(pod_file="batch.yaml")
    response = client_for("viewer").get("/decisions/", params)
    rows = response.context["rows"]
    assert {r["namespace"] for r in rows} == expected


def test_the_decision_list_filters_by_chosen_node():
    first, evaluation = record_decision(chosen="")
    record_decision()
    node = evaluation.passing()[0]
    first.chosen_node = node
    first.save()
    rows = client_for("viewer").get("/decisions/", {"node": node}).context["rows"]
    assert [r["id"] for r in rows] == [first.pk]


def test_the_decision_list_is_paginated_newest_first():
    now = time.time()
    made = [record_decision(at=now - i)[0].pk for i in range(51)]  # made[0] is the newest
    client = client_for("viewer")
    first = client.get("/decisions/")
    second = client.get("/decisions/", {"page": 2})
    # 51 decisions at 50 a page: 50 on page 1, the oldest alone on page 2
    assert [r["id"] for r in first.context["rows"]] == made[:50]
    assert [r["id"] for r in second.context["rows"]] == made[50:]
    assert "page 1 of 2" in first.content.decode()
    assert client.get("/decisions/", {"page": "junk"}).context["page"].number == 1


def test_a_filter_that_cannot_be_read_is_an_error_at_its_field():
    record_decision()
    response = client_for("viewer").get("/decisions/", {"namespace": "x" * 300})
    body = response.content.decode()
    assert response.status_code == 200
    assert "Ensure this value has at most 253 characters (it has 300)." in body
    assert response.context["rows"] == []


def test_the_breakdown_shows_every_node_with_the_engines_arithmetic():
    decision, evaluation = record_decision()
    chosen = evaluation.winners()[0]
    decision.chosen_node = chosen
    decision.save()
    response = client_for("viewer").get(f"/decisions/{decision.pk}/")
    assert response.status_code == 200
    rows = {r["node"]: r for r in response.context["breakdown"]["rows"]}
    assert set(rows) == set(evaluation.node_names)
    for result in evaluation.rows():
        row = rows[result.node]
        assert row["ok"] == result.passed
        assert row["rule"] == (result.failed_rule or "")
        assert row["chosen"] == (result.node == chosen)
        # weighted = normalized x weight (engine: ScoreDetail.weighted), normalized stored to 3 places
        for cell, detail in zip(row["scores"], result.scores):
            assert cell["raw"] == detail.raw
            assert cell["weighted"] == pytest.approx(detail.weighted, abs=0.001 * detail.weight)
    body = response.content.decode()
    chosen_row = body.split(f'<tr data-node="{chosen}"', 1)[1].split("</tr>", 1)[0]
    assert 'class="is-chosen"' in chosen_row and ">chosen<" in chosen_row
    assert body.count('class="is-chosen"') == 1
    assert (
        'href="/policies/bin-packing/?version=1&amp;pod=web/web-6d5f8b7c9d-x2k4p'
        f'&amp;decision={decision.pk}"'
    ) in body


def test_a_rejected_node_shows_its_failing_rule_and_message():
    decision, evaluation = record_decision(pod_file="batch.yaml")
    rejected = [r for r in evaluation.rows() if not r.passed]
    assert rejected, "the batch pod should not fit everywhere in the demo cluster"
    body = client_for("viewer").get(f"/decisions/{decision.pk}/").content.decode()
    row = body.split(f'<tr data-node="{rejected[0].node}"', 1)[1].split("</tr>", 1)[0]
    assert rejected[0].failed_rule in row
    assert "badge--reject" in row


def test_a_chosen_node_below_the_policys_rank_1_is_explained_with_its_policy_rank():
    decision, evaluation = record_decision()
    ranked = sorted((r for r in evaluation.rows() if r.passed), key=lambda r: r.total, reverse=True)
    runner_up = next(r for r in ranked if r.total < ranked[0].total)
    rank = 1 + sum(1 for r in ranked if r.total > runner_up.total)  # competition rank
    decision.chosen_node = runner_up.node
    decision.save()
    body = client_for("viewer").get(f"/decisions/{decision.pk}/").content.decode()
    assert "Why not a node of policy rank 1?" in body
    assert f'<span id="decision-chosen-rank">policy rank {rank}</span>' in body
    # the policy's ranking is a column, never a second winner
    assert "Winner" not in body and "top score" not in body


def test_a_filter_decision_has_verdicts_but_no_score_columns():
    decision, _ = record_decision(verb="filter")
    decision.nodes = {
        "scores": [],
        "weights": [],
        "nodes": [{"n": "a", "ok": True}, {"n": "b", "ok": False, "rule": "r", "msg": "m"}],
    }
    decision.save()
    response = client_for("viewer").get(f"/decisions/{decision.pk}/")
    body = response.content.decode()
    assert response.context["breakdown"]["scores"] == []
    assert 'data-key="total"' not in body
    assert "a filter call carries no scores" in body


@pytest.mark.parametrize(
    "stored",
    [
        [1, 2],
        "garbage",
        {"nodes": "not a list"},
        {"scores": ["s"], "weights": ["x"], "nodes": [{"n": "a", "ok": True, "raw": "?"}, 7]},
    ],
)
def test_an_unreadable_record_is_shown_as_far_as_it_goes(stored):
    decision, _ = record_decision()
    Decision.objects.filter(pk=decision.pk).update(nodes=stored)
    response = client_for("viewer").get(f"/decisions/{decision.pk}/")
    assert response.status_code == 200
    assert "could not be read" in response.content.decode()


def near_tie_decision():
    """A decision where the demo cluster's first node beats every other by 0.0002 (totals:
    50.0002 vs 50.0 with normalize none and one weight), less than the record's 3 places."""
    cluster = cluster_load("demo")
    first = cluster.nodes()[0]["name"]
    compiled = compile_policy(
        "name: near-tie\nschedulerNames: [schedweb]\nscores:\n  - name: almost\n"
        f"    expression: 'node.name == \"{first}\" ? 50.0002 : 50.0'\n    normalize: none\n"
    )
    pod = pod_view_from_text((EXAMPLES / "pods" / "web.yaml").read_text())
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    served = ServedPolicy(name="near-tie", version=1, compiled=compiled)
    services.decisions_store(batch=[decision_record(pod, served, "prioritize", evaluation)])
    return Decision.objects.order_by("-pk").first(), first


def test_totals_closer_than_the_records_rounding_are_not_shown_as_a_tie():
    decision, first = near_tie_decision()
    client = client_for("viewer")
    (summary,) = client.get("/decisions/").context["rows"]
    assert summary["winners"] == [first]
    breakdown = client.get(f"/decisions/{decision.pk}/").context["breakdown"]
    assert [r["node"] for r in breakdown["rows"] if r["winner"]] == [first]


def test_a_record_from_before_winners_were_stored_recomputes_them_from_its_totals():
    decision, _first = near_tie_decision()
    record = dict(decision.nodes)
    del record["winners"]
    Decision.objects.filter(pk=decision.pk).update(nodes=record)
    (summary,) = client_for("viewer").get("/decisions/").context["rows"]
    # every passing node's stored total is 50.0 once rounded to 3 places: all tie
    assert summary["winners"] == [n["n"] for n in record["nodes"] if n["ok"]]


def test_an_unknown_decision_is_a_404():
    assert client_for("viewer").get("/decisions/999999/").status_code == 404


# --- connect --------------------------------------------------------------------------------------


def test_the_connect_page_emits_tls_config_for_an_https_extender(published, settings):
    settings.SCHEDWEB_EXTENDER_URL = "https://10.0.0.7:8443/extender/"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CA = "/etc/schedweb/ca.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CERT = "/etc/schedweb/client.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_KEY = "/etc/schedweb/client.key"
    out = client_for("viewer").get("/connect/").context["out"]
    extender = yaml.safe_load(out["profile"])["extenders"][0]
    assert extender["urlPrefix"] == "https://10.0.0.7:8443/extender/"
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {
        "caFile": "/etc/schedweb/ca.crt",
        "certFile": "/etc/schedweb/client.crt",
        "keyFile": "/etc/schedweb/client.key",
    }


def test_the_connect_page_fills_in_this_installation(published):
    response = client_for("viewer").get("/connect/")
    assert response.status_code == 200
    out = response.context["out"]
    profile = yaml.safe_load(out["profile"])
    extender = profile["extenders"][0]
    assert extender["urlPrefix"] == "http://10.0.0.7:8000/extender/"
    assert [p["schedulerName"] for p in profile["profiles"]] == ["default-scheduler", "schedweb"]
    assert (extender["weight"], extender["nodeCacheCapable"], extender["ignorable"]) == (
        1,
        True,
        False,
    )
    assert "bindVerb" not in extender and "managedResources" not in extender
    resource = yaml.safe_load(out["resource"])
    assert resource["extenders"][0]["managedResources"] == [
        {"name": "schedweb.io/scheduled", "ignoredByScheduler": True}
    ]
    kinds = [d["kind"] for d in yaml.safe_load_all(out["manifests"])]
    assert kinds[-1] == "Deployment" and "ConfigMap" in kinds
    assert out["urls"]["filter"] == "http://10.0.0.7:8000/extender/filter"
    body = response.content.decode()
    for block in ("config-profile", "config-resource", "config-manifests", "config-rbac"):
        assert f'id="{block}"' in body
    assert body.count("data-copy") >= 4


def test_the_options_re_render_as_a_fragment_for_htmx():
    client = client_for("viewer")
    response = client.get(
        "/connect/",
        {"scheduler_names": "batch, gpu", "weight": "5", "ignorable": "on", "bind": "on"},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="connect"') and "<html" not in body
    out = response.context["out"]
    config = yaml.safe_load(out["resource"])
    extender = config["extenders"][0]
    # unchecked nodeCacheCapable is absent from the query: full Node objects
    assert (extender["weight"], extender["ignorable"], extender["nodeCacheCapable"]) == (
        5,
        True,
        False,
    )
    assert extender["bindVerb"] == "bind"
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler", "batch", "gpu"]
    # With bind, profile scoping would send default-scheduler's binds to schedweb: no
    # configuration, the reason in its place (a YAML comment).
    assert yaml.safe_load(out["profile"]) is None and "default-scheduler" in out["profile"]
    second = yaml.safe_load_all(out["manifests"])
    config_map = next(d for d in second if d["kind"] == "ConfigMap")
    assert "bindVerb: bind" in config_map["data"]["scheduler-config.yaml"]


def test_without_bind_the_profile_scoping_is_a_configuration():
    out = client_for("viewer").get("/connect/", {"weight": "1"}).context["out"]
    config = yaml.safe_load(out["profile"])
    assert config["profiles"][0]["schedulerName"] == "default-scheduler"
    assert "bindVerb" not in config["extenders"][0]


@pytest.mark.parametrize("bind", [False, True])
def test_only_the_extenders_account_may_bind_and_only_when_it_binds(bind):
    params = {"weight": "1", "node_cache_capable": "on", **({"bind": "on"} if bind else {})}
    out = client_for("viewer").get("/connect/", params).context["out"]
    roles = {
        d["metadata"]["name"]: {
            (r, v) for rule in d["rules"] for r in rule["resources"] for v in rule["verbs"]
        }
        for d in yaml.safe_load_all(out["rbac"])
        if d["kind"] == "ClusterRole"
    }
    worker = roles.pop("schedweb-worker")
    assert {("nodes", "list"), ("nodes", "watch"), ("pods", "list"), ("pods", "watch")} <= worker
    assert ("pods", "patch") in worker and ("pods/binding", "create") not in worker
    if bind:  # pods/binding, and get pods: read by a bind answered 409
        assert roles == {"schedweb-extender": {("pods/binding", "create"), ("pods", "get")}}
    else:
        assert roles == {}


def test_the_connect_page_proposes_bind_as_the_settings_enable_it(settings):
    viewer = client_for("viewer")
    for enabled in (False, True):
        settings.SCHEDWEB_EXTENDER_BIND = enabled
        out = viewer.get("/connect/").context["out"]
        roles = [d for d in yaml.safe_load_all(out["rbac"]) if d["kind"] == "ClusterRole"]
        binding = [r for r in roles if any("pods/binding" in x["resources"] for x in r["rules"])]
        assert [r["metadata"]["name"] for r in binding] == (
            ["schedweb-extender"] if enabled else []
        )


@pytest.mark.parametrize("bind", [False, True])
def test_the_cli_prints_the_same_rbac_as_the_connect_page(bind):
    params = {"weight": "1", "node_cache_capable": "on", **({"bind": "on"} if bind else {})}
    response = client_for("viewer").get("/connect/", params)
    out = response.context["out"]
    command = out["cli_rbac"]
    assert command in html.unescape(response.content.decode())  # the page shows the command
    printed = io.StringIO()
    call_command(*shlex.split(command)[2:], stdout=printed)  # after "python manage.py"
    assert printed.getvalue() == out["rbac"]
    named = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(printed.getvalue())]
    worker = [("ClusterRole", "schedweb-worker"), ("ClusterRoleBinding", "schedweb-worker")]
    extender = [("ClusterRole", "schedweb-extender"), ("ClusterRoleBinding", "schedweb-extender")]
    assert named == worker + (extender if bind else [])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"weight": "0"}, "Ensure this value is greater than or equal to 1."),
        ({"weight": "many"}, "Enter a whole number."),
        ({"weight": "1", "scheduler_names": "Bad_Name"}, "is not a valid schedulerName"),
        (
            {"weight": "1", "scheduler_names": ",".join(f"s{i}" for i in range(11))},
            "at most 10 scheduler names",
        ),
        ({"weight": "1", "namespace": "Kube_System"}, "is not a namespace name"),
        ({"weight": "1", "url": "ftp://x/extender/"}, "an https:// URL with a host"),
        ({"weight": "1", "url": "https://x:8443/"}, "the path ends with /extender/"),
        ({"weight": "1", "url": "https://x:8443/extender/?a=1"}, "no user, query or fragment"),
        ({"weight": "1", "url": "https://x:port/extender/"}, "not a URL"),
        ({"weight": "1", "url": "https://x/" + "a" * 3000 + "/extender/"}, "at most 2048"),
    ],
)
def test_bad_options_are_a_422_with_the_error_at_the_field(params, message):
    response = client_for("viewer").get("/connect/", params, headers={"HX-Request": "true"})
    assert response.status_code == 422
    body = response.content.decode()
    assert message in body
    assert 'aria-invalid="true"' in body
    assert "Fix the options to see the configuration" in body


def test_the_connect_page_defaults_to_schedweb_without_active_policies():
    out = client_for("viewer").get("/connect/").context["out"]
    assert out["names"] == ["schedweb"]


# --- decisions over time: the record's timestamps are the extender's ----------------------------


def test_a_decision_keeps_the_extenders_time():
    at = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    decision, _ = record_decision(at=at)
    body = client_for("viewer").get(f"/decisions/{decision.pk}/").content.decode()
    assert datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S") in body


def test_served_policy_records_match_the_stored_shape():
    """Guards the fixture: the extender's record has the keys the pages read."""
    decision, _ = record_decision()
    entry = decision.nodes["nodes"][0]
    assert {"n", "ok"} <= set(entry)
    assert set(decision.nodes) == {"scores", "weights", "nodes", "winners"}


def test_configurations_that_extend_the_clusters_scheduler_keep_its_lease():
    """kubeadm's scheduler.conf user (system:kube-scheduler) may only update the lease named
    kube-scheduler; the second scheduler has its own account and lease."""
    out = client_for("viewer").get("/connect/").context["out"]
    for key in ("profile", "resource"):
        election = yaml.safe_load(out[key])["leaderElection"]
        assert election["resourceName"] == "kube-scheduler"
        assert "--second-scheduler" not in out[f"cli_{key}"]
    configmap = next(d for d in yaml.safe_load_all(out["manifests"]) if d["kind"] == "ConfigMap")
    config = yaml.safe_load(configmap["data"]["scheduler-config.yaml"])
    assert config["leaderElection"]["resourceName"] == "schedweb-scheduler"


# --- the scheduler configuration previews model (issue 16) -----------------------------------------

PASTED_PROFILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: schedweb
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
extenders:
- urlPrefix: http://10.0.0.7:8000/extender/
  weight: 5
"""


def test_the_connect_page_shows_the_default_configuration_previews_model():
    html = client_for("viewer").get("/connect/").content.decode()
    assert 'id="scheduler-profile"' in html and 'id="sp-weight">1<' in html
    assert 'id="scheduler-profile-form"' not in html  # only an admin edits it


def test_an_admin_pastes_a_configuration_and_every_preview_models_it():
    from policies.evaluation import profile_active

    admin = client_for("admin")
    response = admin.post("/connect/scheduler-profile", {"text": PASTED_PROFILE})
    assert response.status_code == 200
    assert 'id="sp-weight">5<' in response.content.decode()
    profile = profile_active()
    assert (profile.extender_weight, profile.strategy) == (5, "MostAllocated")
    event = AuditEvent.objects.get(action="schedulerprofile.set")
    assert event.detail == {"extender_weight": 5, "strategy": "MostAllocated"}
    # the REST preview models it too
    api = client_for("viewer").post(
        "/api/v1/preview",
        {
            "document": (EXAMPLES / "bin-packing.yaml").read_text(),
            "podRef": {"namespace": "default", "name": "abc"},
        },
        content_type="application/json",
    )
    assert api.json()["kubeScheduler"]["extenderWeight"] == 5
    # empty: back to the default
    admin.post("/connect/scheduler-profile", {"text": ""})
    assert profile_active().extender_weight == 1


def test_a_bad_configuration_is_refused_with_every_field_path():
    bad = PASTED_PROFILE.replace("weight: 5", "weight: heavy").replace("MostAllocated", "Packed")
    response = client_for("admin").post("/connect/scheduler-profile", {"text": bad})
    assert response.status_code == 422
    html = response.content.decode()
    assert "profiles[0].pluginConfig[0].args.scoringStrategy.type</span>: unknown" in html
    assert "extenders[0].weight</span>: expected an integer" in html
    assert "weight: heavy" in html  # the text is kept to fix


def test_only_an_admin_changes_the_configuration_previews_model():
    response = client_for("publisher").post("/connect/scheduler-profile", {"text": ""})
    assert response.status_code == 403


def test_the_decision_page_shows_the_models_pick_and_the_policys_rank_1_as_a_column(published):
    decision, _ = record_decision(pod_file="abc.yaml")  # default/abc is pending in the demo
    response = client_for("viewer").get(f"/decisions/{decision.pk}/")
    model = response.context["model"]
    assert "error" not in model, model
    assert model["pick"] and "cp-1" not in model["pick"]  # a tainted control-plane node
    body = response.content.decode()
    assert 'id="decision-model-pick"' in body and model["pick"][0] in body
    assert "policy rank 1 there" in body and "choice" not in body


def test_the_decision_page_says_why_the_model_cannot_run():
    decision, _ = record_decision()  # no version stored: bin-packing was never published here
    model = client_for("viewer").get(f"/decisions/{decision.pk}/").context["model"]
    assert model == {"error": "bin-packing v1 no longer exists"}


def test_each_pod_is_modelled_with_the_profile_of_its_scheduler_name():
    from policies.evaluation import profile_active

    two = PASTED_PROFILE.replace(
        "profiles:\n", "profiles:\n- schedulerName: default-scheduler\n", 1
    )
    assert client_for("admin").post("/connect/scheduler-profile", {"text": two}).status_code == 200
    assert profile_active(scheduler_name="schedweb").strategy == "MostAllocated"
    assert profile_active(scheduler_name="default-scheduler").strategy == "LeastAllocated"
    assert profile_active(scheduler_name="elsewhere").strategy == "LeastAllocated"  # the first


def test_a_decisions_pod_opens_in_the_playground_after_the_pod_is_gone(published):
    # web.yaml is an example pod, not a pod of the demo cluster: "gone" from the snapshot
    decision, _ = record_decision()
    manifest = json.loads(decision.pod_manifest)
    assert manifest["metadata"]["name"] == decision.pod_name and "containers" in manifest["spec"]
    viewer = client_for("viewer")
    link = viewer.get(f"/decisions/{decision.pk}/").context["breakdown"]["playground"]
    assert f"decision={decision.pk}" in link
    page = viewer.get(link).content.decode()
    assert 'id="recorded-pod-banner"' in page
    assert "Cannot evaluate" not in page and f"{decision.pod_namespace}/{decision.pod_name}" in page


def test_a_malformed_or_oversized_recorded_manifest_is_dropped_not_stored():
    from policies.extender.decisions import MAX_DECISION_POD_BYTES

    item = {
        "kind": "decision",
        "at": 1.0,
        "policy": "p",
        "version": 1,
        "verb": "filter",
        "nodes": [],
        "pod": {"namespace": "d", "name": "n", "uid": "u"},
    }
    for manifest in ("[1]", "{bad", "{" + " " * MAX_DECISION_POD_BYTES + "}", 7):
        services.decisions_store(batch=[{**item, "podManifest": manifest}])
        assert Decision.objects.order_by("-pk").first().pod_manifest == ""


def test_the_connect_page_takes_the_extender_url_and_prints_what_the_cli_prints_for_it(settings):
    """The URL field (in a cluster: the chart's extender Service) reaches every output, and the
    command the page shows prints the same second-scheduler manifests."""
    url = "https://schedweb-extender.schedweb.svc:8443/extender/"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CA = "/etc/schedweb/ca.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CERT = "/etc/schedweb/client.crt"
    settings.SCHEDWEB_EXTENDER_SCHEDULER_KEY = "/etc/schedweb/client.key"
    params = {"weight": "1", "node_cache_capable": "on", "url": url, "tab": "manifests"}
    response = client_for("viewer").get("/connect/", params)
    assert response.status_code == 200
    out = response.context["out"]
    assert out["urls"]["filter"] == url + "filter"
    assert yaml.safe_load(out["resource"])["extenders"][0]["urlPrefix"] == url
    command = out["cli_manifests"]
    assert f"--url {url}" in command and command in html.unescape(response.content.decode())
    printed = io.StringIO()
    call_command(*shlex.split(command)[2:], stdout=printed)
    assert printed.getvalue() == out["manifests"]
    assert "&id0" not in out["manifests"] and "scheduler-config.yaml: |" in out["manifests"]
    body = response.content.decode()
    assert 'name="url"' in body and 'type="url"' in body


def test_the_connect_page_gives_the_queue_webhook_of_active_queue_policies(publisher, settings):
    settings.SCHEDWEB_EXTENDER_URL = "https://10.0.0.7:8443/extender/"
    viewer = client_for("viewer")
    out = viewer.get("/connect/?tab=webhook").context["out"]
    assert out["webhook"]["config"] == ""  # no active policy has a queue: nothing to send
    assert "priorityclasses" not in out["rbac"] and "--queue" not in out["cli_rbac"]
    document = (EXAMPLES / "seed-002-queue.yaml").read_text()
    policy = services.policy_create(actor=publisher, document=document)
    services.policy_publish(
        actor=publisher, policy=policy, message="queue", revision=policy.draft_revision
    )
    response = viewer.get("/connect/?tab=webhook")
    out = response.context["out"]
    config = yaml.safe_load(out["webhook"]["config"])
    (webhook,) = config["webhooks"]
    assert webhook["name"] == "seed-002-queue.queue.schedweb.io"
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["clientConfig"]["url"] == "https://10.0.0.7:8443/admission/queue"
    assert "kube-system" in webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    admission, kubeconfig = yaml.safe_load_all(out["webhook"]["admission"])
    assert admission["kind"] == "AdmissionConfiguration"
    assert kubeconfig["users"][0]["name"] == "10.0.0.7:8443"
    assert "priorityclasses" in out["rbac"] and out["cli_rbac"].endswith(" --queue")
    page = response.content.decode()
    assert 'id="config-webhook"' in page and 'id="tab-webhook"' in page


def _manifests_url(out) -> str:
    [config_map] = [d for d in yaml.safe_load_all(out["manifests"]) if d["kind"] == "ConfigMap"]
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    return config["extenders"][0]["urlPrefix"]


@pytest.mark.parametrize(
    ("configured", "typed", "called", "warned"),
    [
        # make run's URL: a pod would call itself; the manifests name the chart's Service
        ("https://127.0.0.1:8443/extender/", "", IN_CLUSTER_EXTENDER_URL, True),
        ("http://localhost:8443/extender/", "", IN_CLUSTER_EXTENDER_URL, True),
        # typed in: kept as typed, with the warning
        (
            "https://10.0.0.7:8443/extender/",
            "https://127.0.0.2:9443/extender/",
            "https://127.0.0.2:9443/extender/",
            True,
        ),
        # the chart's own setting: used as it is, nothing to warn of
        (
            "https://prod-extender.ops.svc:8443/extender/",
            "",
            "https://prod-extender.ops.svc:8443/extender/",
            False,
        ),
    ],
)
def test_the_second_schedulers_manifests_never_default_to_a_loopback_url(
    settings, configured, typed, called, warned
):
    settings.SCHEDWEB_EXTENDER_URL = configured
    params = {"weight": "1", "node_cache_capable": "on", "url": typed, "tab": "manifests"}
    response = client_for("viewer").get("/connect/", params)
    out = response.context["out"]
    assert _manifests_url(out) == called
    assert bool(out["manifests_loopback"]) is warned
    assert (b'id="manifests-loopback"' in response.content) is warned
    if called != configured:
        assert f"--url {called}" in out["cli_manifests"]  # the command prints these manifests
    # the cluster's own scheduler is given the URL as configured (it may share schedweb's host)
    assert yaml.safe_load(out["profile"])["extenders"][0]["urlPrefix"] == (typed or configured)


def test_a_decision_that_waited_for_the_snapshot_says_how_long_and_for_what():
    """Issue 24: the record says the request waited, for which nodes or its pod, how long, and
    whether the snapshot caught up before the answer."""
    compiled = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    cluster = cluster_load("demo")
    pod = pod_view_from_text((EXAMPLES / "pods" / "web.yaml").read_text())
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    served = ServedPolicy(name="bin-packing", version=1, compiled=compiled)
    waited = {"waitedMs": 41.37, "outcome": "caught-up", "nodes": ["n-new"], "pod": True}
    timed_out = {"waitedMs": 500.0, "outcome": "timed-out", "nodes": ["never"], "pod": False}
    hostile = {"waitedMs": "a lot", "outcome": "caught-up", "nodes": ["x"]}
    services.decisions_store(
        batch=[
            decision_record(pod, served, "filter", evaluation, None, waited),
            decision_record(pod, served, "filter", evaluation, None, timed_out),
            decision_record(pod, served, "filter", evaluation, None, hostile),
        ]
    )
    first, second, third = Decision.objects.order_by("pk")
    viewer = client_for("viewer")
    assert first.nodes["catchUp"] == {
        "waitedMs": 41.4,
        "outcome": "caught-up",
        "nodes": ["n-new"],
        "pod": True,
    }
    assert "catchUp" not in third.nodes  # not what the extender writes: not kept
    body = viewer.get(f"/decisions/{first.pk}/").content.decode()
    assert (
        "Waited 41 ms for the snapshot to hold node n-new and the pod itself; judged once it did."
        in body
    )
    body = viewer.get(f"/decisions/{second.pk}/").content.decode()
    assert "it did not in time, so the policy&#x27;s failurePolicy applied" in body
    assert 'id="decision-catch-up"' not in viewer.get(f"/decisions/{third.pk}/").content.decode()
    listed = viewer.get(f"/api/v1/decisions/{first.pk}").json()
    assert listed["catchUp"]["outcome"] == "caught-up" and listed["catchUp"]["pod"] is True
