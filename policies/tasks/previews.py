"""Background previews for every pending pod (service: policies/preview_jobs.py) and backtests
(policies/backtest/jobs.py)."""

from __future__ import annotations

import logging

from celery import shared_task

from policies import preview_jobs
from policies.background import BACKTEST_RUN, PREVIEW_ALL_PENDING
from policies.backtest import jobs as backtest_jobs

log = logging.getLogger(__name__)


@shared_task(name=PREVIEW_ALL_PENDING, time_limit=300, soft_time_limit=280, ignore_result=True)
def preview_all_pending(job_id: str) -> None:
    """Evaluates a draft for every pending pod (the playground's "Preview all pending pods")."""
    try:
        preview_jobs.preview_job_run(job_id=job_id)
    except Exception as exc:  # record it for the page; the worker logs the traceback
        log.exception("preview job %s failed", job_id)
        preview_jobs.preview_job_fail(job_id, f"the job failed: {exc}")


@shared_task(name=BACKTEST_RUN, time_limit=300, soft_time_limit=280, ignore_result=True)
def backtest_run(job_id: str) -> None:
    """Judges a document over recent decisions' pods and the pending pods (issue 25, item 4)."""
    try:
        backtest_jobs.backtest_job_run(job_id=job_id)
    except Exception as exc:  # record it for the page; the worker logs the traceback
        log.exception("backtest job %s failed", job_id)
        preview_jobs.job_fail(
            kind=backtest_jobs.KIND, job_id=job_id, message=f"the job failed: {exc}"
        )
