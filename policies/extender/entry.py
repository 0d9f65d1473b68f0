"""What kube-scheduler's HTTP calls get: POST /extender/{filter,prioritize,preempt,bind}.

The extender has one way in: schedweb/asgi.py reads the request (and refuses a body over
SCHEDWEB_EXTENDER_MAX_BODY_BYTES while reading it; a nodeCacheCapable=false request for 1000
nodes is several MB) and sends what these functions answer. No Django route serves /extender/:
no trailing slash, no CSRF, no session, no redirects (extender-protocol.md sections 1 and 8,
P14). Always 200 for a well-formed request (the scheduler treats anything else as a failed
call), 400 with a JSON error for a malformed one.

Every answer is (status, JSON body bytes, policy label); an empty label means no
X-Schedweb-Policy header. The snapshot is read under the runtime's serve lock (the thread that
applies watch events changes it in place between two requests, never during one); bind is not
held to it (its call to the API server would hold the others up), and reads one entry at a time.

On the event loop, filter and prioritize may wait for the snapshot to catch up
(policies/extender/catch_up.py): `extender_answer_or_wait` then returns a `Waiting`, and
`extender_answer_after_wait` awaits the snapshot (the loop stays free) and answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from django.conf import settings

from policies.admission import review

from . import protocol
from .catch_up import Attempt, Behind
from .metrics import render_prometheus
from .runtime import runtime
from .service import OFFLOAD_STATUS, WAIT

log = logging.getLogger(__name__)

PREFIX = "/extender/"
VERBS = ("filter", "prioritize", "preempt", "bind")
_WAITING_VERBS = frozenset({"filter", "prioritize"})


# The status of "not answered here": the body is too much work to answer inline (issue 27), a
# worker process of the pool answers it (schedweb/asgi.py, policies/extender/offload.py).
OFFLOAD = OFFLOAD_STATUS


def extender_answer(verb: str, body: bytes, *, inline: bool = False) -> tuple[int, bytes, str]:
    """The answer to a POST of `body` to /extender/<verb> (one of VERBS), read within the limit,
    over the snapshot as it is now (no waiting: the offload pool's processes, bind, preempt);
    `inline` (the listener's event loop): (OFFLOAD, b"", "") for a body with more items than the
    inline limits (SCHEDWEB_EXTENDER_INLINE_NODES, _INLINE_NAMES), found before they are checked.
    bind holds the serve lock for its checks only, not for its call to the API server."""
    state = runtime()
    if verb == "bind":
        answer = state.extender.bind(body, lock=state.serve_lock)
    else:
        with state.serve_lock:
            answer = getattr(state.extender, verb)(body, inline=inline)
    return answer.status, answer.body, answer.policy


@dataclass(slots=True)
class Waiting:
    """A filter or prioritize that waits for the snapshot: what it lacks and its attempt."""

    verb: str
    body: bytes
    attempt: Attempt
    behind: Behind


def extender_answer_or_wait(
    verb: str, body: bytes, *, inline: bool = False
) -> tuple[int, bytes, str] | Waiting:
    """As extender_answer, for a caller on the event loop that can wait: filter and prioritize
    naming a node (or about a pod) the snapshot does not hold yet give a `Waiting` instead.
    `inline`: as extender_answer's (OFFLOAD comes before any wait: it is found at the parse)."""
    state = runtime()
    if verb not in _WAITING_VERBS:
        return extender_answer(verb, body, inline=inline)
    attempt = state.catch_up.attempt()
    with state.serve_lock:
        answer = getattr(state.extender, verb)(body, attempt, inline=inline)
    if answer.status == WAIT:
        return Waiting(verb, body, attempt, answer.behind)  # type: ignore[arg-type]
    return answer.status, answer.body, answer.policy


async def extender_answer_after_wait(waiting: Waiting) -> tuple[int, bytes, str]:
    """Waits (without holding the loop) until the snapshot moved or the attempt's deadline
    passed, judges the request again, and so on until it is answered."""
    state = runtime()
    while True:
        await state.catch_up.wait(waiting.attempt, waiting.behind)
        with state.serve_lock:
            answer = getattr(state.extender, waiting.verb)(waiting.body, waiting.attempt)
        if answer.status != WAIT:
            return answer.status, answer.body, answer.policy
        waiting.behind = answer.behind  # type: ignore[assignment]


# Set by a listener with an offload pool (schedweb/asgi.py, at its lifespan start): queues a
# filter body, with the policy set's counter it was answered under, for the pool's shadow lane,
# which judges the shadow on it (shadow_answer); False when the queue is full (Offload.forward).
# Judged on the listener's loop instead, the shadow's evaluation (0.17 ms of CPU at 500 nodes,
# more on a loaded core) held up kube-scheduler's next call: its throughput with a shadow was
# 0.85-0.90 of the run without (bench/shadow.py).
shadow_forward: Callable[[bytes, int], bool] | None = None
# Set with it: sends the queued bodies to the lane (Offload.forwards_send), called once an
# answer that left no shadow work is written (a prioritize's: the moment between two pods).
shadow_send: Callable[[], None] | None = None


def after_answer() -> None:
    """The last verb's deferred work (Extender.after_answer), once its answer is written; under
    the serve lock when it judges a shadow here (which reads the snapshot)."""
    state = runtime()
    if state.extender.canary_counts:  # the guard sees this answer before the next one
        state.canary_flush()
    forward = shadow_forward
    if state.extender.shadows.job is None:
        state.extender.after_answer()
        if shadow_send is not None:
            shadow_send()
    elif forward is not None:
        state.extender.after_answer(partial(forward, counter=state.registry.counter or 0))
    else:
        with state.serve_lock:
            state.extender.after_answer()


def shadow_answer(body: bytes, counter: int | None = None) -> tuple[int, bytes, str]:
    """In the offload pool's shadow lane: the shadow judged on a filter body the listener
    answered and forwarded (Extender.shadow), over this process's snapshot; the policy set read
    again first when the listener answered under a newer one (`counter`) than this process
    holds (its thread may not have run yet: the lane runs when the cores are idle)."""
    state = runtime()
    if counter is not None and (state.registry.counter or 0) < counter:
        try:
            state.registry.refresh_from_redis()
        except Exception:  # judged with what this process holds; its thread retries
            log.exception("the shadow lane could not read the policy set")
    with state.serve_lock:
        answer = state.extender.shadow(body)
    return answer.status, answer.body, answer.policy


def admission_answer(body: bytes) -> tuple[int, bytes, str]:
    """POST /admission/queue: kube-apiserver's AdmissionReview of a pod, answered from the
    process's memory (policies/admission/review.py); 400 for a body that is not one."""
    state = runtime()
    with state.serve_lock:
        return _admission_answer(state, body)


def _admission_answer(state, body: bytes) -> tuple[int, bytes, str]:
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
    processes = state.metrics.listener_gauges(
        state.gauges(), fresh_seconds=settings.SCHEDWEB_EXTENDER_LIVE_SECONDS
    )
    return render_prometheus(
        state.metrics.listener_totals(), gauges=gauges, processes=processes
    ).encode()
