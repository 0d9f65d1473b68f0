"""The site root is the dashboard behind sign-in; liveness answers without it."""

import pytest


@pytest.mark.django_db
def test_anonymous_root_redirects_to_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/")


def test_healthz_says_ok(client):
    response = client.get("/healthz")
    assert response.json() == {"status": "ok"}
