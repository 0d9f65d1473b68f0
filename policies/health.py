"""Whether the database and Redis answer, for /readyz and the dashboard's health card.

Each check answers an empty string when the service answers and the error's class name when it does not; it
never raises, so a page or probe can put the answer in a sentence.
"""

from __future__ import annotations

from django.db import connection

from policies.redis import redis_client


def database_check() -> str:
    """Empty when the database answers SELECT 1, else the error's class name."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # DatabaseError, or a driver's own error before Django wraps it
        return exc.__class__.__name__
    return ""


def redis_check() -> str:
    """Empty when Redis answers PING, else the error's class name."""
    try:
        redis_client().ping()
    except Exception as exc:  # redis raises several unrelated types (connection, timeout, auth)
        return exc.__class__.__name__
    return ""
