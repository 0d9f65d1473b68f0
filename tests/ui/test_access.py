"""The one access rule of every page (policies/ui/access.py), on pages of each kind: the ops
pages, the policy pages and the cluster page."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError

from tests.conftest import client_for

pytestmark = pytest.mark.django_db

PAGES = ["/", "/decisions/", "/connect/", "/policies/", "/cluster/"]


@pytest.fixture(autouse=True)
def demo_cluster(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


@pytest.mark.parametrize("url", PAGES)
def test_an_htmx_caller_without_a_session_comes_back_to_the_browsers_page(client, url):
    response = client.get(
        url,
        headers={
            "HX-Request": "true",
            "HX-Current-URL": "https://elsewhere.example/policies/p/?pod=web/a&x=1",
        },
    )
    assert response.status_code == 204
    # the path and query of the page, urlencoded; never the other host
    assert response["HX-Redirect"] == "/login/?next=%2Fpolicies%2Fp%2F%3Fpod%3Dweb%2Fa%26x%3D1"


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_a_role_sees_the_role_it_needs_what_it_allows_and_their_own(url):
    response = client_for(None).get(url)
    body = response.content.decode()
    assert response.status_code == 403
    assert "This needs the viewer role; you have no role" in body
    assert "Viewers can read policies" in body


def test_an_htmx_caller_without_the_role_gets_the_sentence_as_text():
    response = client_for(None).get("/cluster/", headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("This needs the viewer role (read policies")


def test_a_refused_write_names_the_users_own_role():
    client = client_for("viewer")
    client.handler.enforce_csrf_checks = False
    response = client.post("/policies/", {"template": "blank", "name": "x"})
    assert response.status_code == 403
    assert "This needs the editor role; you have the viewer role" in response.content.decode()


@pytest.mark.parametrize("url", PAGES)
def test_every_page_refuses_a_method_it_does_not_serve(url):
    client = client_for("admin")
    client.handler.enforce_csrf_checks = False
    assert client.delete(url).status_code == 405


@pytest.mark.parametrize("url", PAGES)
def test_a_database_that_cannot_load_the_session_is_a_503_page_on_every_page(url):
    client = client_for("viewer")
    with mock.patch(
        "django.contrib.auth.get_user", side_effect=OperationalError("connection refused")
    ):
        response = client.get(url)
    assert response.status_code == 503
    assert "schedweb cannot reach its database" in response.content.decode()
