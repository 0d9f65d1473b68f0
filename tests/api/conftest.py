"""API test fixtures: users in each role, clients authenticated by API token, sample documents."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.conftest import make_user, token_client

VALID = """\
name: {name}
description: test policy
schedulerNames: [{scheduler}]
variables:
  - name: freeCpu
    expression: node.allocatable.cpu - node.requested.cpu
filters:
  - name: enough-cpu
    expression: variables.freeCpu >= pod.requests.cpu
    message: '"needs " + string(pod.requests.cpu) + "m CPU"'
scores:
  - name: free-cpu
    expression: variables.freeCpu * 100 / node.allocatable.cpu
"""


def document(name: str = "least", scheduler: str = "schedweb", **replace: str) -> str:
    text = VALID.format(name=name, scheduler=scheduler)
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {
        "schedulerName": "schedweb",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
            }
        ],
    },
}


@pytest.fixture
def users(db) -> dict[str, User]:
    return {role: make_user(role, role) for role in ("viewer", "editor", "publisher", "admin")} | {
        "nobody": make_user("nobody", None)
    }


@pytest.fixture
def clients(users) -> dict[str, APIClient]:
    return {role: token_client(user) for role, user in users.items()}


@pytest.fixture
def api(clients) -> APIClient:
    """An admin client (allowed everything)."""
    return clients["admin"]


@pytest.fixture
def created(api) -> dict:
    response = api.post("/api/v1/policies", {"document": document()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()
