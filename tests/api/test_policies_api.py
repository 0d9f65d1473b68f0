"""REST API: policies, drafts with ETags, publish, rollback, deactivate, versions, diff, roles, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from policies.engine.cel.deadline import deadline
from policies.models import AuditEvent, PolicyActivation, PolicyVersion

from ..clocks import StepClock
from .conftest import POD, document

pytestmark = pytest.mark.django_db


def publish_via(api, name: str, body: dict):
    """POST /publish with the draft's current ETag in If-Match, as a client that just read it."""
    etag = api.get(f"/api/v1/policies/{name}")["ETag"]
    return api.post(f"/api/v1/policies/{name}/publish", body, format="json", HTTP_IF_MATCH=etag)


# --- authentication and roles -------------------------------------------------------------------


def test_it_answers_401_without_credentials_and_explains_how_to_authenticate():
    response = APIClient().get("/api/v1/policies")
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"
    assert "Bearer" in response["WWW-Authenticate"]


def test_it_answers_401_for_an_unknown_or_revoked_token(clients, users):
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer swt_nope")
    assert bad.get("/api/v1/policies").json()["detail"] == "unknown API token"
    token_id = clients["viewer"].get("/api/v1/tokens").json()[0]["id"]
    assert clients["viewer"].delete(f"/api/v1/tokens/{token_id}").status_code == 200
    response = clients["viewer"].get("/api/v1/policies")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


@pytest.mark.parametrize("keyword", ["Bearer", "Token", "bearer"])
def test_a_token_works_with_either_keyword_the_readme_names(users, keyword):
    from policies import services

    _, raw = services.api_token_create(actor=users["viewer"], user=users["viewer"], name="kw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {raw}")
    assert client.get("/api/v1/policies").status_code == 200


def test_it_answers_403_for_the_wrong_role_and_names_the_role_needed(clients):
    response = clients["viewer"].post("/api/v1/policies", {"document": document()}, format="json")
    assert response.status_code == 403
    assert response.json()["detail"].startswith("this needs the editor role")
    assert "you have the viewer role" in response.json()["detail"]
    assert (
        clients["nobody"]
        .get("/api/v1/policies")
        .json()["detail"]
        .endswith("ask an admin to add you to a group")
    )


@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"),
    [
        ("get", "/api/v1/policies", None, "viewer"),
        ("post", "/api/v1/policies", {"document": "x"}, "editor"),
        ("put", "/api/v1/policies/least", {"document": "x"}, "editor"),
        ("delete", "/api/v1/policies/least", None, "admin"),
        ("post", "/api/v1/policies/least/publish", {"message": "m"}, "publisher"),
        ("post", "/api/v1/policies/least/rollback", {"version": 1}, "publisher"),
        ("post", "/api/v1/policies/least/deactivate", None, "publisher"),
        ("get", "/api/v1/policies/least/versions", None, "viewer"),
        ("post", "/api/v1/policies/least/tests", {}, "editor"),
        ("get", "/api/v1/audit", None, "viewer"),
        ("post", "/api/v1/validate", {"document": "x"}, "viewer"),
        ("post", "/api/v1/preview", {}, "viewer"),
    ],
)
def test_every_endpoint_checks_its_role(clients, created, method, path, body, allowed):
    roles = ["nobody", "viewer", "editor", "publisher", "admin"]
    for role in roles:
        response = getattr(clients[role], method)(path, body, format="json")
        if roles.index(role) < roles.index(allowed):
            assert response.status_code == 403, (role, response.content)
        else:
            assert response.status_code != 403, (role, response.content)


# --- create, read, update -----------------------------------------------------------------------


def test_creating_a_policy_returns_it_with_an_etag_and_audits(api, created):
    assert created["name"] == "least"
    assert created["schedulerNames"] == ["schedweb"]
    assert created["activeVersion"] is None
    assert AuditEvent.objects.filter(action="policy.create", policy_name="least").count() == 1


def test_a_duplicate_name_is_a_conflict(api, created):
    response = api.post("/api/v1/policies", {"document": document()}, format="json")
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]


def test_invalid_cel_is_a_400_with_field_path_line_and_column(api):
    response = api.post(
        "/api/v1/policies",
        {"document": document(**{"node.requested.cpu": "node.requestd.cpu"})},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_policy"
    [error] = body["errors"]
    assert error["path"] == "variables[0].expression"
    assert (error["line"], error["column"]) == (1, 29)
    assert "did you mean 'requested'" in error["message"]
    assert error["docLine"] == 6


def test_bad_json_is_a_400(api):
    response = api.generic("POST", "/api/v1/policies", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"


def test_unknown_fields_and_wrong_types_are_400s_with_their_paths(api):
    response = api.post(
        "/api/v1/policies", {"document": document(), "colour": "red"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [{"path": "colour", "message": "unknown field"}]
    response = api.post("/api/v1/policies", {"document": 42}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "document"
    response = api.post("/api/v1/policies", ["a"], format="json")
    assert response.status_code == 400


def test_an_oversized_body_is_a_413(api):
    response = api.post("/api/v1/policies", {"document": "#" * 2_000_000}, format="json")
    assert response.status_code == 413
    assert response.json()["error"] == "too_large"


@pytest.mark.parametrize(
    "path",
    ["/api/v1/audit?actor=a%00b", "/api/v1/policies?search=%00", "/api/v1/decisions?pod=x%00"],
)
def test_a_nul_character_in_a_query_parameter_is_a_400_on_every_database(api, path):
    """PostgreSQL refuses NUL in text comparisons (a 500 before); SQLite would just not match."""
    response = api.get(path)
    assert response.status_code == 400
    assert "contains a NUL character" in response.json()["detail"]


def test_a_nul_character_in_a_document_is_refused_with_its_field(api):
    response = api.post("/api/v1/policies", {"document": "name: a\x00b"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "document"


def test_a_draft_save_needs_the_current_etag(api, created):
    etag = api.get("/api/v1/policies/least")["ETag"]
    new = document().replace("description: test policy", "description: v2")
    missing = api.put("/api/v1/policies/least", {"document": new}, format="json")
    assert missing.status_code == 428
    saved = api.put("/api/v1/policies/least", {"document": new}, format="json", HTTP_IF_MATCH=etag)
    assert saved.status_code == 200
    assert saved["ETag"] != etag
    assert saved.json()["description"] == "v2"


def test_a_stale_etag_gets_412_and_changes_nothing(api, created):
    etag = api.get("/api/v1/policies/least")["ETag"]
    first = document().replace("description: test policy", "description: first")
    second = document().replace("description: test policy", "description: second")
    assert (
        api.put(
            "/api/v1/policies/least", {"document": first}, format="json", HTTP_IF_MATCH=etag
        ).status_code
        == 200
    )
    stale = api.put(
        "/api/v1/policies/least", {"document": second}, format="json", HTTP_IF_MATCH=etag
    )
    assert stale.status_code == 412
    assert "changed since you read it" in stale.json()["detail"]
    assert api.get("/api/v1/policies/least").json()["description"] == "first"


def test_a_policy_cannot_be_renamed_through_its_draft(api, created):
    etag = api.get("/api/v1/policies/least")["ETag"]
    response = api.put(
        "/api/v1/policies/least",
        {"document": document(name="other")},
        format="json",
        HTTP_IF_MATCH=etag,
    )
    assert response.status_code == 400
    assert "cannot be renamed" in response.json()["detail"]


def test_listing_paginates_and_filters(api):
    for name in ("alpha", "beta", "gamma"):
        api.post(
            "/api/v1/policies",
            {"document": document(name=name, scheduler=f"s-{name}")},
            format="json",
        )
    publish_via(api, "beta", {"message": "go"})
    page = api.get("/api/v1/policies?limit=2").json()
    assert (
        page["count"] == 3
        and [p["name"] for p in page["results"]] == ["alpha", "beta"]
        and page["next"]
    )
    assert [p["name"] for p in api.get("/api/v1/policies?active=true").json()["results"]] == [
        "beta"
    ]
    assert [p["name"] for p in api.get("/api/v1/policies?search=gam").json()["results"]] == [
        "gamma"
    ]
    assert [
        p["name"] for p in api.get("/api/v1/policies?schedulerName=s-beta").json()["results"]
    ] == ["beta"]
    assert api.get("/api/v1/policies?active=maybe").status_code == 400


@pytest.mark.parametrize(
    ("method", "path", "names"),
    [
        ("get", "/api/v1/policies/nope", "no policy named 'nope'"),
        ("put", "/api/v1/policies/nope", "no policy named 'nope'"),
        ("get", "/api/v1/policies/nope/versions", "no policy named 'nope'"),
        ("get", "/api/v1/policies/nope/tests/case", "no policy named 'nope'"),
        ("get", "/api/v1/policies/least/versions/7", "no version 7 of policy 'least'"),
        ("get", "/api/v1/policies/least/tests/nope", "no test case 'nope' in policy 'least'"),
        ("get", "/api/v1/decisions/99", "no decision 99"),
        ("get", "/api/v1/nope", "no such endpoint: /api/v1/nope"),
    ],
)
def test_something_unknown_is_a_404_in_the_api_error_shape_saying_what_is_missing(
    api, created, method, path, names
):
    response = getattr(api, method)(path, {"document": "x"} if method == "put" else None)
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": names}


def test_a_get_edit_put_round_trip_uses_one_field_name(api, created):
    read = api.get("/api/v1/policies/least")
    body = read.json()
    assert body["document"] == document()
    edited = body["document"].replace("description: test policy", "description: edited")
    response = api.put(
        "/api/v1/policies/least",
        {"document": edited},
        format="json",
        HTTP_IF_MATCH=read["ETag"],
    )
    assert response.status_code == 200, response.content
    assert response.json()["document"] == edited
    assert api.get("/api/v1/policies/least").json()["description"] == "edited"


def test_the_old_field_name_draft_is_still_accepted_and_said_deprecated(api, created):
    read = api.get("/api/v1/policies/least")
    assert read.json()["draft"] == read.json()["document"]  # still answered under its old name
    edited = read.json()["draft"].replace("description: test policy", "description: old name")
    response = api.put(
        "/api/v1/policies/least", {"draft": edited}, format="json", HTTP_IF_MATCH=read["ETag"]
    )
    assert response.status_code == 200, response.content
    assert response.json()["document"] == edited
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for component in ("PolicyWriteRequest", "Policy"):
        draft = schema["components"]["schemas"][component]["properties"]["draft"]
        assert draft["deprecated"] is True and "Deprecated" in draft["description"]


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        ({"document": "a", "draft": "b"}, "draft", "give document or draft, not both"),
        ({}, "document", "This field is required."),
        ({"description": "d"}, "document", "This field is required."),
    ],
)
def test_a_put_with_both_names_or_neither_is_a_400_naming_the_field(
    api, created, body, path, message
):
    etag = api.get("/api/v1/policies/least")["ETag"]
    response = api.put("/api/v1/policies/least", body, format="json", HTTP_IF_MATCH=etag)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert {"path": path, "message": message} in response.json()["errors"]
    assert api.get("/api/v1/policies/least").json()["document"] == document()


# --- publish, rollback, deactivate, delete ------------------------------------------------------


def test_publishing_creates_an_immutable_active_version(api, created):
    response = publish_via(api, "least", {"message": "first release"})
    assert response.status_code == 201, response.content
    assert (
        response.json()["version"]["number"] == 1 and response.json()["version"]["active"] is True
    )
    detail = api.get("/api/v1/policies/least").json()
    assert (detail["activeVersion"], detail["latestVersion"]) == (1, 1)
    version = api.get("/api/v1/policies/least/versions/1").json()
    assert version["document"] == document() and version["message"] == "first release"
    assert AuditEvent.objects.filter(action="policy.publish", version=1).exists()


def test_publishing_needs_a_message(api, created):
    response = publish_via(api, "least", {"message": "  "})
    assert response.status_code == 400


def test_publishing_a_policy_whose_tests_fail_is_refused_with_every_failure(api, created):
    case = {
        "name": "never",
        "pod": POD,
        "cluster": "demo",
        "expect": {"winner": "no-such-node", "verdicts": {"a-small-2": "pass"}},
    }
    assert api.post("/api/v1/policies/least/tests", case, format="json").status_code == 201
    response = publish_via(api, "least", {"message": "try"})
    assert response.status_code == 422
    [result] = response.json()["results"]
    assert result["name"] == "never" and result["passed"] is False
    assert any(
        "expected the policy's top node (policy-level winner) no-such-node" in f
        for f in result["failures"]
    )
    assert (
        "node a-small-2: expected the policy's pass, got reject (enough-cpu: needs 500m CPU)"
        in result["failures"]
    )
    assert PolicyVersion.objects.count() == 0


def published_twice(api) -> None:
    """least as v1, then with another description as v2 (active)."""
    publish_via(api, "least", {"message": "v1"})
    etag = api.get("/api/v1/policies/least")["ETag"]
    api.put(
        "/api/v1/policies/least",
        {"document": document().replace("test policy", "second")},
        format="json",
        HTTP_IF_MATCH=etag,
    )
    publish_via(api, "least", {"message": "v2"})


def test_rollback_takes_an_optional_reason_kept_in_the_audit_log(api, created):
    published_twice(api)
    too_long = api.post(
        "/api/v1/policies/least/rollback", {"version": 1, "message": "x" * 2001}, format="json"
    )
    assert too_long.status_code == 400 and too_long.json()["errors"][0]["path"] == "message"
    assert api.get("/api/v1/policies/least").json()["activeVersion"] == 2
    response = api.post(
        "/api/v1/policies/least/rollback",
        {"version": 1, "message": "v2 broke gpu pods"},
        format="json",
    )
    assert response.status_code == 200, response.content
    event = AuditEvent.objects.get(action="policy.rollback")
    assert event.detail["message"] == "v2 broke gpu pods"


def test_rollback_activates_an_earlier_version_and_a_missing_one_is_404(api, created):
    published_twice(api)
    assert api.get("/api/v1/policies/least").json()["activeVersion"] == 2
    response = api.post("/api/v1/policies/least/rollback", {"version": 1}, format="json")
    assert response.status_code == 200 and response.json()["number"] == 1
    assert api.get("/api/v1/policies/least").json()["activeVersion"] == 1
    assert PolicyActivation.objects.filter(policy__name="least").count() == 3
    assert PolicyActivation.objects.filter(policy__name="least", active=True).count() == 1
    missing = api.post("/api/v1/policies/least/rollback", {"version": 9}, format="json")
    assert missing.status_code == 404 and "no version 9" in missing.json()["detail"]
    again = api.post("/api/v1/policies/least/rollback", {"version": 1}, format="json")
    assert again.status_code == 409


def test_deleting_an_active_policy_is_refused_with_a_reason(api, created):
    publish_via(api, "least", {"message": "v1"})
    response = api.delete("/api/v1/policies/least")
    assert response.status_code == 409
    assert "deactivate it before deleting it" in response.json()["detail"]
    assert (
        api.post("/api/v1/policies/least/deactivate", format="json").json()["activeVersion"] is None
    )
    assert api.post("/api/v1/policies/least/deactivate", format="json").status_code == 409
    assert api.delete("/api/v1/policies/least").status_code == 204
    assert api.get("/api/v1/policies/least").status_code == 404


def test_two_active_policies_cannot_serve_the_same_scheduler_name(api):
    api.post("/api/v1/policies", {"document": document(name="one")}, format="json")
    api.post("/api/v1/policies", {"document": document(name="two")}, format="json")
    assert publish_via(api, "one", {"message": "x"}).status_code == 201
    response = publish_via(api, "two", {"message": "x"})
    assert response.status_code == 409
    assert "already served by policy one" in response.json()["detail"]
    assert response.json()["conflict"] == {"schedulerNames": ["schedweb"], "policy": "one"}
    api.post("/api/v1/policies/one/deactivate", format="json")
    assert publish_via(api, "two", {"message": "x"}).status_code == 201


def test_the_diff_of_two_versions_shows_text_and_rule_changes(api, created):
    publish_via(api, "least", {"message": "v1"})
    etag = api.get("/api/v1/policies/least")["ETag"]
    changed = document().replace("variables.freeCpu * 100", "variables.freeCpu * 90") + (
        "  - name: few-pods\n    expression: 100 - node.podCount\n"
    )
    api.put("/api/v1/policies/least", {"document": changed}, format="json", HTTP_IF_MATCH=etag)
    publish_via(api, "least", {"message": "v2"})
    diff = api.get("/api/v1/policies/least/versions/1/diff/2").json()
    assert diff["rules"] == {
        "added": ["scores/few-pods"],
        "removed": [],
        "changed": ["scores/free-cpu"],
    }
    assert "-    expression: variables.freeCpu * 100 / node.allocatable.cpu" in diff["unified"]
    assert api.get("/api/v1/policies/least/versions/1/diff/7").status_code == 404


# --- validate and preview ----------------------------------------------------------------------


def test_validate_reports_every_error_without_storing_anything(api):
    bad = document(
        **{
            "node.allocatable.cpu - ": "node.alocatable.cpu - ",
            "pod.requests.cpu\n": "pod.requests.cpu + 1.5\n",
        }
    )
    response = api.post("/api/v1/validate", {"document": bad}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    assert [e["path"] for e in body["errors"]] == [
        "variables[0].expression",
        "filters[0].expression",
    ]
    assert api.post("/api/v1/validate", {"document": document()}, format="json").json() == {
        "valid": True,
        "errors": [],
    }
    assert api.get("/api/v1/policies").json()["count"] == 0


def test_preview_of_a_document_gives_per_node_results_on_the_demo_cluster(api):
    response = api.post(
        "/api/v1/preview", {"document": document(), "pod": POD, "cluster": "demo"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["pod"] == "default/web-1" and body["cluster"]["source"] == "demo"
    nodes = {n["node"]: n for n in body["result"]["nodes"]}
    assert nodes["cp-1"]["verdict"] in ("pass", "reject")
    assert all(0 <= n["extenderScore"] <= 10 for n in nodes.values())
    assert body["result"]["summary"]["nodes"] == len(nodes)


def test_preview_accepts_a_pod_as_yaml_text_and_refuses_a_non_pod(api):
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: schedweb\n  containers: [{name: c, image: x}]\n"
    assert (
        api.post(
            "/api/v1/preview", {"document": document(), "pod": text}, format="json"
        ).status_code
        == 200
    )
    response = api.post(
        "/api/v1/preview", {"document": document(), "pod": {"kind": "Service"}}, format="json"
    )
    assert response.status_code == 400 and "expected a Pod" in response.json()["detail"]
    response = api.post(
        "/api/v1/preview", {"document": document(), "pod": "a: [unclosed"}, format="json"
    )
    assert response.status_code == 400 and "not valid YAML" in response.json()["detail"]
    for pod in ({"metadata": ["a"]}, {"metadata": "abc"}, "metadata: [a]\n"):
        response = api.post("/api/v1/preview", {"document": document(), "pod": pod}, format="json")
        assert response.status_code == 400, response.content  # not a 500 (issue 15)
        assert "metadata: expected an object" in response.json()["detail"]


def test_preview_names_what_admission_added_to_a_pod_given_as_text(api):
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: schedweb\n"
        "  containers: [{name: c, image: x, resources: {limits: {memory: 1Gi}}}]\n"
    )
    body = api.post("/api/v1/preview", {"document": document(), "pod": text}, format="json").json()
    assert body["admissionDefaults"] == [
        "spec.containers[0].resources.requests.memory: 1Gi (its limit)",
        "spec.tolerations: node.kubernetes.io/not-ready:NoExecute for 300s",
        "spec.tolerations: node.kubernetes.io/unreachable:NoExecute for 300s",
    ]
    assert body["kubeScheduler"]["admissionDefaults"] == body["admissionDefaults"]
    assert body["answer"]["outcome"] == "scheduled" and body["answer"]["failedScheduling"] is None


def test_an_unschedulable_previews_answer_is_kube_schedulers_whole_message(api):
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  schedulerName: schedweb\n"
        "  containers: [{name: c, image: x, resources: {requests: {cpu: '500'}}}]\n"
    )
    body = api.post("/api/v1/preview", {"document": document(), "pod": text}, format="json").json()
    answer, message = body["answer"], body["kubeScheduler"]["failedScheduling"]
    assert answer["outcome"] == "unschedulable" and message.startswith("0/")
    assert answer["failedScheduling"] == message and "Insufficient cpu" in message
    assert answer["summary"] == f"unschedulable: {message}"


def test_preview_compare_reports_changed_verdicts_against_the_active_version(api, created):
    publish_via(api, "least", {"message": "v1"})
    etag = api.get("/api/v1/policies/least")["ETag"]
    stricter = document().replace(
        "variables.freeCpu >= pod.requests.cpu", "variables.freeCpu >= pod.requests.cpu * 8"
    )
    api.put("/api/v1/policies/least", {"document": stricter}, format="json", HTTP_IF_MATCH=etag)
    response = api.post(
        "/api/v1/preview",
        {"policy": "least", "pod": POD, "cluster": "demo", "compare": True},
        format="json",
    )
    compare = response.json()["compare"]
    assert compare["againstVersion"] == 1
    assert compare["verdictChanges"] > 0
    assert all(
        c["before"]["verdict"] == "pass" and c["after"]["verdict"] == "reject"
        for c in compare["changes"]
        if c["verdictChanged"]
    )
    # what would change in the cluster: the feasible set shrinks by the nodes now rejected
    assert compare["moves"] is True
    removed = sorted(c["node"] for c in compare["changes"] if c["verdictChanged"])
    assert compare["feasibleRemoved"] == removed
    assert compare["feasibleAfter"] == compare["feasibleBefore"] - len(removed)
    assert sum(compare["reasonsAfter"].values()) > sum(compare["reasonsBefore"].values())


def test_the_rest_preview_of_seed_003_on_the_demo_has_one_answer(api):
    """Issue 23: the policy's top score over every node is cp-1, which kube-scheduler rejects
    (its control-plane taint); the answer is kube-scheduler's pick, c-mem-1, in `answer` and
    `kubeScheduler` alike, and the policy's ranking is a column (policyRank), no winner."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "policies" / "examples"
    response = api.post(
        "/api/v1/preview",
        {
            "document": (examples / "seed-003-name-length.yaml").read_text(),
            "pod": (examples / "pods" / "abc.yaml").read_text(),
            "cluster": "demo",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    answer, cycle = body["answer"], body["kubeScheduler"]
    assert answer["pick"] == cycle["pick"] == ["c-mem-1"]
    assert answer["outcome"] == "scheduled" and answer["summary"] == "lands on c-mem-1"
    assert answer["reasons"] == {
        "node(s) had untolerated taint(s)": 8,
        "node(s) were unschedulable": 1,
    }
    assert "winner" not in response.content.decode().lower()
    policy_level = {n["node"]: n["policyRank"] for n in body["result"]["nodes"]}
    assert policy_level["cp-1"] == 1  # over every node: a column, not the answer
    in_cycle = {n["node"]: n for n in cycle["nodes"]}
    assert in_cycle["c-mem-1"]["policyRank"] == 1 and in_cycle["c-mem-1"]["policyTotal"] == 100
    assert in_cycle["cp-1"]["policyRank"] is None  # never sent to the extender
    assert answer["finalTotal"] == in_cycle["c-mem-1"]["finalTotal"]


def test_preview_input_errors_are_400s(api):
    assert api.post("/api/v1/preview", {"pod": POD}, format="json").status_code == 400
    assert (
        api.post(
            "/api/v1/preview",
            {"document": document(), "pod": POD, "cluster": "mars"},
            format="json",
        ).status_code
        == 400
    )
    response = api.post("/api/v1/preview", {"policy": "nope", "pod": POD}, format="json")
    assert response.status_code == 404
    response = api.post("/api/v1/preview", {"document": "name: [", "pod": POD}, format="json")
    assert response.status_code == 400 and response.json()["error"] == "invalid_policy"


# --- tokens and audit -------------------------------------------------------------------------------


def test_tokens_are_created_once_listed_without_secret_and_revoked(clients):
    client = clients["editor"]
    created = client.post("/api/v1/tokens", {"name": "ci"}, format="json").json()
    assert created["token"].startswith("swt_") and created["prefix"] == created["token"][:12]
    listed = client.get("/api/v1/tokens").json()
    assert {t["name"] for t in listed} == {"tests", "ci"} and all("token" not in t for t in listed)
    assert client.delete(f"/api/v1/tokens/{created['id']}").json()["revokedAt"] is not None
    assert client.delete(f"/api/v1/tokens/{created['id']}").status_code == 409
    other = clients["viewer"].get("/api/v1/tokens").json()[0]["id"]
    assert client.delete(f"/api/v1/tokens/{other}").status_code == 404


def test_the_audit_log_records_who_did_what(api, created):
    publish_via(api, "least", {"message": "v1"})
    events = api.get("/api/v1/audit?policy=least").json()["results"]
    assert [e["action"] for e in events] == ["policy.publish", "policy.create"]
    assert events[0]["actor"] == "admin" and events[0]["version"] == 1


# --- the wall-clock guard (SCHEDWEB_PREVIEW_SECONDS, issue 15) -------------------------------
# The view sets the limit, the test sets the clock (issue 22): under `deadline(None, clock=)` the
# view's deadline reads a StepClock that moves one second each time it is read, so a request is
# past a limit of N seconds once it has looked at the clock N times, however fast the machine.


def looks(settings, request) -> int:
    """How many times `request()` looks at the clock under a limit it never reaches."""
    settings.SCHEDWEB_PREVIEW_SECONDS = 10**6
    clock = StepClock()
    with deadline(None, clock=clock):
        request()
    return clock.looks


def test_a_preview_past_the_time_limit_answers_503_too_slow(api, settings):
    def validate():
        assert api.post("/api/v1/validate", {"document": document()}, format="json").json()["valid"]

    body = {"document": document(), "pod": POD, "cluster": "demo"}
    # a limit the compile fits in (validating compiles and no more): the preview compiles, then
    # looks at the clock before each of the 36 nodes and stops among them
    settings.SCHEDWEB_PREVIEW_SECONDS = looks(settings, validate)
    with deadline(None, clock=StepClock()):
        validate()
        response = api.post("/api/v1/preview", body, format="json")
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "too_slow"
    assert "simplify its expressions" in response.json()["detail"]
    assert "SCHEDWEB_" not in response.json()["detail"]  # what to do, not the configuration
    settings.SCHEDWEB_PREVIEW_SECONDS = 0  # no limit
    assert api.post("/api/v1/preview", body, format="json").status_code == 200


def test_a_validation_past_the_time_limit_answers_503_too_slow(api, settings):
    def validate(text: str):
        return api.post("/api/v1/validate", {"document": text}, format="json")

    c40 = "[" + ", ".join(str(i) for i in range(40)) + "]"
    folded = f"{c40}.all(x, {c40}.all(y, {c40}.all(z, x + y + z >= 0)))"  # folded: 64 000 steps
    slow = document(
        **{
            "variables.freeCpu >= pod.requests.cpu": (
                f"({folded}) && variables.freeCpu >= pod.requests.cpu"
            )
        }
    )
    # the limit a plain document's validation fits in: folding looks at the clock as it
    # evaluates, 64 000 steps more often than a whole plain compile does
    settings.SCHEDWEB_PREVIEW_SECONDS = looks(settings, lambda: validate(document()))
    with deadline(None, clock=StepClock()):
        assert validate(document()).json()["valid"]
        response = validate(slow)
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "too_slow"
    settings.SCHEDWEB_PREVIEW_SECONDS = 10**6  # a limit it never reaches: the document is valid
    with deadline(None, clock=StepClock()):
        assert validate(slow).json()["valid"]


def _served_error_codes(api) -> tuple[dict, dict[str, str]]:
    """The served schema and its Error.error enum, each code with the meaning it documents."""
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]
    field = components["Error"]["properties"]["error"]
    enum = components[field["$ref"].rsplit("/", 1)[1]] if "$ref" in field else field
    documented = dict(re.findall(r"^\* `([a-z_]+)` - (.+)$", enum["description"], re.M))
    assert sorted(enum["enum"]) == sorted(documented)
    return schema, documented


def test_every_error_code_the_code_base_can_answer_is_documented_in_the_schema(api):
    _, documented = _served_error_codes(api)
    assert all(len(meaning) > 15 for meaning in documented.values())
    root = Path(__file__).resolve().parents[2]
    wire = ("policies/extender", "policies/admission")  # their own protocols' answers, not REST's
    sources = "\n".join(
        p.read_text()
        for folder in ("policies", "schedweb")
        for p in (root / folder).rglob("*.py")
        if not str(p.relative_to(root)).startswith(wire)
    )
    emitted = set(re.findall(r'error_body\(\s*"([a-z_]+)"', sources))
    emitted |= set(re.findall(r'_api_error\(\s*request,\s*\d+,\s*"([a-z_]+)"', sources))
    emitted |= set(re.findall(r'"error": "([a-z_]+)"', sources))
    emitted |= set(re.findall(r'^\s+code = "([a-z_]+)"', sources, re.M))
    emitted |= set(re.findall(r'"(invalid_policy)"', sources))
    assert {"invalid", "not_found", "server_error", "too_slow"} <= emitted
    assert emitted <= set(documented), sorted(emitted - set(documented))
    assert "invalid_input" not in emitted | set(documented)  # now `invalid`, like all others


def test_every_error_answer_in_the_schema_is_an_error_body(api):
    schema, _ = _served_error_codes(api)
    walked = 0
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            for status, response in operation.get("responses", {}).items():
                if int(status) < 400:
                    continue
                walked += 1
                [content] = response["content"].values()
                assert content["schema"] == {"$ref": "#/components/schemas/Error"}, (
                    method,
                    path,
                    status,
                )
    assert walked > 100


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("get", "/api/v1/cluster/nodes?label=a%00b", None, "invalid"),
        ("get", "/api/v1/policies/nope", None, "not_found"),
        ("post", "/api/v1/policies", {"document": ": ["}, "invalid_policy"),
        ("post", "/api/v1/policies", {"nope": 1}, "invalid"),
        ("put", "/api/v1/policies/least", {"document": "x"}, "precondition_required"),
        ("patch", "/api/v1/policies/least", {}, "method_not_allowed"),
    ],
)
def test_errors_the_api_answers_carry_a_documented_code(api, created, method, path, body, code):
    _, documented = _served_error_codes(api)
    response = getattr(api, method)(path, body, format="json")
    assert response.status_code >= 400
    assert response.json()["error"] == code and code in documented


def test_a_type_error_over_the_api_reads_plainly_with_cels_own_words_in_cel_message(api):
    text = document().replace("pod.requests.cpu", "pod.labels['tier']", 1)
    response = api.post("/api/v1/validate", {"document": text}, format="json")
    [error] = response.json()["errors"]
    assert error["message"].startswith("'>=' cannot compare an int with a string; convert")
    assert error["celMessage"].startswith(
        "no matching overload for '>=' applied to (int, string); expected"
    )
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert "celMessage" in schema["components"]["schemas"]["FieldError"]["properties"]


def test_the_schema_types_error_bodies(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    error = schema["components"]["schemas"]["Error"]["properties"]
    assert "enum" in str(schema["components"]["schemas"]) and error["errors"]["items"] == {
        "$ref": "#/components/schemas/FieldError"
    }
    field = schema["components"]["schemas"]["FieldError"]["properties"]
    assert {"path", "message", "line", "column", "docLine", "docColumn"} <= set(field)


def test_a_document_slow_to_compile_answers_503_too_slow_not_500(api, settings):
    def validate(text: str):
        return api.post("/api/v1/validate", {"document": text}, format="json")

    # 25 rules of 480 `&&` terms (250 KiB, every limit kept): seconds of parsing and checking,
    # with nothing to evaluate or fold; the guard reaches the compile phases too
    chain = " && ".join(["node.name == 'a'"] * 480)
    slow = "name: t\nschedulerNames: [schedweb]\nfilters:\n" + "".join(
        f"  - name: f{k}\n    expression: {chain!r}\n" for k in range(25)
    )
    one_rule = slow[: slow.index("  - name: f1\n")]
    # the limit one rule's compile fits in: 25 of them look at the clock more often
    settings.SCHEDWEB_PREVIEW_SECONDS = looks(settings, lambda: validate(one_rule))
    with deadline(None, clock=StepClock()):
        assert validate(one_rule).json()["valid"]
        response = validate(slow)
        assert response.status_code == 503, response.content
        assert response.json()["error"] == "too_slow"
        assert "to compile and evaluate" in response.json()["detail"]
        body = {"document": slow, "pod": POD, "cluster": "demo"}
        response = api.post("/api/v1/preview", body, format="json")
        assert (response.status_code, response.json()["error"]) == (503, "too_slow")
    settings.SCHEDWEB_PREVIEW_SECONDS = 0  # no limit: the same document is valid
    assert validate(slow).json()["valid"]
