"""The shadow report page (issue 25): how the shadow version judged real traffic beside the
active one, over the last hour, day or week, with Promote (publish's gate) and Discard."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from policies import selectors
from policies.api.errors import http_status
from policies.errors import ServiceError, TestsFailed
from policies.models import Policy
from policies.numbers import number_or_none
from policies.roles import has_role
from policies.rollout import selectors as rollout
from policies.rollout.services import policy_shadow_discard, policy_shadow_promote

from .access import page_access

PER_PAGE = 20
WINDOW_LABELS = {"hour": "Last hour", "day": "Last day", "week": "Last week"}
OUTCOME_LABELS = {
    "rejected": "no feasible node",
    "moved": "another preferred node",
    "nodes": "other nodes",
    "error": "shadow error",
    "same": "same",
    "skipped": "not judged",
}


def _context(request: HttpRequest, policy: Policy, **extra: Any) -> dict[str, Any]:
    window_name = request.GET.get("window", "hour")
    if window_name not in rollout.WINDOWS:
        window_name = "hour"
    window = rollout.shadow_window(window=window_name)
    shadow = rollout.shadow_get(policy=policy)
    active = selectors.policy_get_active(policy=policy)
    version = shadow.version.number if shadow else None
    records = (
        rollout.shadow_records(policy_name=policy.name, window=window, version=version)
        .filter(shadow_outcome__in=rollout.DIFFERING)
        .order_by("-created_at", "-pk")
    )
    page = Paginator(records, PER_PAGE).get_page(number_or_none(request.GET.get("page", "")) or 1)
    return {
        "policy": policy,
        "active": active,
        "draft_changed": active is None or active.document != policy.draft,
        "shadow": shadow,
        "window": window,
        "windows": WINDOW_LABELS,
        "window_label": WINDOW_LABELS[window.name],
        "summary": rollout.shadow_summary(policy_name=policy.name, window=window, version=version),
        "page": page,
        "rows": [_row(r) for r in page],
        "can_publish": has_role(request.user, "publisher"),
        "records_per_second": f"{settings.SCHEDWEB_SHADOW_RECORDS_PER_SECOND:g}",
        **extra,
    }


def _row(record) -> dict[str, Any]:
    """A record for the page: the report's dict, its outcome in words, and both versions' node
    entries side by side (`pairs`, in the scheduler's order; `differs` where the verdicts do)."""
    row = rollout.shadow_record_dict(record)
    active = {n.get("n"): n for n in row["nodes"]["active"]["nodes"] if isinstance(n, dict)}
    pairs = []
    for entry in row["nodes"]["shadow"]["nodes"]:
        if not isinstance(entry, dict):
            continue
        other = active.get(entry.get("n"), {})
        pairs.append(
            {
                "name": entry.get("n"),
                "shadow": entry,
                "active": other,
                "differs": bool(entry.get("ok")) != bool(other.get("ok")),
            }
        )
    return {**row, "label": OUTCOME_LABELS.get(record.shadow_outcome, ""), "pairs": pairs}


@page_access(roles={"GET": "viewer"})
def shadow_page(request: HttpRequest, name: str) -> HttpResponse:
    policy = get_object_or_404(Policy, name=name)
    return render(request, "policies/shadow.html", _context(request, policy))


def _refused(request: HttpRequest, policy: Policy, exc: ServiceError) -> HttpResponse:
    extra: dict[str, Any] = {"error": exc.message[:1].upper() + exc.message[1:] + "."}
    if isinstance(exc, TestsFailed):
        extra["failures"] = [r for r in exc.details if not r.get("passed")]
    context = _context(request, policy, **extra)
    return render(request, "policies/shadow.html", context, status=http_status(exc))


@page_access(roles={"POST": "publisher"})
def shadow_promote(request: HttpRequest, name: str) -> HttpResponse:
    """The shadow becomes the active version (its test cases must pass; a message is needed)."""
    policy = get_object_or_404(Policy, name=name)
    message = request.POST.get("message", "")
    try:
        result = policy_shadow_promote(
            actor=request.user,
            policy=policy,
            message=message,
            expect_version=number_or_none(request.POST.get("version", "")),
        )
    except ServiceError as exc:
        return _refused(request, policy, exc)
    _served(request, f"Promoted v{result.activation.version.number} of {policy.name}", result)
    return redirect("policy-versions", name=policy.name)


@page_access(roles={"POST": "publisher"})
def shadow_discard(request: HttpRequest, name: str) -> HttpResponse:
    policy = get_object_or_404(Policy, name=name)
    try:
        served = policy_shadow_discard(
            actor=request.user, policy=policy, message=request.POST.get("message", "")
        )
    except ServiceError as exc:
        return _refused(request, policy, exc)
    text = f"Discarded the shadow of {policy.name}; {served.summary()}."
    (messages.success if served.served_by_all else messages.warning)(request, text)
    return redirect("policy-shadow", name=policy.name)


def _served(request: HttpRequest, done: str, result) -> None:
    text = f"{done}; {result.served.summary()}."
    (messages.success if result.served.served_by_all else messages.warning)(request, text)
