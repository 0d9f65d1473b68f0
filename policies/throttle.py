"""Failed sign-ins and failed API-token authentications, counted in Redis; over a limit, refused.

Three counters, each a Redis key with a fixed window (SCHEDWEB_THROTTLE_WINDOW seconds, 900 by
default) that the key's first failure starts:

- sign-in failures per username (SCHEDWEB_LOGIN_FAILURES_PER_USER, 10 by default),
- sign-in failures per client address (SCHEDWEB_LOGIN_FAILURES_PER_IP, 30),
- bearer-token failures per client address (SCHEDWEB_TOKEN_FAILURES_PER_IP, 30).

And one counter of work: the pods a user's backtests judge (SCHEDWEB_BACKTEST_PODS_PER_WINDOW,
`work_charge`), charged by each request's size before it runs.

While a counter is at its limit, attempts it covers are refused without checking the password or
the token (so a guess cannot succeed then) and without counting, so the window never grows: a
lockout ends at most one window after the failure that started it. That is the bound on what an
attacker who knows a username can do: they can lock its password sign-in for one window, and
again only by failing again in the next one, from addresses that each run into their own limit;
the user's API tokens keep working (token failures are counted per address only). A successful
sign-in clears that username's counter only; never another user's, never an address's.

The client address is REMOTE_ADDR, or, behind a proxy (SCHEDWEB_BEHIND_PROXY, which sets
SECURE_PROXY_SSL_HEADER), the last X-Forwarded-For entry: the one the proxy itself appended.
If Redis does not answer, nothing is throttled (sign-in keeps working; the failure is logged).
"""

from __future__ import annotations

import hashlib
import logging

import redis
from django.conf import settings
from django.http import HttpRequest

from policies.redis import redis_client

log = logging.getLogger(__name__)
PREFIX = "schedweb:throttle:"


def client_ip(request: HttpRequest) -> str:
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None):
        forwarded = [
            part.strip()
            for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
            if part.strip()
        ]
        if forwarded:
            return forwarded[-1][:64]
    return str(request.META.get("REMOTE_ADDR") or "unknown")[:64]


def _key(kind: str, value: str) -> str:
    return PREFIX + kind + ":" + hashlib.sha256(value.encode(errors="replace")).hexdigest()[:32]


def _login_keys(username: str, ip: str) -> list[tuple[str, int]]:
    return [
        (_key("login-user", username.strip().lower()), settings.SCHEDWEB_LOGIN_FAILURES_PER_USER),
        (_key("login-ip", ip), settings.SCHEDWEB_LOGIN_FAILURES_PER_IP),
    ]


def _token_keys(ip: str) -> list[tuple[str, int]]:
    return [(_key("token-ip", ip), settings.SCHEDWEB_TOKEN_FAILURES_PER_IP)]


def _retry_after(keys: list[tuple[str, int]]) -> int:
    """Seconds until every counter is under its limit again; 0 when none is at it."""
    try:
        client = redis_client()
        counts = client.mget([key for key, _ in keys])
        wait = 0
        for (key, limit), count in zip(keys, counts):
            if count is not None and int(count) >= limit:
                wait = max(wait, client.ttl(key), 1)
        return wait
    except redis.RedisError as exc:
        log.warning("throttle: Redis unavailable, not throttling: %s", exc)
        return 0


def _count(keys: list[tuple[str, int]]) -> None:
    try:
        pipe = redis_client().pipeline(transaction=True)
        for key, _ in keys:
            pipe.set(key, 0, ex=settings.SCHEDWEB_THROTTLE_WINDOW, nx=True)
            pipe.incr(key)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("throttle: Redis unavailable, failure not counted: %s", exc)


def login_retry_after(username: str, ip: str) -> int:
    return _retry_after(_login_keys(username, ip))


def login_failed(username: str, ip: str) -> None:
    _count(_login_keys(username, ip))


def login_succeeded(username: str) -> None:
    try:
        redis_client().delete(_key("login-user", username.strip().lower()))
    except redis.RedisError as exc:
        log.warning("throttle: Redis unavailable: %s", exc)


def token_retry_after(ip: str) -> int:
    return _retry_after(_token_keys(ip))


def token_failed(ip: str) -> None:
    _count(_token_keys(ip))


def work_charge(*, kind: str, user_id: int, units: int, limit: int) -> int:
    """Charges `units` of evaluation work (a backtest's pods) to the user's counter of `kind`
    for the window. Returns 0 when charged; when the window already holds work and this would
    pass `limit`, nothing is charged and it returns the seconds until the window ends (429,
    Retry-After). A first request of any size is charged, so one at the largest bound always
    runs. If Redis does not answer, nothing is charged (the request runs; the failure is logged).
    """
    key = _key(f"work-{kind}", str(user_id))
    try:
        client = redis_client()
        held = int(client.get(key) or 0)
        if held and held + units > limit:
            return max(client.ttl(key), 1)
        pipe = client.pipeline(transaction=True)
        pipe.set(key, 0, ex=settings.SCHEDWEB_THROTTLE_WINDOW, nx=True)
        pipe.incrby(key, units)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("throttle: Redis unavailable, work not charged: %s", exc)
    return 0
