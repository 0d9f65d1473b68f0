"""Template context for every page: the signed-in user's role, for the user menu in base.html.

Enable with "policies.ui.context.role" in TEMPLATES' context_processors; the ops views add the
same keys themselves (`render_page`), so their pages show the role either way.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from policies.roles import DESCRIPTIONS, user_role


def role(request: HttpRequest) -> dict[str, Any]:
    """`user_role` (viewer, editor, publisher, admin or None) and `user_role_allows` (in words).

    A database that does not answer yields no role rather than failing the page's render."""
    user = getattr(request, "user", None)
    try:
        held = user_role(user)
    except DatabaseError:
        held = None
    return {"user_role": held, "user_role_allows": DESCRIPTIONS.get(held or "", "")}


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """render() plus the user's role for the user menu (the ops and decision pages)."""
    return render(request, template, {**role(request), **context}, status=status)
