"""The site's 404 and 500 handlers (schedweb/urls.py handler404 and handler500): JSON under
/api/ and /extender/, where clients parse JSON, and Django's HTML pages elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse


def _api_error(request: HttpRequest, status: int, code: str, detail: str) -> HttpResponse | None:
    if request.path.startswith("/api/"):
        from policies.api.errors import error_body

        return JsonResponse(error_body(code, detail), status=status)
    return None


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON 404 under /api/ (clients parse JSON), the HTML page elsewhere."""
    from django.views.defaults import page_not_found

    return _api_error(
        request, 404, "not_found", f"no such endpoint: {request.path}"
    ) or page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """JSON 500 under /api/, the HTML page elsewhere."""
    from django.views.defaults import server_error as html_server_error

    return _api_error(
        request, 500, "server_error", "internal error; it was logged"
    ) or html_server_error(request)
