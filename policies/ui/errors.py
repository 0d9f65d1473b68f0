"""The site's error handlers (schedweb/urls.py handler400/403/404/500, CSRF_FAILURE_VIEW): JSON in
the API's error shape under /api/, where clients parse JSON; elsewhere a page inside the app's
chrome (templates/errors/page.html), so a user who lands on one still has the navigation."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

log = logging.getLogger(__name__)

# Shown when even the chrome cannot render (the error may be in a template or the database).
_BARE_500 = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Server error · schedweb</title>"
    "<h1>Something went wrong on our side</h1><p>The error was logged. "
    '<a href="/">Back to the dashboard</a></p></html>'
)


def _api_error(request: HttpRequest, status: int, code: str, detail: str) -> HttpResponse | None:
    if request.path.startswith("/api/"):
        from policies.api.errors import error_body

        return JsonResponse(error_body(code, detail), status=status)
    return None


def _page(request: HttpRequest, status: int, heading: str, message: str, **extra) -> HttpResponse:
    context = {"status": status, "heading": heading, "message": message, **extra}
    return render(request, "errors/page.html", context, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _api_error(request, 400, "invalid", "the request is invalid") or _page(
        request, 400, "This request cannot be used", "Check the address or the form and try again."
    )


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403s raised as PermissionDenied (roles are refused by access.py's own page)."""
    return _api_error(
        request, 403, "permission_denied", "you do not have permission to do this"
    ) or _page(
        request,
        403,
        "You cannot open this page",
        str(exception or "") or "Your account does not allow it; an admin can change your role.",
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form posted without a valid CSRF token: usually a page open since before a sign-in."""
    return _page(
        request,
        403,
        "This form expired",
        "The page was open from before you signed in or out. Reload it and submit again.",
    )


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON 404 under /api/ (clients parse JSON), the page elsewhere."""
    return _api_error(request, 404, "not_found", f"no such endpoint: {request.path}") or _page(
        request,
        404,
        "Nothing is here",
        "There is no page at this address, or what it named (a policy, a version, a "
        "decision) no longer exists.",
        path=request.path,
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """JSON 500 under /api/, the page elsewhere; the bare page if the chrome fails too."""
    answer = _api_error(request, 500, "server_error", "internal error; it was logged")
    if answer is not None:
        return answer
    try:
        return _page(
            request,
            500,
            "Something went wrong on our side",
            "The error was logged. Try again; if it keeps happening, tell your admin what you did.",
        )
    except Exception:  # the chrome itself failed (a template, the database): the bare page
        log.exception("the 500 page could not render")
        return HttpResponse(_BARE_500, status=500)
