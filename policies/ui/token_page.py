"""/account/tokens/: a user's API tokens in the browser (what `/api/v1/tokens` offers automation).

Create one (its secret is shown once, on the answer page, never again: only a hash is kept),
see each token's prefix, creation and last use, and revoke one. Every role can manage its own
tokens; a token acts with its user's role.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from policies import services
from policies.errors import ServiceError
from policies.models import ApiToken
from policies.numbers import number_or_none
from policies.ui.access import page_access


def _context(request: HttpRequest, **extra) -> dict:
    tokens = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    return {"tokens": tokens, **extra}


@page_access(roles={"GET": "viewer", "POST": "viewer"})
def tokens_page(request: HttpRequest) -> HttpResponse:
    """GET: the list and the create form. POST: create (name) or revoke (revoke=<id>)."""
    if request.method == "GET":
        return render(request, "ops/tokens.html", _context(request))
    if "revoke" in request.POST:
        token_id = number_or_none(request.POST.get("revoke", ""))
        token = get_object_or_404(ApiToken, user=request.user, pk=token_id or 0)
        try:
            services.api_token_revoke(actor=request.user, token=token)
        except ServiceError as exc:
            messages.error(request, exc.message[:1].upper() + exc.message[1:] + ".")
        else:
            messages.success(request, f"Revoked {token.name} ({token.prefix}…).")
        return redirect("account-tokens")
    name = request.POST.get("name", "")
    try:
        token, raw = services.api_token_create(actor=request.user, user=request.user, name=name)
    except ServiceError as exc:
        context = _context(request, error=exc.message, name=name[:100])
        return render(request, "ops/tokens.html", context, status=422)
    # shown once: the answer is not cached and the next GET lists the prefix only
    response = render(request, "ops/tokens.html", _context(request, created=token, raw=raw))
    response["Cache-Control"] = "no-store"
    return response
