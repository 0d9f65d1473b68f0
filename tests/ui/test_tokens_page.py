"""/account/tokens/: create a token (shown once), use it, list it, revoke it; only one's own."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from policies import services
from policies.models import ApiToken
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db


def _api(raw: str) -> int:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api.get("/api/v1/me").status_code


def test_a_viewer_creates_a_token_sees_it_once_and_it_works_until_revoked():
    client = client_for("viewer", "vera")
    created = client.post("/account/tokens/", {"name": "ci"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    raw = re.search(r'id="new-token-value">(swt_[^<]+)<', created.content.decode()).group(1)
    assert _api(raw) == 200
    listing = client.get("/account/tokens/").content.decode()
    assert raw not in listing and raw[:12] + "…" in listing  # the prefix only, from now on
    token = ApiToken.objects.get(name="ci")
    revoked = client.post("/account/tokens/", {"revoke": str(token.pk)}, follow=True)
    assert b"Revoked ci" in revoked.content
    assert _api(raw) == 401


@pytest.mark.parametrize("name", ["", "   ", "x" * 101])
def test_a_bad_name_is_refused_with_422_and_no_token(name):
    response = client_for("viewer").post("/account/tokens/", {"name": name})
    assert response.status_code == 422
    assert b"a token needs a name of 1 to 100 characters" in response.content
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("revoke", ["999999", "not-a-number", "²", "99999999999999999999999"])
def test_revoking_a_missing_or_malformed_id_is_404(revoke):
    assert client_for("viewer").post("/account/tokens/", {"revoke": revoke}).status_code == 404


def test_someone_elses_token_is_neither_listed_nor_revocable():
    owner = make_user("owner", "admin")
    token, raw = services.api_token_create(actor=owner, user=owner, name="theirs")
    other = client_for("viewer", "other")
    assert b"theirs" not in other.get("/account/tokens/").content
    assert other.post("/account/tokens/", {"revoke": str(token.pk)}).status_code == 404
    assert _api(raw) == 200


def test_signed_out_visitors_are_sent_to_sign_in_and_users_without_a_role_are_refused():
    from django.test import Client

    answer = Client().get("/account/tokens/")
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")
    assert client_for(None).post("/account/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()
