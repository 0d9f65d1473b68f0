"""Shared fixtures. Tests that use the database get the `db` marker automatically, so that
`make test` can run them a second time against PostgreSQL (`pytest -m db`)."""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.cluster.fixtures"
]  # session fixture `control_plane`: real etcd + kube-apiserver

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
