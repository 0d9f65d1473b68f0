"""The process's Redis connection (snapshot store, published policies, locks)."""

from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.cache
def redis_client() -> redis.Redis:
    """One pooled client per process; short timeouts so a dead Redis fails fast, never hangs."""
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_connect_timeout=1.0,
        socket_timeout=2.0,
        health_check_interval=15,
        retry_on_timeout=False,
    )
