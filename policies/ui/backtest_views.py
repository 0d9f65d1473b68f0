"""The versions page's Backtest section (issue 25, item 4): the draft or a version over the pods
of recent decisions and the pending pods, now. Starts the backtest (judged in the request when
small, else a job whose progress the section polls), then its summary and the pods that would
differ first, each expandable to what happened and what the document does now.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from policies import selectors
from policies.backtest import jobs
from policies.backtest.run import CLASSES, DEFAULT_LAST, DIFFERS, last_check
from policies.engine.document import PolicyInvalid
from policies.errors import ServiceError
from policies.models import Policy

from .access import page_access
from .policy_views import _policy

TEMPLATE = "policies/_backtest.html"
ROWS_SHOWN = 200  # differing pods listed on the page; the API pages through all of them

# Each class in words, for the summary and the rows (the API's names stay the keys).
WORDS = {
    "newly-unschedulable": "newly unschedulable",
    "moved": "moved",
    "error": "rule errors",
    "newly-schedulable": "newly schedulable",
    "would-schedule": "pending, would schedule",
    "same": "same",
    "still-unschedulable": "pending, still unschedulable",
    "skipped": "skipped",
}


def _error(request: HttpRequest, policy: Policy, message: str) -> HttpResponse:
    """The section's refusal in words: 422, the status htmx swaps in (base.html)."""
    return render(request, TEMPLATE, {"policy": policy, "error": message}, status=422)


@page_access(roles={"POST": "editor"})
def backtest_start(request: HttpRequest, name: str) -> HttpResponse:
    """Starts a backtest of the draft or version `version` over the last `last` decisions."""
    policy = _policy(name)
    version = request.POST.get("version", "draft")
    if version == "draft":
        document, label = policy.draft, "draft"
    else:
        number = int(version) if version.isdigit() and len(version) < 10 else 0
        document = selectors.policy_version_document(policy_name=policy.name, number=number)
        if document is None:
            return _error(request, policy, f"{policy.name} has no version {version[:20]!r}")
        label = f"v{number}"
    try:
        last = last_check(request.POST.get("last", "").strip() or DEFAULT_LAST)
        job_id, _ = jobs.backtest_start(
            document=document,
            label=label,
            policy_name=policy.name,
            last=last,
            user_id=request.user.pk,
            charge=jobs.charge_for(request.user.pk),
        )
    except PolicyInvalid as exc:
        return _error(request, policy, f"The {label} is invalid: {exc}")
    except jobs.BudgetSpent as exc:
        return _error(request, policy, exc.message)
    except ServiceError as exc:
        details = exc.details if isinstance(exc.details, list) else []
        text = "; ".join(f"{d['path']}: {d['message']}" for d in details) or exc.message
        return _error(request, policy, f"The backtest cannot run: {text}")
    except jobs.JobError as exc:
        return _error(request, policy, str(exc))
    return _job_response(request, policy=policy, job_id=job_id)


@page_access(roles={"GET": "viewer"})
def backtest_status(request: HttpRequest, name: str, job_id: uuid.UUID) -> HttpResponse:
    """The job's progress (polled every 500 ms), then its result."""
    return _job_response(request, policy=_policy(name), job_id=job_id.hex)


def _job_response(request: HttpRequest, *, policy: Policy, job_id: str) -> HttpResponse:
    try:
        job = jobs.backtest_job_read(job_id=job_id)
    except jobs.JobError as exc:
        return _error(request, policy, str(exc))
    if job is None or job.get("policy") != policy.name or job.get("user") != str(request.user.pk):
        return _error(request, policy, "This backtest is unknown or expired; run it again.")
    context: dict[str, Any] = {
        "policy": policy,
        "job": job,
        "job_id": job_id,
        "job_url": reverse(
            "policy-backtest-status", kwargs={"name": policy.name, "job_id": uuid.UUID(job_id)}
        ),
        "pct": round(100 * job["done"] / job["total"]) if job["total"] else 0,
        "waiting": timezone.now().timestamp() - job["created"],
    }
    result = job["results"]
    if result is not None:
        counts = result["summary"]["counts"]
        differ = [r for r in result["rows"] if r["class"] in DIFFERS]
        context.update(
            result=result,
            counts=[(c, WORDS[c], counts[c], c in DIFFERS) for c in CLASSES if counts[c]],
            rows=[_row(r) for r in differ[:ROWS_SHOWN]],
            more=max(0, len(differ) - ROWS_SHOWN),
            unchanged=len(result["rows"]) - len(differ),
        )
    return render(request, TEMPLATE, context)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its class in words, its decision's id and time."""
    recorded = row["recorded"] or {}
    return {
        **row,
        "words": WORDS[row["class"]],
        "decision": recorded.get("decision"),
        "at": recorded.get("at", "")[:16].replace("T", " "),  # ISO, to the minute (UTC)
    }
