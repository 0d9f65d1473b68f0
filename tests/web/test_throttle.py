"""Failed sign-ins and failed API-token authentications are throttled (policies/throttle.py),
with the real Redis."""

from __future__ import annotations

import pytest

from policies import services
from tests.conftest import PASSWORD, make_user
from tests.redisdb import redis_database


@pytest.fixture
def limits(settings):
    settings.SCHEDWEB_LOGIN_FAILURES_PER_USER = 3
    settings.SCHEDWEB_LOGIN_FAILURES_PER_IP = 5
    settings.SCHEDWEB_TOKEN_FAILURES_PER_IP = 4
    settings.SCHEDWEB_THROTTLE_WINDOW = 600
    with redis_database(settings, 13) as client:
        yield client


def _login(client, username, password, ip="10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_repeated_failed_sign_ins_for_a_username_are_refused_even_with_the_right_password(
    client, db, limits
):
    make_user("alice", "viewer")
    for _ in range(3):
        assert _login(client, "alice", "wrong").status_code == 200  # the form, with its error
    refused = _login(client, "alice", PASSWORD, ip="10.0.0.2")  # another address too
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 600
    assert b'id="login-throttled"' in refused.content
    assert b"Too many failed sign-ins" in refused.content
    assert "_auth_user_id" not in client.session
    # The refusal does not extend the window: the counter stays where the failures left it.
    assert limits.ttl(next(limits.scan_iter(match="schedweb:throttle:login-user:*"))) <= 600
    # The lockout ends with the window (no forever): once the key expires, the password works.
    for key in limits.scan_iter(match="schedweb:throttle:login-user:*"):
        limits.delete(key)
    assert _login(client, "alice", PASSWORD, ip="10.0.0.2").status_code == 302


def test_another_users_success_does_not_reset_the_counter(client, db, limits):
    from django.test import Client

    make_user("alice", "viewer")
    make_user("bob", "viewer")
    for _ in range(3):
        _login(client, "alice", "wrong", ip="10.0.0.1")
    assert _login(Client(), "bob", PASSWORD, ip="10.0.0.9").status_code == 302
    assert _login(Client(), "alice", PASSWORD, ip="10.0.0.9").status_code == 429


def test_a_users_own_success_clears_its_username_counter(client, db, limits):
    make_user("alice", "viewer")
    for _ in range(2):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", PASSWORD).status_code == 302
    from django.test import Client

    for _ in range(2):  # two more failures: under the limit of 3 again, since the success
        assert _login(Client(), "alice", "wrong").status_code == 200
    assert _login(Client(), "alice", PASSWORD).status_code == 302


def test_failures_from_one_address_across_usernames_are_refused(client, db, limits):
    make_user("carol", "viewer")
    for n in range(5):
        assert _login(client, f"nobody-{n}", "wrong", ip="10.0.0.7").status_code == 200
    assert _login(client, "carol", PASSWORD, ip="10.0.0.7").status_code == 429
    # Another address is not affected, nor is carol's own counter.
    assert _login(client, "carol", PASSWORD, ip="10.0.0.8").status_code == 302


def test_failed_bearer_tokens_are_refused_with_429_json_and_retry_after(client, db, limits):
    user = make_user("dave", "viewer")
    _, raw = services.api_token_create(actor=user, user=user, name="t")
    for _ in range(4):
        bad = client.get(
            "/api/v1/me", HTTP_AUTHORIZATION="Bearer swt_not-a-token", REMOTE_ADDR="10.1.0.1"
        )
        assert bad.status_code == 401
    refused = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}", REMOTE_ADDR="10.1.0.1")
    assert refused.status_code == 429
    assert refused.json()["error"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 600
    # The same valid token from another address works.
    ok = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {raw}", REMOTE_ADDR="10.1.0.2")
    assert ok.status_code == 200


def test_the_admin_sign_in_is_throttled_too(client, db, limits):
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", password=PASSWORD)
    for _ in range(3):
        failed = client.post("/admin/login/", {"username": "root", "password": "wrong"})
        assert failed.status_code == 200
    refused = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session
