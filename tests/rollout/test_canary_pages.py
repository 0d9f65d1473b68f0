"""The canary on the pages (issue 25, item 3): the versions page's Serving card and the
dashboard say which version canaries where and how each arm is doing, with the guard's
threshold; publishers promote and abort from the page; the guard's rollback is a notice on both."""

from __future__ import annotations

import pytest
from django.test import Client

from policies.models import Policy, PolicyActivation
from policies.rollout.canary import canary_guard_rollback
from policies.rollout.guard import trip_claim
from tests.conftest import make_user

from .test_canary_lifecycle import TRIP, _active_and_canary


def _canary(publisher) -> Policy:
    return _active_and_canary(publisher, percent=25, guard={"minPods": 20})


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
def test_the_versions_page_and_the_dashboard_show_the_canary_and_its_guard(extender):
    publisher = make_user("pub", "publisher")
    _canary(publisher)
    viewer = _client(make_user("viewer", "viewer"))
    page = viewer.get("/policies/least/versions/").content.decode()
    assert "v2 canary" in page and "decides 25% of pods, v1 the rest" in page
    assert 'data-arm="canary"' in page and 'data-arm="stable"' in page
    assert "after 20 pods" in page
    assert 'id="canary-promote"' not in page  # viewers read only
    board = viewer.get("/").content.decode()
    assert 'id="canary-lines"' in board
    assert 'decides 25% of pods on <code class="ops-chip">schedweb</code>, v1 the rest' in board


@pytest.mark.django_db(transaction=True)
def test_publishers_promote_and_abort_from_the_page(extender):
    publisher = make_user("pub", "publisher")
    policy = _canary(publisher)
    client = _client(publisher)
    assert 'id="canary-abort"' in client.get("/policies/least/versions/").content.decode()
    response = client.post("/policies/least/canary/abort", {"message": "no"})
    assert response.status_code == 302
    assert not PolicyActivation.objects.filter(policy=policy, role="canary", active=True).exists()
    viewer = _client(make_user("viewer", "viewer"))
    assert viewer.post("/policies/least/canary/promote", {}).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_the_guard_s_rollback_is_a_notice_on_the_policy_page_and_the_dashboard(extender):
    publisher = make_user("pub", "publisher")
    _canary(publisher)
    trip_claim(extender, "least", 2, TRIP)
    assert canary_guard_rollback(name="least", version=2, client=extender)
    viewer = _client(make_user("viewer", "viewer"))
    words = "pods rejected on every node 100.0% of 20 pods against the stable version"
    page = viewer.get("/policies/least/versions/").content.decode()
    assert 'id="guard-notice"' in page and "The guard rolled back canary v2" in page
    assert words in page and 'id="canary-line"' not in page
    board = viewer.get("/").content.decode()
    assert "The guard rolled back" in board and words in board
