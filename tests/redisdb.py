"""A database of its own on the shared test Redis (SCHEDWEB_REDIS_URL, started by make test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from policies.redis import redis_client


def redis_url(number: int) -> str:
    base = os.environ.get("SCHEDWEB_REDIS_URL", "redis://127.0.0.1:6390/0").rsplit("/", 1)[0]
    return f"{base}/{number}"


@contextmanager
def redis_database(settings, number: int) -> Iterator[redis.Redis]:
    """Points the process's Redis client at database `number`, emptied before and after.

    Test modules that write global keys (policies, metrics, snapshots) each take a number of their
    own so that their data never meets.
    """
    settings.REDIS_URL = redis_url(number)
    redis_client.cache_clear()
    client = redis_client()
    client.flushdb()
    try:
        yield client
    finally:
        client.flushdb()
        redis_client.cache_clear()
