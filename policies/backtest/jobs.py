"""A backtest as a job a page or a client polls: one of at most INLINE_MAX_PODS pods is judged
in the request (under the preview's time limit), a larger one by a Celery task
(policies/tasks/previews.py, `backtest_run`) under BACKGROUND_SECONDS, with progress.

Either way the result is stored as a job (policies/preview_jobs.py's bookkeeping, kind
"backtest", JOB_TTL), so the API pages its rows from the same place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from policies.background import BACKTEST_RUN
from policies.backtest.run import Plan, backtest_plan, backtest_run
from policies.cluster.sources import cluster_default
from policies.engine.document import PolicyInvalid
from policies.errors import ServiceError
from policies.preview_jobs import (
    JobError,
    job_fail,
    job_finish,
    job_progress,
    job_read,
    job_start,
    job_update,
)
from policies.throttle import work_charge

KIND = "backtest"
# Judged in the request: 50 pods x a 500-node cycle is well under a second of CPU on the
# development machine; more go to the worker, whose progress the page shows.
INLINE_MAX_PODS = 50
# The task's total cap (its soft time limit is 280 s): past it, the rest are "not judged".
BACKGROUND_SECONDS = 240.0


class BudgetSpent(ServiceError):
    """The user's backtests have judged their budget of pods in this throttle window."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def charge_for(user_id: int) -> Callable[[int], None]:
    """backtest_start's `charge` for one user: each backtest charged by its size in pods
    against SCHEDWEB_BACKTEST_PODS_PER_WINDOW (throttle.work_charge); BudgetSpent past it."""

    def charge(pods: int) -> None:
        limit = settings.SCHEDWEB_BACKTEST_PODS_PER_WINDOW
        wait = work_charge(kind=KIND, user_id=user_id, units=pods, limit=limit)
        if wait:
            raise BudgetSpent(
                f"your backtests have judged their budget of {limit} pods in this window; this "
                f"one needs {pods}: try again in {wait} s",
                retry_after=wait,
            )

    return charge


def backtest_start(
    *,
    document: str,
    label: str,
    policy_name: str,
    last: int,
    user_id: int,
    charge: Callable[[int], None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Plans a backtest of `document` (PolicyInvalid, ClusterUnavailable), calls `charge` with
    its size in pods (which may refuse by raising), and records its job: judged here when
    small, else queued. Returns (job id, the job as backtest_job_read reads it). JobError when
    Redis or the broker refuses."""
    cluster = cluster_default()
    plan = backtest_plan(document=document, cluster=cluster, last=last)
    if charge is not None:
        charge(plan.total)
    inline = plan.total <= INLINE_MAX_PODS
    fields = {
        "policy": policy_name,
        "label": label,
        "user": str(user_id),
        "document": document,
        "last": last,
        "total": plan.total,
    }
    job_id = job_start(
        kind=KIND, task="" if inline else BACKTEST_RUN, fields=fields, what="backtests"
    )
    if inline:
        _run(job_id, document, last, cluster=cluster, plan=plan, seconds=_inline_seconds())
    job = backtest_job_read(job_id=job_id)
    if job is None:
        raise JobError("the backtest's record expired at once; is Redis evicting keys?")
    return job_id, job


def _inline_seconds() -> float:
    return settings.SCHEDWEB_PREVIEW_SECONDS


def backtest_job_read(*, job_id: str) -> dict[str, Any] | None:
    """The job (status, done/total, error, `results` once done), or None (unknown, expired)."""
    job = job_read(kind=KIND, job_id=job_id)
    if job is not None:
        job["last"] = int(job.get("last") or 0)
    return job


def backtest_job_run(*, job_id: str) -> None:
    """What the task does: plans again (the snapshot may have moved since it was queued) and
    judges every pod, recording progress."""
    job = backtest_job_read(job_id=job_id)
    if job is None:
        return
    try:
        cluster = cluster_default()
        plan = backtest_plan(document=job["document"], cluster=cluster, last=job["last"])
    except PolicyInvalid as exc:
        job_fail(kind=KIND, job_id=job_id, message=f"the document is invalid: {exc}")
        return
    except Exception as exc:  # ClusterUnavailable, Redis or database errors: said in words
        job_fail(kind=KIND, job_id=job_id, message=str(exc))
        return
    _run(
        job_id, job["document"], job["last"], cluster=cluster, plan=plan, seconds=BACKGROUND_SECONDS
    )


def _run(job_id: str, document: str, last: int, *, cluster, plan: Plan, seconds: float) -> None:
    job_update(
        kind=KIND,
        job_id=job_id,
        fields={"status": "running", "total": plan.total, "started": time.time()},
    )
    result = backtest_run(
        document=document,
        cluster=cluster,
        plan=plan,
        last=last,
        seconds=seconds,
        progress=job_progress(kind=KIND, job_id=job_id),
    )
    job_finish(
        kind=KIND, job_id=job_id, results=result.to_dict(), fields={"done": len(result.rows)}
    )
