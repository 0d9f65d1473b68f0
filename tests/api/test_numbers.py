"""Numbers from URLs, headers and forms go through one strict parser (policies/numbers.py):
"²" passes str.isdigit but not int(), ids past int64 overflow SQLite; both were 500s (issue 14)."""

from __future__ import annotations

import pytest

from policies import services
from policies.errors import InputError
from policies.numbers import INT64_MAX, number_or_none, number_parse
from tests.conftest import client_for, make_user, token_client

from .conftest import POD, document

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("7", 7),
        (str(INT64_MAX), INT64_MAX),
        ("²", None),
        ("٣", None),
        ("+7", None),
        (" 7", None),
        ("7_0", None),
        ("", None),
        (str(INT64_MAX + 1), None),
        ("9" * 5000, None),
    ],
)
def test_only_ascii_digits_within_int64_are_numbers(text, value):
    assert number_or_none(text) == value
    if value is None:
        with pytest.raises(InputError, match="n must be a whole number"):
            number_parse(text, field="n")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/policies/least/versions/²",
        f"/api/v1/policies/least/versions/{INT64_MAX + 1}",
        f"/api/v1/policies/least/versions/1/diff/{10**30}",
        f"/api/v1/decisions/{INT64_MAX + 1}",
        f"/api/v1/tokens/{INT64_MAX + 1}",
    ],
)
def test_api_ids_out_of_range_are_a_4xx_never_a_500(path):
    api = token_client(make_user("admin-user", "admin"))
    services.policy_create(actor=None, document=document())
    for method in ("get", "delete"):
        assert getattr(api, method)(path).status_code in (400, 404, 405)


def test_api_query_versions_and_etags_out_of_range_are_refused():
    api = token_client(make_user("admin-user", "admin"))
    services.policy_create(actor=None, document=document())
    for version in ("²", str(INT64_MAX + 1)):
        response = api.post(
            "/api/v1/preview", {"policy": "least", "version": version, "pod": POD}, format="json"
        )
        assert response.status_code == 400
    for etag in ('"1-²"', f'"1-{INT64_MAX + 1}"'):
        response = api.put(
            "/api/v1/policies/least", {"document": document()}, format="json", HTTP_IF_MATCH=etag
        )
        assert response.status_code == 412


@pytest.mark.parametrize("query", ["?version=²", f"?version={INT64_MAX + 1}"])
def test_page_numbers_out_of_range_are_a_4xx_never_a_500(query):
    services.policy_create(actor=None, document=document(name="least"))
    viewer = client_for("viewer")
    assert viewer.get(f"/policies/least/{query}").status_code in (400, 404)
    assert viewer.get("/policies/least/diff/²/draft").status_code in (400, 404)
    assert viewer.get(f"/decisions/{INT64_MAX + 1}/").status_code == 404
    assert viewer.get("/cluster/nodes?page=²").status_code in (200, 404)


def test_a_test_case_named_run_can_be_read_updated_and_deleted():
    api = token_client(make_user("editor-user", "editor"))
    services.policy_create(actor=None, document=document())
    created = api.post(
        "/api/v1/policies/least/tests",
        {"name": "run", "pod": POD, "expect": {"verdicts": {"cp-1": "pass"}}},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert api.get("/api/v1/policies/least/tests/run").json()["name"] == "run"
    assert api.post("/api/v1/policies/least/tests/run").status_code == 200  # still runs all
    assert api.delete("/api/v1/policies/least/tests/run").status_code == 204
    assert api.get("/api/v1/policies/least/tests/run").status_code == 404


def test_api_publish_needs_the_exact_etag_of_the_draft():
    api = token_client(make_user("pub-user", "publisher"))
    services.policy_create(actor=None, document=document())
    url = "/api/v1/policies/least/publish"
    assert api.post(url, {"message": "m"}, format="json").status_code == 428
    assert api.post(url, {"message": "m"}, format="json", HTTP_IF_MATCH="*").status_code == 412
    etag = api.get("/api/v1/policies/least")["ETag"]
    api.put(
        "/api/v1/policies/least",
        {"document": document(**{"test policy": "v2"})},
        format="json",
        HTTP_IF_MATCH=etag,
    )
    assert api.post(url, {"message": "m"}, format="json", HTTP_IF_MATCH=etag).status_code == 412
    fresh = api.get("/api/v1/policies/least")["ETag"]
    assert api.post(url, {"message": "m"}, format="json", HTTP_IF_MATCH=fresh).status_code == 201
