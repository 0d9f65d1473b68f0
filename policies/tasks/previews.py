"""Background previews for every pending pod (service: policies/preview_jobs.py) and backtests
(policies/backtest/jobs.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task

from policies import preview_jobs
from policies.background import BACKTEST_RUN, PREVIEW_ALL_PENDING
from policies.backtest import jobs as backtest_jobs

log = logging.getLogger(__name__)


def _job(kind: str, run: Callable[..., None], job_id: str) -> None:
    """Runs a polled job; a failure is recorded for its page (the worker logs the traceback)."""
    try:
        run(job_id=job_id)
    except Exception as exc:
        log.exception("%s job %s failed", kind, job_id)
        preview_jobs.job_fail(kind=kind, job_id=job_id, message=f"the job failed: {exc}")


@shared_task(name=PREVIEW_ALL_PENDING, time_limit=300, soft_time_limit=280, ignore_result=True)
def preview_all_pending(job_id: str) -> None:
    """Evaluates a draft for every pending pod (the playground's "Preview all pending pods")."""
    _job("preview", preview_jobs.preview_job_run, job_id)


@shared_task(name=BACKTEST_RUN, time_limit=300, soft_time_limit=280, ignore_result=True)
def backtest_run(job_id: str) -> None:
    """Judges a document over recent decisions' pods and the pending pods (issue 25, item 4)."""
    _job(backtest_jobs.KIND, backtest_jobs.backtest_job_run, job_id)
