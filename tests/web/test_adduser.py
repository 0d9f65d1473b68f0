"""Creating users with roles and tokens from the command line."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

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


@pytest.mark.django_db
def test_the_first_admin_takes_its_password_from_a_file_once(tmp_path):
    """The chart's migrations Job: the first admin from a mounted Secret, and nothing done
    once a user exists (a later password in the Secret changes no one's)."""
    secret = tmp_path / "password"
    secret.write_text("correct-horse-battery\n")
    out = io.StringIO()
    args = ("adduser", "admin", "--role", "admin", "--if-no-users", "--password-file", secret)
    call_command(*args, stdout=out)
    admin = User.objects.get(username="admin")
    assert admin.check_password("correct-horse-battery") and user_role(admin) == "admin"
    assert "correct-horse-battery" not in out.getvalue() and "password:" not in out.getvalue()
    secret.write_text("another-password-entirely")
    out = io.StringIO()
    call_command(*args, stdout=out)
    assert "users exist" in out.getvalue()
    assert User.objects.get(username="admin").check_password("correct-horse-battery")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ("short\n", "at least 12 characters"), ("", "at least 12")],
)
def test_a_missing_or_short_password_file_stops_the_command_and_creates_no_one(
    tmp_path, content, message
):
    secret = tmp_path / "password"
    if content is not None:
        secret.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("adduser", "admin", "--role", "admin", "--password-file", secret)
    assert not User.objects.filter(username="admin").exists()
