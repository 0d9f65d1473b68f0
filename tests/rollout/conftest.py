"""Rollout fixtures: `extender`, this process's extender runtime reporting what it serves, and
`stalled`, a second extender process that confirms nothing (tests/api/test_served.py's), so
that a shadow's publish, promote and discard are waited for as in production; and
`users_and_policy`, API clients of each role and policy `least` with v1 active."""

import pytest

from policies import services
from policies.models import Policy
from tests.api.conftest import document
from tests.api.test_served import extender, stalled  # noqa: F401
from tests.conftest import make_user, token_client


@pytest.fixture
def users_and_policy(db):
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    clients = {role: token_client(make_user(role, role)) for role in ("viewer", "editor")}
    clients["publisher"] = token_client(publisher)
    return clients, Policy.objects.get(pk=policy.pk)
