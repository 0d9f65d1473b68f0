"""Operational endpoints: /healthz (alive), /readyz (can serve). /metrics (Prometheus) is the
extender listener's (policies/extender/entry.py): its processes are the ones that count."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from policies.health import database_check, redis_check


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness, with what is down in words: the database, Redis, policies, the snapshot.

    The extender keeps serving from memory when Redis or the database is down, so those make
    the answer `degraded` (200); only a process that cannot answer the scheduler is 503.
    """
    from policies.extender.runtime import runtime

    checks: dict[str, str] = {}
    for name, check in (("database", database_check), ("redis", redis_check)):
        error = check()
        checks[name] = f"down: {error}" if error else "ok"
    try:
        health = runtime().health()
    except Exception as exc:
        return JsonResponse(
            {"status": "unavailable", "checks": checks, "extender": f"cannot start: {exc}"},
            status=503,
        )
    snapshot = health["snapshot"]
    if snapshot is None:
        checks["snapshot"] = "missing: the cluster watcher has not written a snapshot yet"
    else:
        checks["snapshot"] = "stale" if snapshot["stale"] else "ok"
    degraded = any(value != "ok" for value in checks.values())
    return JsonResponse(
        {"status": "degraded" if degraded else "ok", "checks": checks, "extender": health}
    )
