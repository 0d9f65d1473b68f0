"""The error pages (policies/ui/errors.py): 400, 403, 404, 500 and a CSRF failure answer inside
the app's chrome, with its navigation, for signed-in users and anonymous ones; under /api/ the
API's JSON error shape instead."""

from __future__ import annotations

from unittest import mock

import pytest
from django.test import Client

from tests.conftest import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.ui.error_urls")]

NAV = ('id="main-nav"', 'href="/policies/"', 'href="/cluster/"', 'href="/"')


@pytest.fixture(params=["signed in", "anonymous"])
def client(request) -> Client:
    client = Client(raise_request_exception=False)
    if request.param == "signed in":
        client.force_login(make_user("vera", "viewer"))
    return client


def in_the_chrome(response, status: int) -> str:
    body = response.content.decode()
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert all(part in body for part in NAV), body[:400]
    assert f'data-status="{status}"' in body
    return body


def test_a_missing_page_is_a_404_inside_the_chrome_naming_the_address(client):
    body = in_the_chrome(client.get("/nope/"), 404)
    assert "Nothing is here" in body and '<code class="mono">/nope/</code>' in body


@pytest.mark.parametrize(
    "path", ["/policies/no-such-policy/", "/policies/no-such-policy/versions/"]
)
def test_a_missing_policy_is_a_404_inside_the_chrome_not_djangos_sentence(path):
    client = Client()
    client.force_login(make_user("vera", "viewer"))
    body = in_the_chrome(client.get(path), 404)
    assert f'<code class="mono">{path}</code>' in body
    assert "No Policy matches the given query" not in body


def test_a_404_shows_the_address_escaped(client):
    body = in_the_chrome(client.get("/x%3Cscript%3Ealert(1)%3C/script%3E/"), 404)
    assert "<script>alert(1)" not in body and "&lt;script&gt;alert(1)" in body


def test_a_server_error_is_a_500_inside_the_chrome_without_the_error_text(client):
    body = in_the_chrome(client.get("/_test/boom/"), 500)
    assert "Something went wrong on our side" in body and "a bug" not in body


def test_a_500_whose_chrome_fails_too_is_still_a_page(client):
    with mock.patch("policies.ui.errors.render", side_effect=RuntimeError("template broken")):
        response = client.get("/_test/boom/")
    assert response.status_code == 500
    assert b"Something went wrong on our side" in response.content
    assert b'href="/"' in response.content


def test_a_permission_denied_is_a_403_inside_the_chrome(client):
    body = in_the_chrome(client.get("/_test/denied/"), 403)
    assert "You cannot open this page" in body


def test_a_bad_request_is_a_400_inside_the_chrome(client):
    body = in_the_chrome(client.get("/_test/suspicious/"), 400)
    assert "This request cannot be used" in body and "forged" not in body


def test_a_form_posted_without_its_csrf_token_is_a_403_inside_the_chrome():
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("eddie", "editor"))
    body = in_the_chrome(client.post("/policies/", {"document": "name: x"}), 403)
    assert "This form expired" in body and "Reload it" in body


def test_under_api_errors_stay_json_in_the_api_error_shape(client):
    missing = client.get("/api/v1/nope")
    assert missing.status_code == 404
    assert missing.json() == {"error": "not_found", "detail": "no such endpoint: /api/v1/nope"}
    broken = client.get("/api/v1/_test/boom")
    assert broken.status_code == 500
    assert broken.json() == {"error": "server_error", "detail": "internal error; it was logged"}
