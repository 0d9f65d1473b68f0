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


def _handle(request: HttpRequest, verb: str) -> HttpResponse:
    if request.method != "POST":
        response = _json(protocol.error_body(f"{verb} takes POST"), 405)
        response["Allow"] = "POST"
        return response
    limit = settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES
    body = request.read(limit + 1)
    if len(body) > limit:
        return _json(protocol.error_body(f"the body is larger than {limit} bytes"), 413)
    answer = getattr(runtime().extender, verb)(body)
    return _json(answer.body, answer.status, policy=answer.policy)


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
