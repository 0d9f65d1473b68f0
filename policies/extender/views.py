"""HTTP endpoints kube-scheduler calls: POST /extender/{filter,prioritize,preempt,bind}.

No trailing slash, no CSRF, no session, no redirects (extender-protocol.md sections 1 and 8, P14);
always 200 for a well-formed request (the scheduler treats anything else as a failed call), 400
with a JSON error for a malformed one, 413 for an oversized one. Bodies are read with their own
limit: a nodeCacheCapable=false request for 1000 nodes is several MB.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from . import protocol
from .runtime import runtime

VERBS = ("filter", "prioritize", "preempt", "bind")


def _json(body: bytes, status: int = 200, *, policy: str = "") -> HttpResponse:
    response = HttpResponse(body, status=status, content_type="application/json")
    if policy:
        response["X-Schedweb-Policy"] = policy
    return response


def _answer(verb: str, body: bytes) -> tuple[int, bytes, str]:
    """(status, JSON body, policy label) for a POST to /extender/<verb>: shared by both entries."""
    limit = settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES
    if len(body) > limit:
        return too_large(limit)
    answer = getattr(runtime().extender, verb)(body)
    return answer.status, answer.body, answer.policy


def too_large(limit: int, length: int | None = None) -> tuple[int, bytes, str]:
    """The 413 answer for a body over `limit` bytes."""
    size = f"is {length} bytes" if length is not None else "is larger"
    return 413, protocol.error_body(f"the body {size}; the limit is {limit} bytes"), ""


def _handle(request: HttpRequest, verb: str) -> HttpResponse:
    if request.method != "POST":
        response = _json(protocol.error_body(f"{verb} takes POST"), 405)
        response["Allow"] = "POST"
        return response
    limit = settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES
    status, body, policy = _answer(verb, request.read(limit + 1))
    return _json(body, status, policy=policy)


_REASONS = {200: "OK", 400: "Bad Request", 413: "Payload Too Large"}


def wsgi_extender(environ: dict, start_response) -> list[bytes] | None:
    """The extender verbs as a bare WSGI app (schedweb/wsgi.py); None: not ours, ask Django."""
    verb = environ.get("PATH_INFO", "")[len("/extender/") :]
    if verb not in VERBS:
        return None
    limit = settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES
    stream = environ["wsgi.input"]
    try:
        length = int(environ.get("CONTENT_LENGTH") or -1)
    except ValueError:
        length = -1
    if length > limit:
        status, body, policy = too_large(limit, length)
    else:
        data = stream.read(length) if length >= 0 else stream.read(limit + 1)
        status, body, policy = _answer(verb, data)
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if policy:
        headers.append(("X-Schedweb-Policy", policy))
    start_response(f"{status} {_REASONS.get(status, 'OK')}", headers)
    return [body]


@csrf_exempt
def filter_view(request: HttpRequest) -> HttpResponse:
    return _handle(request, "filter")


@csrf_exempt
def prioritize_view(request: HttpRequest) -> HttpResponse:
    return _handle(request, "prioritize")


@csrf_exempt
def preempt_view(request: HttpRequest) -> HttpResponse:
    return _handle(request, "preempt")


@csrf_exempt
def bind_view(request: HttpRequest) -> HttpResponse:
    return _handle(request, "bind")
