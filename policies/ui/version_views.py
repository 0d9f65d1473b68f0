"""A policy's versions page and its writes: publish (with shadow and canary), rollback, deactivate,
delete. Each write checks its role on the server (403 with a sentence) whatever the page showed,
calls one service and answers with the page's fragment or a redirect.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from policies import selectors, services
from policies.api.errors import http_status
from policies.engine.compare import rule_changes
from policies.engine.document import PolicyInvalid
from policies.errors import (
    Conflict,
    PreconditionFailed,
    ServiceError,
    TestsFailed,
)
from policies.evaluation import (
    policy_compile,
)
from policies.models import (
    Policy,
    PolicyActivation,
)
from policies.numbers import number_or_none
from policies.rollout.selectors import shadow_get

from .access import is_htmx, page_access
from .forms import PublishForm
from .policy_views import _abilities, _policy, _run_tests


def _versions_context(request: HttpRequest, policy: Policy) -> dict[str, Any]:
    active = selectors.policy_get_active(policy=policy)
    activation = (
        PolicyActivation.objects.filter(policy=policy, active=True, role="active")
        .select_related("activated_by")
        .first()
    )
    versions = list(policy.versions.select_related("author").order_by("-number"))
    history = list(
        PolicyActivation.objects.filter(policy=policy)
        .select_related("version", "activated_by")
        .order_by("-activated_at", "-pk")[:10]
    )
    return {
        "policy": policy,
        "active": active,
        "activation": activation,
        "versions": versions,
        "history": history,
        "next_number": (versions[0].number + 1) if versions else 1,
        "draft_changed": active is None or active.document != policy.draft,
        "form": PublishForm(),
        # the shadow version judged beside the active one (issue 25), for the Serving card
        "shadow": shadow_get(policy=policy),
        # the canary deciding a share (issue 25) and the guard's last rollback, for the same card
        **_canary_context(policy),
        **_abilities(request),
    }


def _canary_context(policy: Policy) -> dict[str, Any]:
    from policies.rollout.canary import canary_last_rollback, canary_status, canary_words
    from policies.ui.ops_views import guard_words

    status = canary_status(policy=policy)
    notice = canary_last_rollback(policy=policy)
    return {
        "canary": canary_words(status) if status else None,
        "guard_notice": (
            {**notice, "words": guard_words(notice), "when": datetime.fromisoformat(notice["at"])}
            if notice
            else None
        ),
    }


@page_access(roles={"GET": "viewer"})
def versions_page(request: HttpRequest, name: str) -> HttpResponse:
    """Version history with rollback, and the publish form."""
    policy = _policy(name)
    return render(request, "policies/versions.html", _versions_context(request, policy))


def _versions_error(
    request: HttpRequest, policy: Policy, message: str, status: int, **extra: Any
) -> HttpResponse:
    context = {**_versions_context(request, policy), "error": message, **extra}
    return render(request, "policies/versions.html", context, status=status)


@page_access(roles={"GET": "viewer", "POST": "publisher"})
def publish(request: HttpRequest, name: str) -> HttpResponse:
    """Two steps: `check` runs the test cases on the saved draft and shows what would be
    published; `confirm` publishes it (if the draft is still the revision that was checked).
    A GET (a reload of a refused confirm's page) goes to the versions page."""
    if request.method == "GET":
        return redirect("policy-versions", name=name)
    policy = _policy(name)
    form = PublishForm(request.POST)
    step = request.POST.get("step", "check")
    if not form.is_valid():
        context = {**_versions_context(request, policy), "form": form}
        template = "policies/_publish_check.html" if is_htmx(request) else "policies/versions.html"
        return render(request, template, context, status=422)
    message = form.cleaned_data["message"]
    # a refused confirm renders the versions page again with the message the user typed
    keep = {"form": PublishForm(initial={"message": message})}
    if step == "confirm":
        checked = number_or_none(request.POST.get("revision", ""))
        stale = (
            f"The draft changed since you reviewed it (revision {checked if checked is not None else '?'}, "
            f"now {policy.draft_revision}); review it again before publishing."
        )
        if checked is None:
            return _versions_error(request, policy, stale, 409, **keep)
        try:
            # The service compares the revision again under the publishing lock.
            result = services.policy_publish(
                actor=request.user, policy=policy, message=message, revision=checked
            )
        except PreconditionFailed:
            policy.refresh_from_db()
            return _versions_error(request, policy, stale, 409, **keep)
        except TestsFailed as exc:
            return _versions_error(
                request,
                policy,
                exc.message[:1].upper() + exc.message[1:] + ".",
                422,
                failures=[r for r in exc.details if not r["passed"]],
                **keep,
            )
        except PolicyInvalid as exc:
            return _versions_error(
                request, policy, f"The saved draft does not compile: {exc}", 422, **keep
            )
        except Conflict as exc:
            conflict = exc.details if isinstance(exc.details, dict) else None
            return _versions_error(
                request,
                policy,
                exc.message[:1].upper() + exc.message[1:] + ".",
                409,
                conflict=conflict,
                **keep,
            )
        except ServiceError as exc:
            return _versions_error(
                request,
                policy,
                exc.message[:1].upper() + exc.message[1:] + ".",
                http_status(exc),
                **keep,
            )
        count = len(result.test_results)
        tests = f"{count} test case{'s' if count != 1 else ''} passed" if count else "no test cases"
        _served_message(
            request,
            f"Published {policy.name} v{result.version.number} ({tests})",
            result.served,
        )
        return redirect("policy-versions", name=policy.name)
    # step == "check": run the tests on the saved draft, show the outcome and a confirm button
    context = _versions_context(request, policy)
    results, compile_error = _run_tests(policy, policy.draft)
    active = context["active"]
    conflict = None
    if not compile_error:
        names = list(policy_compile(policy.draft).spec.scheduler_names)
        conflict = selectors.scheduler_name_conflict(policy=policy, names=names)
    context.update(
        conflict=conflict,
        form=form,
        checked=True,
        message=message,
        revision=policy.draft_revision,
        results=results or [],
        failed=[r for r in results or [] if not r["passed"]],
        compile_error=compile_error,
        rules=rule_changes(active.document if active else "", policy.draft),
        same_as_active=active is not None and active.document == policy.draft,
    )
    template = "policies/_publish_check.html" if is_htmx(request) else "policies/versions.html"
    return render(request, template, context)


def _version_number(request: HttpRequest) -> int | None:
    value = request.POST.get("number", "")
    return number_or_none(value)


@page_access(roles={"POST": "publisher"})
def rollback(request: HttpRequest, name: str) -> HttpResponse:
    """Activates an earlier version again."""
    policy = _policy(name)
    number = _version_number(request)
    if number is None:
        return _versions_error(request, policy, "Say which version to roll back to.", 400)
    message = request.POST.get("message", "")
    if len(message) > services.MESSAGE_MAX_CHARS:
        return _versions_error(
            request, policy, f"Keep the reason under {services.MESSAGE_MAX_CHARS} characters.", 400
        )
    try:
        result = services.policy_rollback(
            actor=request.user, policy=policy, number=number, message=message
        )
    except ServiceError as exc:
        return _versions_error(
            request, policy, exc.message[:1].upper() + exc.message[1:] + ".", http_status(exc)
        )
    _served_message(request, f"Rolled back {policy.name} to v{number}", result.served)
    return redirect("policy-versions", name=policy.name)


@page_access(roles={"POST": "publisher"})
def deactivate(request: HttpRequest, name: str) -> HttpResponse:
    """Takes the policy out of service: its pods pass through the extender untouched."""
    policy = _policy(name)
    try:
        served = services.policy_deactivate(actor=request.user, policy=policy)
    except ServiceError as exc:
        return _versions_error(
            request, policy, exc.message[:1].upper() + exc.message[1:] + ".", http_status(exc)
        )
    _served_message(request, f"Deactivated {policy.name}: its pods now pass through", served)
    return redirect("policy-versions", name=policy.name)


def _served_message(request: HttpRequest, done: str, served) -> None:
    """The toast after a publish, rollback or deactivation: what was done, and whether every
    extender process serves it (a warning naming those that have not confirmed)."""
    text = f"{done}; {served.summary()}."
    if served.served_by_all:
        messages.success(request, text)
    else:
        messages.warning(request, text)


@page_access(roles={"POST": "admin"})
def policy_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Deletes an inactive policy with its versions and test cases (admin)."""
    policy = _policy(name)
    if request.POST.get("confirm_name", "") != policy.name:
        return _versions_error(
            request, policy, f"Type the policy's name ({policy.name}) to delete it.", 400
        )
    try:
        services.policy_delete(actor=request.user, policy=policy)
    except ServiceError as exc:
        return _versions_error(
            request, policy, exc.message[:1].upper() + exc.message[1:] + ".", http_status(exc)
        )
    messages.success(request, f"Deleted policy {name}.")
    return redirect("policy-list")
