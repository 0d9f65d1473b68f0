"""The shadow report (issue 25): REST and page over a window, counts by outcome, the differing
pods listed with both versions' node breakdowns, Promote and Discard from the page, the
dashboard's line; viewers read, publishers act. Records are stored through the decisions store
from records the extender builds (policies/extender/shadow.py)."""

from __future__ import annotations

import time

import pytest

from policies import services
from policies.cluster.demo import demo_state
from policies.evaluation import policy_compile
from policies.extender.decisions import decision_record
from policies.extender.service import ServedPolicy
from policies.extender.shadow import ShadowJob, ShadowTallies, compare, shadow_record
from policies.models import AuditEvent, Decision, Policy, ShadowTally
from tests.api.conftest import document
from tests.conftest import client_for, make_user, token_client

STRICT = document().replace(
    "filters:\n", "filters:\n  - name: not-a-small-1\n    expression: node.name != 'a-small-1'\n"
)


def _policy_with_shadow() -> Policy:
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(actor=publisher, policy=policy, message="v1", revision=1)
    Policy.objects.filter(pk=policy.pk).update(draft=STRICT, draft_revision=2)
    services.policy_publish(
        actor=publisher,
        policy=Policy.objects.get(pk=policy.pk),
        message="never a-small-1",
        revision=2,
        shadow=True,
    )
    return Policy.objects.get(pk=policy.pk)


def _store(
    pods: list[str], *, at: float | None = None, strict: bool = True, listed: bool = True
) -> None:
    """Judges each named pod with v1 and the shadow on the demo cluster, as the extender does
    after an answer, and stores its tallies and (`listed`: within the record rate) the records
    of the pods judged differently through the decisions store."""
    state = demo_state()
    nodes = state.nodes()
    active = ServedPolicy("least", 1, policy_compile(document()))
    shadow = ServedPolicy("least", 2, policy_compile(STRICT if strict else document()))
    batch, tallies = [], ShadowTallies()
    for name in pods:
        pod = {**state.pods()[0], "name": name, "uid": f"uid-{name}", "namespace": "default"}
        pod = dict(pod, schedulerName="schedweb", nodeName="")
        a = active.compiled.evaluate(pod, nodes, state)
        b = shadow.compiled.evaluate(pod, nodes, state)
        difference = compare(a, b)
        job = ShadowJob(active, shadow, pod, nodes, state, a, at or time.time())
        tallies.count(job, difference.outcome)
        if difference.outcome == "same" or not listed:
            continue
        batch.append(
            shadow_record(
                job,
                outcome=difference.outcome,
                decision=decision_record,
                evaluation=b,
                difference=difference,
                seconds=0.001,
                details=True,
            )
        )
    services.decisions_store(batch=[*batch, *tallies.take(at)])


@pytest.mark.django_db
def test_the_rest_report_counts_by_outcome_and_lists_the_differing_pods():
    _policy_with_shadow()
    _store(["web-1", "web-2"])
    _store(["old-1"], at=time.time() - 7200)  # outside the last hour
    api = token_client(make_user("vic", "viewer"))
    body = api.get("/api/v1/policies/least/shadow").json()
    assert body["shadow"]["version"] == 2 and body["version"] == 2
    assert body["summary"]["judged"] == 2 and body["summary"]["nodes"] == 2
    assert body["summary"]["listed"] == 2 and body["summary"]["skipped"] == 0
    assert [r["pod"]["name"] for r in body["results"]] == ["web-2", "web-1"]
    record = body["results"][0]
    assert record["difference"]["rejects"] == ["a-small-1"]
    assert (record["shadowVersion"], record["activeVersion"], record["outcome"]) == (2, 1, "nodes")
    shadow_nodes = {n["n"]: n for n in record["nodes"]["shadow"]["nodes"]}
    active_nodes = {n["n"]: n for n in record["nodes"]["active"]["nodes"]}
    assert shadow_nodes["a-small-1"]["ok"] is False and active_nodes["a-small-1"]["ok"] is True
    day = api.get("/api/v1/policies/least/shadow?window=day").json()
    assert day["summary"]["judged"] == 3


@pytest.mark.django_db
def test_counts_are_exact_while_the_list_is_a_sample_and_says_so():
    _policy_with_shadow()
    _store(["web-1", "web-2"])
    _store(["web-3", "web-4", "web-5"], listed=False)  # past the record rate: counted only
    _store(["alike-1", "alike-2"], strict=False)  # judged alike: counted only
    api = token_client(make_user("vic", "viewer"))
    body = api.get("/api/v1/policies/least/shadow").json()
    summary = body["summary"]
    assert (summary["judged"], summary["same"], summary["nodes"]) == (7, 2, 5)
    assert (summary["differed"], summary["listed"], body["count"]) == (5, 2, 2)
    assert ShadowTally.objects.count() == 3  # one per process flush (here: per _store)
    page = client_for("viewer").get("/policies/least/shadow/").content.decode()
    assert "2 of the 5 pods judged differently are listed" in page
    assert "at most 20 a second" in page
    # pods judged alike or skipped have no records to list: a 400 that says so
    for outcome in ("same", "skipped"):
        refused = api.get(f"/api/v1/policies/least/shadow?outcome={outcome}")
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["path"] == "outcome"
        assert "counted, not listed" in refused.json()["detail"]


@pytest.mark.django_db
def test_the_report_refuses_bad_windows_and_outcomes_with_field_paths():
    _policy_with_shadow()
    api = token_client(make_user("vic", "viewer"))
    for query, path in (
        ("window=year", "window"),
        ("window=custom&since=yesterday&until=2026-11-26T00:00:00Z", "since"),
        ("window=custom&since=2026-11-26T00:00:00Z&until=2026-11-25T00:00:00Z", "until"),
        ("window=custom&since=2026-01-01T00:00:00Z&until=2026-11-25T00:00:00Z", "since"),
        ("outcome=weird", "outcome"),
        ("version=two", "version"),
    ):
        response = api.get(f"/api/v1/policies/least/shadow?{query}")
        assert response.status_code == 400, (query, response.content)
        assert response.json()["errors"][0]["path"] == path, query
    custom = api.get(
        "/api/v1/policies/least/shadow?window=custom"
        "&since=2026-11-25T00:00:00Z&until=2026-11-26T00:00:00%2B01:00"
    )
    assert custom.status_code == 200 and custom.json()["window"]["name"] == "custom"
    assert api.get("/api/v1/policies/nope/shadow").status_code == 404


@pytest.mark.django_db
def test_the_page_shows_the_counts_the_pods_and_both_breakdowns():
    _policy_with_shadow()
    _store(["web-1"])
    viewer = client_for("viewer")
    body = viewer.get("/policies/least/shadow/").content.decode()
    assert "v2 shadow" in body and "v1 active" in body
    assert (
        'data-count="judged"><span class="stat-label">Pods judged</span><span class="stat-value">1<'
        in body
    )
    assert 'data-pod="default/web-1"' in body and 'data-outcome="nodes"' in body
    assert "Rejects 1 node the active version let through" in body
    # a viewer reads; only publishers get the forms
    assert 'id="shadow-promote"' not in body
    publisher_page = client_for("publisher", "pat").get("/policies/least/shadow/").content.decode()
    assert 'id="shadow-promote"' in publisher_page and 'id="shadow-discard"' in publisher_page
    assert 'id="shadow-tab"' in viewer.get("/policies/least/versions/").content.decode()


@pytest.mark.django_db
def test_promote_and_discard_from_the_page_are_publishers_and_audited():
    _policy_with_shadow()
    viewer = client_for("viewer")
    assert viewer.post("/policies/least/shadow/promote", {"message": "go"}).status_code == 403
    assert viewer.post("/policies/least/shadow/discard", {}).status_code == 403
    publisher = client_for("publisher", "pat")
    missing = publisher.post("/policies/least/shadow/promote", {"message": ""})
    assert missing.status_code == 400 and "A message is required" in missing.content.decode()
    done = publisher.post(
        "/policies/least/shadow/promote", {"message": "looks right", "version": "2"}
    )
    assert done.status_code == 302 and done["Location"] == "/policies/least/versions/"
    assert AuditEvent.objects.filter(action="policy.promote", actor_name="pat").exists()
    again = publisher.post("/policies/least/shadow/discard", {})
    assert again.status_code == 409 and "has no shadow version" in again.content.decode()


@pytest.mark.django_db
def test_the_dashboard_says_which_version_shadows_where_and_how_it_does():
    _policy_with_shadow()
    _store(["web-1", "web-2"])
    _store(["web-3"], strict=False)  # the shadow judged this one alike
    body = client_for("viewer").get("/").content.decode()
    line = body.split('id="shadow-lines"', 1)[1].split("</div>", 1)[0]
    assert 'href="/policies/least/shadow/"' in line and "v2 shadow" in line
    assert "beside v1" in line and '<code class="ops-chip">schedweb</code>' in line
    assert "<strong>3</strong> judged, <strong>2</strong> differently" in line
    assert Decision.objects.filter(role="shadow").count() == 2  # the alike pod: counted only


@pytest.mark.django_db
def test_the_versions_page_names_the_shadow_and_links_its_report():
    _policy_with_shadow()
    body = client_for("viewer").get("/policies/least/versions/").content.decode()
    line = body.split('id="shadow-line"', 1)[1].split("</p>", 1)[0]
    assert "v2 shadow" in line and 'href="/policies/least/shadow/"' in line


@pytest.mark.django_db
def test_the_model_s_pick_under_each_version_is_added_to_recent_records_as_a_preview_gives_it():
    import json

    from policies.cluster.loaded import LoadedCluster
    from policies.cluster.manifest import pod_view_from_object
    from policies.evaluation import preview_run
    from policies.rollout.services import shadow_picks_fill

    _policy_with_shadow()
    _store(["web-1", "web-2"])
    _store(["alike"], strict=False)  # judged the same: no pick needed
    cluster = LoadedCluster(demo_state().freeze(), "demo", "demo")
    assert shadow_picks_fill(cluster=cluster, limit=1) == 1  # bounded per run, newest first
    assert shadow_picks_fill(cluster=cluster) == 1
    assert shadow_picks_fill(cluster=cluster) == 0  # each record once
    for record in Decision.objects.filter(role="shadow").exclude(shadow_outcome="same"):
        pick = record.nodes["shadow"]["pick"]
        pod = pod_view_from_object(json.loads(record.pod_manifest))
        for side, text in (("active", document()), ("shadow", STRICT)):
            expected = preview_run(document=text, pod=pod, cluster=cluster).placement.pick
            assert pick[side] == sorted(expected), side
        assert pick["differs"] is (pick["active"] != pick["shadow"])
    api = token_client(make_user("vic", "viewer"))
    listed = api.get("/api/v1/policies/least/shadow").json()["results"]
    assert all(set(r["pick"]) == {"active", "shadow", "differs"} for r in listed)


@pytest.mark.django_db
def test_the_picks_read_the_cluster_only_when_a_record_awaits_one():
    """The worker's live snapshot catches up on every change when read: a run with no record
    to fill (no shadow, or all filled) must not read it."""
    from policies.cluster.loaded import LoadedCluster
    from policies.rollout.services import shadow_picks_fill

    reads = []

    def cluster():
        reads.append(1)
        return LoadedCluster(demo_state().freeze(), "demo", "demo")

    assert shadow_picks_fill(cluster=cluster) == 0
    _policy_with_shadow()
    _store(["alike"], strict=False)  # judged the same: no pick needed
    assert shadow_picks_fill(cluster=cluster) == 0
    assert reads == []
    _store(["web-1", "web-2"])
    assert shadow_picks_fill(cluster=cluster) == 2
    assert reads == [1]  # once per run, however many records
    assert shadow_picks_fill(cluster=cluster) == 0
    assert reads == [1]
