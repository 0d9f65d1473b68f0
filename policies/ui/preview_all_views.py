"""The background preview of every pending pod (the playground's "All pending pods" tab): start
the Celery job, then its progress bar (polled) and its per-pod answers: where kube-scheduler
puts each pod and, with "Compare with published", which pods would move.
"""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from policies import preview_jobs
from policies.cluster.sources import CLUSTER_KEYS
from policies.models import Policy

from .access import page_access
from .policy_views import _compare_source, _policy


@page_access(roles={"POST": "viewer"})
def preview_all_start(request: HttpRequest, name: str) -> HttpResponse:
    """Starts the background preview of every pending pod and answers its progress bar."""
    policy = _policy(name)
    compare_document, compare_label = None, ""
    if request.POST.get("compare") == "1":
        compare_document, compare_label = _compare_source(policy)
    cluster_key = request.POST.get("cluster", "")
    try:
        job_id = preview_jobs.preview_job_start(
            policy_name=policy.name,
            document=request.POST.get("document", ""),
            compare_document=compare_document,
            compare_label=compare_label,
            cluster_key=cluster_key if cluster_key in CLUSTER_KEYS else "",
            user_id=request.user.pk,
        )
    except preview_jobs.JobError as exc:
        return render(
            request, "policies/_preview_all.html", {"error": str(exc), "policy": policy}, status=422
        )
    return _job_response(request, policy=policy, job_id=job_id)


def _job_response(request: HttpRequest, *, policy: Policy, job_id: str) -> HttpResponse:
    try:
        job = preview_jobs.preview_job_read(job_id=job_id)
    except preview_jobs.JobError as exc:
        return render(request, "policies/_preview_all.html", {"error": str(exc), "policy": policy})
    if job is None or job["policy"] != policy.name or job["user"] != str(request.user.pk):
        return render(
            request,
            "policies/_preview_all.html",
            {"error": "This preview job is unknown or expired; start it again.", "policy": policy},
        )
    results = job["results"] or []
    if job["compare"]:  # the pods that would move first
        results = sorted(results, key=lambda r: not (r.get("compare") or {}).get("moves"))
    context = {
        "policy": policy,
        "job": job,
        "job_url": reverse(
            "policy-preview-all-status",
            kwargs={"name": policy.name, "job_id": uuid.UUID(job_id)},
        ),
        "results": results,
        "moved": sum(1 for r in results if (r.get("compare") or {}).get("moves")),
        "pct": round(100 * job["done"] / job["total"]) if job["total"] else 0,
        "waiting": timezone.now().timestamp() - job["created"],
    }
    return render(request, "policies/_preview_all.html", context)


@page_access(roles={"GET": "viewer"})
def preview_all_status(request: HttpRequest, name: str, job_id: str) -> HttpResponse:
    """The job's progress (polled every 300 ms), then its per-pod summary."""
    return _job_response(request, policy=_policy(name), job_id=job_id.hex)
