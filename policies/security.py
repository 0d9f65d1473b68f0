"""Content-Security-Policy for every answer of the pages and the API (settings.SCHEDWEB_CSP).

Django 5.2 has no CSP of its own; this sets the header unless a view already set one. An empty
SCHEDWEB_CSP turns it off.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = settings.SCHEDWEB_CSP

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response
