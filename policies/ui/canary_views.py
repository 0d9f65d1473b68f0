"""A canary's promote and abort from the versions page (issue 25, item 3); its status and the
guard's notice are on the versions page and the dashboard."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect

from policies.errors import ServiceError
from policies.models import Policy
from policies.numbers import number_or_none
from policies.rollout.canary import policy_canary_abort, policy_canary_promote

from .access import page_access
from .shadow_views import _served


def _refused(request: HttpRequest, policy: Policy, exc: ServiceError) -> HttpResponse:
    """Back to the versions page with the refusal's words (another canary replaced it, or none
    is in flight any more)."""
    messages.error(request, exc.message[:1].upper() + exc.message[1:] + ".")
    return redirect("policy-versions", name=policy.name)


@page_access(roles={"POST": "publisher"})
def canary_promote(request: HttpRequest, name: str) -> HttpResponse:
    """The canary decides every pod (the version the publisher saw: 409 words otherwise)."""
    policy = get_object_or_404(Policy, name=name)
    try:
        result = policy_canary_promote(
            actor=request.user,
            policy=policy,
            message=request.POST.get("message", ""),
            expect_version=number_or_none(request.POST.get("version", "")),
        )
    except ServiceError as exc:
        return _refused(request, policy, exc)
    _served(request, f"Promoted v{result.activation.version.number} of {policy.name}", result)
    return redirect("policy-versions", name=policy.name)


@page_access(roles={"POST": "publisher"})
def canary_abort(request: HttpRequest, name: str) -> HttpResponse:
    policy = get_object_or_404(Policy, name=name)
    try:
        served = policy_canary_abort(
            actor=request.user, policy=policy, message=request.POST.get("message", "")
        )
    except ServiceError as exc:
        return _refused(request, policy, exc)
    text = f"Aborted the canary of {policy.name}: the stable version decides; {served.summary()}."
    (messages.success if served.served_by_all else messages.warning)(request, text)
    return redirect("policy-versions", name=policy.name)
