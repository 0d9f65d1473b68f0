"""Creating users with roles and tokens from the command line."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from policies.roles import user_role


@pytest.mark.django_db
def test_adduser_creates_a_user_with_a_role_password_and_token(client):
    out = io.StringIO()
    call_command("adduser", "ci", "--role", "publisher", "--token", "pipeline", stdout=out)
    lines = dict(line.split(": ", 1) for line in out.getvalue().splitlines())
    user = User.objects.get(username="ci")
    assert user_role(user) == "publisher"
    assert user.check_password(lines["password"])
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {lines['token']}")
    assert response.json() == {"username": "ci", "role": "publisher"}
    call_command("adduser", "ci", "--role", "viewer", stdout=io.StringIO())
    user = User.objects.get(username="ci")
    assert user_role(user) == "viewer"
