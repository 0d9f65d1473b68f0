"""Operational endpoints: /healthz (alive), /readyz (can serve), /metrics (Prometheus)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

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


def metrics(request: HttpRequest) -> HttpResponse:
    """Cluster-wide extender metrics (from Redis) plus this process's gauges."""
    from policies.extender.metrics import render_prometheus, totals_read
    from policies.extender.runtime import runtime

    state = runtime()
    gauges = {
        "schedweb_extender_policies_active": float(
            len({s.label for s in state.registry.by_scheduler.values()})
        ),
        "schedweb_extender_redis_up": 1.0 if state.redis_ok else 0.0,
    }
    snapshot = state.snapshots.current()
    if snapshot is not None:
        gauges["schedweb_snapshot_version"] = float(snapshot.version)
        gauges["schedweb_snapshot_stale"] = 1.0 if snapshot.stale else 0.0
        if snapshot.age_seconds is not None:
            gauges["schedweb_snapshot_age_seconds"] = float(snapshot.age_seconds)
    try:
        totals = totals_read(state.redis)
    except Exception:
        totals = {}
        gauges["schedweb_metrics_redis_unavailable"] = 1.0
    return HttpResponse(
        render_prometheus(totals, gauges=gauges),
        content_type="text/plain; version=0.0.4; charset=utf-8",
    )
