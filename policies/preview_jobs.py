"""Preview for all pending pods: too large for a request, so a Celery task
(policies/tasks/previews.py) evaluates the draft for every pending pod of the snapshot while
the page polls its progress. Its job bookkeeping (job_start, job_read, job_progress, ...) is
shared by every polled background evaluation (the backtest, policies/backtest/jobs.py).

A job lives in Redis for JOB_TTL seconds under schedweb:preview-job:<id> (a hash: status,
done/total, error, the inputs) and ...:results (JSON, written once at the end). The task takes
the job id only (thin task); `preview_job_run` does the work and records progress as it goes.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from policies import selectors
from policies.background import PREVIEW_ALL_PENDING, task_queue
from policies.cluster.sources import cluster_for
from policies.engine.document import PolicyInvalid
from policies.evaluation import pods_pending, policy_compile, preview_run, profile_from_text
from policies.redis import redis_client

log = logging.getLogger(__name__)

JOB_TTL = 3600
KEY = "schedweb:preview-job:{id}"
PROGRESS_EVERY_SECONDS = 0.1  # progress writes per job are at most ~10 per second
MAX_PODS = 5000  # pods evaluated per job; the rest are counted as left out


class JobError(RuntimeError):
    """A job could not be started or read (Redis is down, the broker refused it)."""


def _key(job_id: str, suffix: str = "", kind: str = "preview") -> str:
    return KEY.replace("preview", kind, 1).format(id=job_id) + suffix


# --- job bookkeeping, shared by every background evaluation a page polls ----------------------
# A job of `kind` lives under schedweb:<kind>-job:<id> (the hash) and ...:results (JSON, written
# once); the task takes the id only. The backtest (policies/backtest/jobs.py) uses the same.


def job_start(*, kind: str, task: str, fields: dict[str, Any], what: str) -> str:
    """Records a job of `kind` with `fields` (status queued, done/total 0) and queues `task`
    with its id; returns the id. JobError says why not, in words about `what`."""
    job_id = uuid.uuid4().hex
    fields = {"status": "queued", "done": 0, "total": 0, "created": time.time(), **fields}
    try:
        client = redis_client()
        pipe = client.pipeline(transaction=True)
        pipe.hset(_key(job_id, kind=kind), mapping=fields)
        pipe.expire(_key(job_id, kind=kind), JOB_TTL)
        pipe.execute()
    except Exception as exc:  # redis errors: the page says so in words
        raise JobError(f"Redis is unavailable, so {what} cannot run: {exc}") from None
    if not task:
        return job_id  # the caller runs it in the request
    try:
        task_queue(task, job_id)
    except Exception as exc:  # the broker is Redis too; it may refuse while the hash was written
        job_fail(kind=kind, job_id=job_id, message=f"could not queue the job: {exc}")
        raise JobError(f"could not queue the {what} job: {exc}") from None
    return job_id


def job_read(*, kind: str, job_id: str) -> dict[str, Any] | None:
    """The job's fields (done, total and created as numbers) and `results` once done (None
    before), or None when unknown or expired."""
    try:
        client = redis_client()
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(_key(job_id, kind=kind))
        pipe.get(_key(job_id, ":results", kind=kind))
        raw, results = pipe.execute()
    except Exception as exc:
        raise JobError(f"Redis is unavailable: {exc}") from None
    if not raw:
        return None
    job = {k.decode(): v.decode() for k, v in raw.items()}
    job["done"] = int(job.get("done", 0))
    job["total"] = int(job.get("total", 0))
    job["created"] = float(job.get("created", 0))
    job["results"] = orjson.loads(results) if results else None
    return job


def job_update(*, kind: str, job_id: str, fields: dict[str, Any]) -> None:
    """Sets `fields` of the job's hash (status, progress)."""
    redis_client().hset(_key(job_id, kind=kind), mapping=fields)


def job_progress(*, kind: str, job_id: str) -> Callable[[int], None]:
    """A callback that records how many items are done, at most every PROGRESS_EVERY_SECONDS."""
    last_write = time.monotonic()

    def progress(done: int) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write >= PROGRESS_EVERY_SECONDS:
            job_update(kind=kind, job_id=job_id, fields={"done": done})
            last_write = now

    return progress


def job_finish(*, kind: str, job_id: str, results: Any, fields: dict[str, Any]) -> None:
    """Stores `results` and marks the job done with `fields`, in one transaction."""
    pipe = redis_client().pipeline(transaction=True)
    pipe.set(_key(job_id, ":results", kind=kind), orjson.dumps(results), ex=JOB_TTL)
    pipe.hset(
        _key(job_id, kind=kind), mapping={"status": "done", "finished": time.time(), **fields}
    )
    pipe.execute()


def job_fail(*, kind: str, job_id: str, message: str) -> None:
    """Marks the job failed with `message` (shown on the page)."""
    try:
        job_update(kind=kind, job_id=job_id, fields={"status": "error", "error": message})
    except Exception:  # nothing more to record it in; the page shows "expired"
        log.warning("%s job %s failed and Redis is down: %s", kind, job_id, message)


# --- "Preview all pending pods" ------------------------------------------------------------------


def preview_job_start(
    *,
    policy_name: str,
    document: str,
    compare_document: str | None,
    compare_label: str,
    cluster_key: str,
    user_id: int,
) -> str:
    """Records a job and queues its task; returns the job id. JobError says why not."""
    fields = {
        "policy": policy_name,
        "user": str(user_id),
        "document": document,
        "compare_document": compare_document or "",
        "compare": "1" if compare_document is not None else "",
        "compare_label": compare_label,
        "cluster": cluster_key,
    }
    return job_start(
        kind="preview", task=PREVIEW_ALL_PENDING, fields=fields, what="background previews"
    )


def preview_job_read(*, job_id: str) -> dict[str, Any] | None:
    """The job's status (and results once done), or None when unknown or expired."""
    job = job_read(kind="preview", job_id=job_id)
    if job is not None:
        job["compare"] = job.get("compare") == "1"
    return job


def preview_job_fail(job_id: str, message: str) -> None:
    """Marks the job failed with `message` (shown on the page)."""
    job_fail(kind="preview", job_id=job_id, message=message)


def _pod_result(preview: Any, pod: dict[str, Any]) -> dict[str, Any]:
    """One pending pod: where kube-scheduler puts it (the answer) and the policy's part."""
    placement = preview.placement
    evaluation = preview.evaluation
    return {
        "pod": f"{pod['namespace']}/{pod['name']}",
        "scheduler": pod["schedulerName"],
        "applies": evaluation.applies,
        "reason": evaluation.reason,
        "pick": list(placement.pick),
        "finalTotal": placement.final_total(),
        "feasible": len(placement.feasible()),
        "nodes": len(placement.nodes),
        "reasons": placement.reasons(),
        # an unschedulable pod's FailedScheduling message, whole (None when it is placed)
        "failedScheduling": None if placement.pick else placement.failed_scheduling,
        "policyRejects": sum(1 for n in placement.nodes if n.rule),
        "errors": sum(len(v) for v in evaluation.errors.values()),
    }


def preview_job_run(*, job_id: str) -> None:
    """Evaluates the job's document for every pending pod, recording progress and results."""
    job = preview_job_read(job_id=job_id)
    if job is None:
        log.warning("preview job %s expired before it ran", job_id)
        return
    try:
        policy_compile(job["document"])  # both documents are checked before any pod is run
        compare_document = job["compare_document"] if job["compare"] else None
        if compare_document is not None:
            policy_compile(compare_document)
        cluster = cluster_for(key=job["cluster"])
    except PolicyInvalid as exc:
        preview_job_fail(job_id, f"the document is invalid: {exc}")
        return
    except Exception as exc:  # ClusterUnavailable, InputError, Redis errors
        preview_job_fail(job_id, str(exc))
        return
    nodes = cluster.nodes()
    pending = pods_pending(cluster=cluster)
    truncated = max(0, len(pending) - MAX_PODS)
    pending = pending[:MAX_PODS]
    job_update(
        kind="preview",
        job_id=job_id,
        fields={
            "status": "running",
            "total": len(pending),
            "started": time.time(),
            "truncated": truncated,
            "cluster_label": cluster.describe(),
            "nodes": len(nodes),
        },
    )
    results = []
    progress = job_progress(kind="preview", job_id=job_id)
    stored = selectors.scheduler_profile_text()  # read once; parsed once per schedulerName
    for done, pod in enumerate(pending, start=1):
        preview = preview_run(
            document=job["document"],
            pod=pod,
            cluster=cluster,
            compare_document=compare_document,
            profile=profile_from_text(stored, pod["schedulerName"]),
        )
        row = _pod_result(preview, pod)
        if preview.comparison is not None:  # what would change in the cluster for this pod
            c = preview.comparison
            row["compare"] = {
                "moves": c["moves"],
                "summary": c["summary"],
                "pickBefore": c["pickBefore"],
                "pickChanged": c["pickChanged"],
                "feasibleBefore": c["feasibleBefore"],
                "reasonsBefore": c["reasonsBefore"],
                "reasonsChanged": c["reasonsChanged"],
                "appliesBefore": c["appliesBefore"],
            }
        results.append(row)
        progress(done)
    job_finish(kind="preview", job_id=job_id, results=results, fields={"done": len(pending)})
