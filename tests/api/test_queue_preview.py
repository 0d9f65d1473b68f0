"""POST /api/v1/preview/queue: the order pending pods would take under a document's `queue:`."""

from __future__ import annotations

from pathlib import Path

from tests.api.conftest import document

SEED = (Path(__file__).resolve().parents[2] / "policies/examples/seed-002-queue.yaml").read_text()


def test_the_demo_clusters_pending_pods_come_in_key_order(api):
    response = api.post(
        "/api/v1/preview/queue", {"document": SEED, "cluster": "demo"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["policy"] == "seed-002-queue" and body["version"] == "document"
    assert body["queue"]["min"] == 0 and body["queue"]["max"] == 29
    pods = body["pods"]
    assert body["total"] == len(pods) == 8  # the demo cluster's pending schedweb pods
    # no groupPriority label in the demo: the key is the QoS rank, Guaranteed (2) first
    keys = [p["key"] for p in pods]
    assert keys == sorted(keys, reverse=True)
    by_name = {p["pod"]: p for p in pods}
    assert by_name["ml/train-llama-0"]["key"] == 2  # 0*3 + Guaranteed 2
    assert by_name["default/abc"]["key"] == 1  # 0*3 + Burstable 1
    assert all(p["priority"] == 0 and not p["error"] and not p["clamped"] for p in pods)


def test_a_document_without_a_queue_keeps_every_pods_priority(api):
    response = api.post(
        "/api/v1/preview/queue", {"document": document(), "cluster": "demo"}, format="json"
    )
    body = response.json()
    assert body["queue"] is None
    assert body["pods"] and all(
        p["key"] is None and p["reason"] == "the policy has no queue" for p in body["pods"]
    )


def test_a_stored_policys_draft_is_previewed_by_name(api):
    created = api.post("/api/v1/policies", {"document": SEED}, format="json")
    assert created.status_code == 201, created.content
    response = api.post(
        "/api/v1/preview/queue", {"policy": "seed-002-queue", "cluster": "demo"}, format="json"
    )
    assert response.status_code == 200 and response.json()["version"] == "draft"
    missing = api.post(
        "/api/v1/preview/queue",
        {"policy": "seed-002-queue", "version": "active", "cluster": "demo"},
        format="json",
    )
    assert missing.status_code == 404
    assert missing.json()["detail"] == "policy seed-002-queue has no active version"


def test_bad_input_is_a_400_with_the_field_and_cel_position(api):
    bad = SEED.replace('pod.qosClass == "Guaranteed"', 'pod.qosClas == "Guaranteed"')
    response = api.post(
        "/api/v1/preview/queue", {"document": bad, "cluster": "demo"}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_policy"
    (error,) = body["errors"]
    assert error["path"] == "queue.expression"
    assert error["message"] == "undefined field 'qosClas' on Pod; did you mean 'qosClass'?"
    assert (error["line"], error["column"]) == (3, 8)  # `qosClas` in "+ (pod.qosClas"
    for payload, field in (
        ({"cluster": "demo"}, "document"),
        ({"document": SEED, "policy": "x"}, "document"),
        ({"document": SEED, "version": "2"}, "version"),
        ({"document": SEED, "cluster": "mars"}, "cluster"),
        ({"document": SEED, "pod": {}}, "pod"),
    ):
        response = api.post("/api/v1/preview/queue", payload, format="json")
        assert response.status_code == 400, (payload, response.content)
        assert field in str(response.json()), (payload, response.json())


def test_viewers_may_preview_and_anonymous_may_not(clients, client):
    viewer = clients["viewer"].post(
        "/api/v1/preview/queue", {"document": SEED, "cluster": "demo"}, format="json"
    )
    assert viewer.status_code == 200
    anonymous = client.post(
        "/api/v1/preview/queue",
        {"document": SEED, "cluster": "demo"},
        content_type="application/json",
    )
    assert anonymous.status_code in (401, 403)
