"""Property-based API tests from the OpenAPI schema: no 500s, responses match the schema.

schemathesis generates requests for every operation of /api/schema/ (valid and invalid bodies,
odd parameters) and calls the app in-process (WSGI) as each role's token holder and as an
anonymous caller: the admin reaches every branch, the others the permission and authentication
refusals and whatever their role may do.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from policies import services
from policies.roles import ROLES
from schedweb.wsgi import application
from tests.conftest import make_user

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
# status_code_conformance holds because every operation lists the refusals any /api/ answer can
# give (policies/api/errors.py COMMON_ERRORS: 400, 401, 403, 413, 429).


@pytest.fixture
def keep_connection():
    """Like Django's test client: the test's transaction must survive each in-process request."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


CALLERS = ["anonymous", *ROLES]


@pytest.fixture(params=CALLERS)
def caller(request, db, keep_connection, settings) -> dict[str, str]:
    """The headers of one kind of caller: a role's API token, or none at all.

    schemathesis also sends made-up bearer tokens; the throttle (tests/web/test_throttle.py)
    would answer 429 after a few, which the schema does not list, so it is set out of reach."""
    settings.SCHEDWEB_TOKEN_FAILURES_PER_IP = 10**9
    role = request.param
    if role == "anonymous":
        return {}
    user = make_user(f"fuzzer-{role}", role)
    _, raw = services.api_token_create(actor=user, user=user, name="schemathesis")
    return {"Authorization": f"Bearer {raw}"}


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_never_answers_500_and_matches_its_schema(case, caller):
    case.call_and_validate(headers=caller, checks=CHECKS)
