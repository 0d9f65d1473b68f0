"""Who may open a server-rendered page: the one decorator every page view wears.

    @page_access(roles={"GET": "viewer", "POST": "editor"})

- a method not in `roles` is a 405 (before anything else, like require_http_methods);
- an anonymous visitor goes to the sign-in page with `next`; an htmx caller gets 204 with
  HX-Redirect instead, so the whole page goes there, not the fragment;
- a user without the method's role gets 403 saying which role it needs, what that role allows
  and which one they have (htmx callers get the sentence as plain text, for the error toast);
- the session lives in the database: when it does not answer, nobody can be identified, so the
  answer is a standalone 503 page saying what is down (htmx callers get the sentence in place
  of the fragment, with 200 so that htmx swaps it), never a 500.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render
from django.template.loader import render_to_string

from policies.health import redis_check
from policies.roles import DESCRIPTIONS, has_role, user_role

log = logging.getLogger(__name__)


def is_htmx(request: HttpRequest) -> bool:
    """True for requests htmx sends (they swap a fragment instead of loading a page)."""
    return request.headers.get("HX-Request") == "true"


def sign_in_url(*, request: HttpRequest) -> str:
    """The sign-in page with `next` set to the browser's page for an htmx caller: the path and
    query of HX-Current-URL, never the fragment's URL nor another host (LoginView checks `next`
    is on this host too before using it)."""
    current = urlsplit(request.headers.get("HX-Current-URL", ""))
    back = (current.path + (f"?{current.query}" if current.query else "")) or "/"
    return f"{settings.LOGIN_URL}?{urlencode({'next': back})}"


def refusal_message(*, needed: str, held: str | None) -> str:
    """Why a user is refused, in one sentence: the role needed, what it allows, the one held."""
    return f"This needs the {needed} role ({DESCRIPTIONS[needed]}); " + (
        f"you have the {held} role."
        if held
        else "you have no role: ask an admin to add you to a group."
    )


def _refusal(request: HttpRequest, *, needed: str, held: str | None) -> HttpResponse:
    if is_htmx(request):
        message = refusal_message(needed=needed, held=held)
        return HttpResponse(message, status=403, content_type="text/plain; charset=utf-8")
    context = {
        "title": f"This needs the {needed} role; "
        + (f"you have the {held} role" if held else "you have no role"),
        "message": f"{needed.capitalize()}s can {DESCRIPTIONS[needed]}. Ask an admin to add you "
        f"to the {needed} group (or a higher one).",
    }
    return render(request, "forbidden.html", context, status=403)


def database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
    """A page (or the dashboard's health fragment) that touches neither the session nor the
    user: rendered without the request."""
    log.warning("database unavailable while loading the session: %s", exc)
    context = {
        "redis": redis_check(),
        "error": exc.__class__.__name__,
        "fragment": is_htmx(request),
    }
    # htmx swaps only 2xx answers: the health card gets its sentence with 200, pages get 503.
    return HttpResponse(
        render_to_string("ops/unavailable.html", context),
        status=200 if context["fragment"] else 503,
    )


def page_access(*, roles: Mapping[str, str]) -> Callable:
    """Login required, methods limited to `roles`' keys, and the role each method needs
    checked before the view runs (see the module's docstring for each answer)."""
    allowed = list(roles)

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in roles:
                return HttpResponseNotAllowed(allowed)
            try:
                authenticated = request.user.is_authenticated
                held = user_role(request.user) if authenticated else None
            except DatabaseError as exc:
                return database_down(request, exc)
            if not authenticated:
                if is_htmx(request):
                    response = HttpResponse(status=204)
                    response["HX-Redirect"] = sign_in_url(request=request)
                    return response
                return redirect_to_login(request.get_full_path())
            needed = roles[request.method]
            if not has_role(request.user, needed):
                return _refusal(request, needed=needed, held=held)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
