"""Property-based API tests from the OpenAPI schema: no 500s, responses match the schema.

schemathesis generates requests for every operation of /api/schema/ (valid and invalid bodies,
odd parameters) and calls the app in-process (WSGI) as an admin, which reaches every branch.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from policies import services
from schedweb.wsgi import application
from tests.conftest import make_user

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


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


@pytest.fixture
def admin_token(db, keep_connection) -> str:
    user = make_user("fuzzer", "admin")
    _, raw = services.api_token_create(actor=user, user=user, name="schemathesis")
    return raw


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_never_answers_500_and_matches_its_schema(case, admin_token):
    case.call_and_validate(headers={"Authorization": f"Bearer {admin_token}"}, checks=CHECKS)
