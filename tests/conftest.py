"""Shared fixtures. Tests that use the database get the `db` marker automatically, so that
`make test` can run them a second time against PostgreSQL (`pytest -m db`)."""

from __future__ import annotations

import pytest

# One password for every test user; the browser tests type it into the sign-in form.
PASSWORD = "pw-" + "x" * 12

pytest_plugins = [
    "tests.harness.fixtures",  # session fixture `control_plane`: real etcd + kube-apiserver
    "tests.shuffle",  # --shuffle-within-files SEED (scripts/stress-test.sh)
]

# Only fixtures that open the test database (pytest-django's autouse fixtures pull
# django_db_blocker into every test, so it says nothing).
_DB_FIXTURES = {"db", "transactional_db", "admin_client", "admin_user", "django_user_model"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses_db = item.get_closest_marker("django_db") is not None or bool(
            _DB_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        )
        if uses_db:
            item.add_marker(pytest.mark.db)


@pytest.fixture
def eager_celery():
    """Celery tasks run in the calling process (still through their real code and Redis)."""
    from schedweb.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    """PBKDF2's deliberate slowness is not under test; MD5 keeps user fixtures instant."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_throttle_carry_over():
    """Sign-in and token failure counters (policies/throttle.py) live for a window in Redis; one
    test's failures must not refuse the next test's attempts."""
    yield
    import redis

    from policies.redis import redis_client
    from policies.throttle import PREFIX

    try:
        client = redis_client()
        keys = list(client.scan_iter(match=PREFIX + "*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass  # no Redis for this test: nothing was counted


def seed003_with_test_case(editor, *, expect: dict):
    """seed-003 (name length) as a draft with one stored test case, `abc` (the example pod on
    the demo cluster) expecting `expect`: the playground's and the API's test-case fixture."""
    from pathlib import Path

    from policies import services

    examples = Path(__file__).resolve().parents[1] / "policies" / "examples"
    policy = services.policy_create(
        actor=editor, document=(examples / "seed-003-name-length.yaml").read_text()
    )
    services.test_case_create(
        actor=editor,
        policy=policy,
        name="abc",
        pod=(examples / "pods" / "abc.yaml").read_text(),
        cluster="demo",
        expect=expect,
    )
    return policy


# --- users, clients and tokens: the one place tests get them ------------------------------------


def make_user(username: str, role: str | None = None, *, password: str = PASSWORD):
    """A user in the group of `role` (None: signed up, but no role at all)."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username=username, password=password)
    if role:
        # get_or_create: transactional tests flush the groups the migration made
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def client_for(role: str | None, username: str | None = None):
    """A browser-like test client signed in (a session) as a new user with `role`."""
    from django.test import Client

    client = Client()
    client.force_login(make_user(username or f"{role or 'nobody'}-user", role))
    return client


def token_client(user):
    """An API client that authenticates as `user` with a fresh API token."""
    from rest_framework.test import APIClient

    from policies import services

    _, raw = services.api_token_create(actor=user, user=user, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client
