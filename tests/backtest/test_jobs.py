"""Backtest jobs: small ones judged in the request, large ones by the Celery task, both stored
in Redis (a real one) and read back the same way."""

from __future__ import annotations

from unittest import mock

import pytest

from policies.backtest import jobs, run
from policies.tasks.previews import backtest_run
from tests.backtest.conftest import BIN_PACKING, pending_schedweb, with_filter


def start(document: str, last: int = 200) -> tuple[str, dict]:
    return jobs.backtest_start(
        document=document, label="draft", policy_name="bin-packing", last=last, user_id=1
    )


def test_a_small_backtest_is_judged_in_the_request_and_stored_as_a_done_job(
    recorded, isolated_redis
):
    job_id, job = start(with_filter(BIN_PACKING, "false"))
    assert job["status"] == "done" and job["done"] == job["total"]
    counts = job["results"]["summary"]["counts"]
    assert counts[run.UNSCHEDULABLE] == len(recorded)
    assert jobs.backtest_job_read(job_id=job_id)["results"] == job["results"]


def test_a_large_backtest_runs_as_the_celery_task(recorded, isolated_redis, eager_celery):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0):
        _, job = start(with_filter(BIN_PACKING, "false"))
    # eager: the task ran when it was queued, before start read the job back
    assert job["status"] == "done"
    assert job["results"]["summary"]["counts"][run.UNSCHEDULABLE] == len(recorded)


def test_a_queued_backtest_is_polled_until_the_worker_has_run_it(recorded, isolated_redis):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0), mock.patch.object(backtest_run, "delay"):
        job_id, job = start(BIN_PACKING)
    assert job["status"] == "queued" and job["results"] is None
    assert job["total"] == len(recorded) + len(pending_schedweb())  # planned before queueing
    backtest_run(job_id)  # what the worker does
    done = jobs.backtest_job_read(job_id=job_id)
    assert done["status"] == "done" and done["done"] == done["total"] > 0
    assert done["results"]["summary"]["counts"][run.SAME] == len(recorded)


def test_a_job_whose_document_no_longer_compiles_fails_with_a_message(recorded, isolated_redis):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0), mock.patch.object(backtest_run, "delay"):
        job_id, _ = start(BIN_PACKING)
    isolated_redis.hset(f"schedweb:backtest-job:{job_id}", "document", "filters: [")
    backtest_run(job_id)
    failed = jobs.backtest_job_read(job_id=job_id)
    assert failed["status"] == "error" and "the document is invalid" in failed["error"]


def test_redis_down_is_a_job_error_in_words(recorded, settings):
    from policies.redis import redis_client

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    redis_client.cache_clear()
    try:
        with pytest.raises(jobs.JobError, match="Redis is unavailable"):
            start(BIN_PACKING)
    finally:
        redis_client.cache_clear()


def test_an_unknown_job_reads_as_none(isolated_redis):
    assert jobs.backtest_job_read(job_id="0" * 32) is None
