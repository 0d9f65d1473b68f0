"""Errors tell API callers what to do, not how the server is configured (issue 27): a 503 for a
cluster schedweb cannot read named the kubeconfig's path and environment variables. The cause
goes to the log, and to admins."""

from __future__ import annotations

import logging

import pytest

from .conftest import POD, document

CONFIGURATION = ("SCHEDWEB_", "KUBERNETES_SERVICE_HOST", "kubeconfig", "missing-kubeconfig")


@pytest.fixture
def unreachable_cluster(settings, tmp_path):
    """The live source for a cluster with no snapshot in Redis and a kubeconfig that is not
    there: the direct listing fails on configuration."""
    settings.SCHEDWEB_CLUSTER_NAME = "api-wording-no-snapshot"
    settings.SCHEDWEB_KUBECONFIG = tmp_path / "missing-kubeconfig"
    return {"document": document(), "pod": POD, "cluster": "live"}


def test_a_503_for_an_unavailable_cluster_says_what_to_do_and_nothing_of_the_configuration(
    clients, unreachable_cluster, caplog
):
    with caplog.at_level(logging.WARNING, logger="policies.api.errors"):
        response = clients["viewer"].post("/api/v1/preview", unreachable_cluster, format="json")
    assert response.status_code == 503, response.content
    body = response.json()
    assert body["error"] == "cluster_unavailable"
    assert "retry in a few seconds" in body["detail"]
    assert response["Retry-After"] == "5"
    text = response.content.decode()
    assert not [word for word in CONFIGURATION if word in text]
    assert "adminDetail" not in body
    # the cause, for whoever operates schedweb
    assert "missing-kubeconfig" in caplog.text


def test_an_admin_is_told_the_cause(clients, unreachable_cluster):
    response = clients["admin"].post("/api/v1/preview", unreachable_cluster, format="json")
    assert response.status_code == 503
    assert "missing-kubeconfig" in response.json()["adminDetail"]


def test_without_a_kubeconfig_the_unset_variable_is_not_named_to_callers(
    clients, unreachable_cluster, settings
):
    settings.SCHEDWEB_KUBECONFIG = None  # "SCHEDWEB_KUBECONFIG is unset, KUBERNETES_... too"
    response = clients["editor"].post("/api/v1/preview", unreachable_cluster, format="json")
    assert response.status_code == 503
    assert not [word for word in CONFIGURATION if word in response.content.decode()]
