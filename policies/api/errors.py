"""One error shape for every API failure, and the handler that produces it.

    {"error": "invalid_policy", "detail": "the policy has 2 errors",
     "errors": [{"path": "filters[0].expression", "message": "...", "line": 1, "column": 6, ...}]}

`errors` lists field-level problems (with CEL line and column where they apply); `results` carries
test-case outcomes when a publish is refused because tests failed.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DataError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from policies.engine.document import PolicyInvalid
from policies.errors import (
    ClusterUnavailable,
    Conflict,
    EvaluationTooSlow,
    InputError,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    ServiceError,
    TestsFailed,
)
from policies.numbers import number_or_none
from policies.roles import has_role

log = logging.getLogger(__name__)

# The one place a service error becomes an HTTP status; the pages use it too.
STATUS_OF = {
    InputError: 400,
    NotFound: 404,
    Conflict: 409,
    PreconditionFailed: 412,
    TestsFailed: 422,
    PreconditionRequired: 428,
    ClusterUnavailable: 503,
    EvaluationTooSlow: 503,
}


def http_status(exc: ServiceError) -> int:
    """The HTTP status of a ServiceError (400 for a plain refusal)."""
    for kind in type(exc).__mro__:
        if kind in STATUS_OF:
            return STATUS_OF[kind]
    return 400


# Every `error` an API answer can carry, and what it means: the schema's enum and its description
# (tests/api walk the code base and the served schema for any other).
ERROR_CODES = {
    "authentication_failed": "The credential was refused (an unknown, revoked or expired token).",
    "cluster_unavailable": "No snapshot of the requested cluster source exists yet.",
    "conflict": "Conflicts with the current state (`conflict` names what holds it).",
    "error": "Any other refusal; `detail` says what.",
    "invalid": "The request is invalid; `errors` lists each problem with its field path.",
    "invalid_policy": "The policy document has errors; `errors` gives each with CEL line/column.",
    "method_not_allowed": "The operation does not take this HTTP method.",
    "not_acceptable": "No answer in the media type the Accept header asks for.",
    "not_authenticated": "No credential: send `Authorization: Bearer <token>` or log in.",
    "not_found": "No such policy, version, test case, token, decision or endpoint.",
    "parse_error": "The request body is not valid JSON.",
    "permission_denied": "The user's role does not allow this.",
    "precondition_failed": "Stale If-Match: the draft changed since it was read.",
    "precondition_required": "If-Match is required.",
    "server_error": "An internal error; it was logged.",
    "tests_failed": "Test cases failed; `results` lists them.",
    "throttled": "Too many failed credentials from this address, or backtests past the user's budget of pods; see Retry-After.",
    "too_large": "The request body is over the size limit.",
    "too_slow": "The evaluation ran past the time limit and was stopped.",
    "unsupported_media_type": "The request body's Content-Type is not JSON.",
}


def error_body(
    code: str, detail: str, *, errors: list | None = None, results: list | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"error": code, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    if results is not None:
        body["results"] = results
    return body


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, Any]]:
    """DRF's nested validation errors -> [{path, message}]."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            path = (
                prefix if key == "non_field_errors" else (f"{prefix}.{key}" if prefix else str(key))
            )
            out += _flatten(value, path)
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"path": prefix, "message": str(item)} for item in detail]
        out = []
        for index, item in enumerate(detail):
            out += _flatten(item, f"{prefix}[{index}]")
        return out
    return [{"path": prefix, "message": str(detail)}]


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, PolicyInvalid):
        count = len(exc.errors)
        return Response(
            error_body(
                "invalid_policy",
                f"the policy has {count} error{'s' if count != 1 else ''}",
                errors=[e.to_dict() for e in exc.errors],
            ),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, ClusterUnavailable):
        return _cluster_unavailable(exc, context)
    if isinstance(exc, ServiceError):
        errors = exc.details if isinstance(exc.details, list) else None
        if isinstance(exc, TestsFailed):
            body = error_body(exc.code, exc.message, results=exc.details)
        else:
            body = error_body(exc.code, str(exc.message), errors=errors)
        if isinstance(exc.details, dict):
            body["conflict"] = exc.details
        return Response(body, status=http_status(exc))
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("too_large", "the request body is too large"),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, DataError):  # a value the database refuses; the request is at fault
        return Response(
            error_body("invalid", f"a value in the request cannot be stored: {exc}"),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, Http404):
        return Response(
            error_body("not_found", str(exc) or "not found"), status=status.HTTP_404_NOT_FOUND
        )

    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid", "the request is invalid", errors=_flatten(exc.detail))
    elif isinstance(exc, exceptions.ParseError):
        response.data = error_body("parse_error", str(exc.detail))
    elif isinstance(exc, exceptions.NotAuthenticated):
        response.data = error_body(
            "not_authenticated",
            "authentication required: send 'Authorization: Bearer <token>' (create one under /api/v1/tokens) or log in",
        )
    elif isinstance(exc, exceptions.AuthenticationFailed):
        response.data = error_body("authentication_failed", str(exc.detail))
    elif isinstance(exc, exceptions.PermissionDenied):
        response.data = error_body("permission_denied", str(exc.detail))
    elif isinstance(exc, exceptions.NotFound):
        response.data = error_body("not_found", str(exc.detail))
    elif isinstance(exc, exceptions.MethodNotAllowed):
        response.data = error_body("method_not_allowed", str(exc.detail))
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        response.data = error_body("unsupported_media_type", str(exc.detail))
    elif isinstance(exc, exceptions.NotAcceptable):
        response.data = error_body("not_acceptable", str(exc.detail))
    elif isinstance(exc, exceptions.Throttled):
        response.data = error_body("throttled", str(exc.detail))
    else:
        response.data = error_body("error", str(getattr(exc, "detail", exc)))
    return response


# What an API caller is told when the cluster's state cannot be had: what to do. Why not (a
# kubeconfig path, an unset environment variable, the watcher's error, Redis's address) is how
# the installation is configured: it goes to the log and to admins (`adminDetail`), issue 27.
CLUSTER_UNAVAILABLE = (
    "the cluster's state is not available right now; retry in a few seconds, or preview"
    " against the demo cluster. If this lasts, an administrator can see why in schedweb's log"
    " and on the dashboard."
)
CLUSTER_RETRY_AFTER_SECONDS = 5


def _cluster_unavailable(exc: ClusterUnavailable, context: dict) -> Response:
    log.warning("API answered 503 cluster_unavailable: %s", exc.message)
    body = error_body(exc.code, CLUSTER_UNAVAILABLE)
    request = context.get("request")
    if request is not None and has_role(getattr(request, "user", None), "admin"):
        body["adminDetail"] = str(exc.message)
    return Response(
        body,
        status=http_status(exc),
        headers={"Retry-After": str(CLUSTER_RETRY_AFTER_SECONDS)},
    )


class BodySizeLimitMiddleware:
    """413 for API requests whose declared body is over the limit, before anything reads it;
    400 for a query parameter with a NUL character (PostgreSQL cannot compare text with one;
    SQLite can, so the two databases would answer differently)."""

    def __init__(self, get_response) -> None:
        from django.conf import settings

        self.get_response = get_response
        self.api_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    def __call__(self, request):
        if request.path_info.startswith("/api/"):
            # Not a number (or past int64): refused as too large rather than trusted as 0.
            length = number_or_none(request.META.get("CONTENT_LENGTH") or "0")
            length = self.api_limit + 1 if length is None else length
            if length > self.api_limit:
                return JsonResponse(
                    error_body(
                        "too_large",
                        f"the request body is {length} bytes; the limit is {self.api_limit}",
                    ),
                    status=413,
                )
            for key, values in request.GET.lists():
                if "\x00" in key or any("\x00" in value for value in values):
                    return JsonResponse(
                        error_body(
                            "invalid",
                            f"query parameter {key.replace(chr(0), '?')!r} contains a NUL character",
                        ),
                        status=400,
                    )
        return self.get_response(request)


# Answers any /api/ operation can give, whatever its view declares: 400 (a NUL in a query
# parameter, refused by the middleware above), 401 (no or a bad credential), 403 (the role),
# 413 (a body over the limit) and 429 (throttled guessing).
COMMON_ERRORS = {
    "400": "Invalid input; `errors` lists each problem with its field path.",
    "401": "Not authenticated.",
    "403": "The user's role does not allow this.",
    "413": "Request body too large.",
    "429": "Too many failed credentials from this address, or backtests past the user's budget of pods; see Retry-After.",
}


def schema_common_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: COMMON_ERRORS on every operation (as Error)."""
    ref = {"$ref": "#/components/schemas/Error"}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for code, text in COMMON_ERRORS.items():
                operation["responses"].setdefault(
                    code, {"content": {"application/json": {"schema": ref}}, "description": text}
                )
    return result
