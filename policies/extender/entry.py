"""What kube-scheduler's HTTP calls get: POST /extender/{filter,prioritize,preempt,bind}.

The extender has one way in: schedweb/asgi.py reads the request (and refuses a body over
SCHEDWEB_EXTENDER_MAX_BODY_BYTES while reading it; a nodeCacheCapable=false request for 1000
nodes is several MB) and sends what these functions answer. No Django route serves /extender/:
no trailing slash, no CSRF, no session, no redirects (extender-protocol.md sections 1 and 8,
P14). Always 200 for a well-formed request (the scheduler treats anything else as a failed
call), 400 with a JSON error for a malformed one.

Every answer is (status, JSON body bytes, policy label); an empty label means no
X-Schedweb-Policy header.
"""

from __future__ import annotations

import logging
import time

from policies.admission import review

from . import protocol
from .metrics import render_prometheus
from .runtime import runtime

log = logging.getLogger(__name__)

PREFIX = "/extender/"
VERBS = ("filter", "prioritize", "preempt", "bind")


# The status of "not answered here": the body is too much work to answer inline (issue 27), a
# worker process of the pool answers it (schedweb/asgi.py, policies/extender/offload.py).
OFFLOAD = 0


def extender_answer(verb: str, body: bytes, *, inline: bool = False) -> tuple[int, bytes, str]:
    """The answer to a POST of `body` to /extender/<verb> (one of VERBS), read within the limit;
    `inline` (the listener's event loop): (OFFLOAD, b"", "") for a body with more items than the
    inline limits (SCHEDWEB_EXTENDER_INLINE_NODES, _INLINE_NAMES), found before they are checked."""
    answer = getattr(runtime().extender, verb)(body, inline=inline)
    return answer.status, answer.body, answer.policy


def after_answer() -> None:
    """The last verb's deferred work (Extender.after_answer), once its answer is written."""
    runtime().extender.after_answer()


def admission_answer(body: bytes) -> tuple[int, bytes, str]:
    """POST /admission/queue: kube-apiserver's AdmissionReview of a pod, answered from the
    process's memory (policies/admission/review.py); 400 for a body that is not one."""
    state = runtime()
    try:
        answer = review.admission_answer(
            body,
            policies=state.registry.by_scheduler,
            namespace_labels=state.namespace_labels,
            class_ready=state.class_ready,
            gang_mode=state.gang_mode,
        )
    except review.ReviewInvalid as exc:
        answer = review.invalid_answer(str(exc))
    return answer.status, answer.body, answer.policy


# A refused certificate is logged once a minute per certificate name and path kind: a client
# that keeps asking must not flood the log (every refusal is counted).
REFUSAL_LOG_SECONDS = 60.0
_refusals_logged: dict[tuple[str, str], float] = {}


def refused_answer(path: str, *, kind: str, client: str, label: str) -> tuple[int, bytes, str]:
    """403: the client certificate named `client` does not hold the role `kind` that `path`
    needs (schedweb/client_certs.py). Counted (schedweb_extender_refused_total{path=kind,
    client=label}) and logged; the caller learns nothing of which certificates may."""
    runtime().metrics.count("refused", kind, label)
    now = time.monotonic()
    key = (client, kind)
    last = _refusals_logged.get(key)
    if last is None or now - last >= REFUSAL_LOG_SECONDS:
        if len(_refusals_logged) > 1000:
            _refusals_logged.clear()
        _refusals_logged[key] = now
        log.warning(
            "extender refused %s to the client certificate %r: not one of the %s clients"
            " (403; logged at most once a minute per certificate and kind of path)",
            path[:200],
            client[:200],
            kind,
        )
    body = protocol.error_body("this client certificate may not use this path", code="forbidden")
    return 403, body, ""


def too_large_answer(limit: int) -> tuple[int, bytes, str]:
    """413: the body grew past `limit` bytes (the rest was not read)."""
    return 413, protocol.error_body(f"the body is larger; the limit is {limit} bytes"), ""


def method_not_allowed_answer(verb: str) -> tuple[int, bytes, str]:
    """405 for anything but POST to a verb; the caller adds `Allow: POST`."""
    return 405, protocol.error_body(f"{verb} takes POST"), ""


def not_found_answer(path: str) -> tuple[int, bytes, str]:
    """404 for a path under /extender/ that is not a verb (a trailing slash included: never a
    redirect, which Go's client would turn into a GET without a body)."""
    return 404, protocol.error_body(f"no such extender verb: {path}", code="not_found"), ""


METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def metrics_text() -> bytes:
    """GET /metrics on the extender listener: its processes' counters (policies/extender/metrics.py,
    from memory and the workers' files, never Redis) and the answering process's gauges."""
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
    return render_prometheus(state.metrics.listener_totals(), gauges=gauges).encode()
