"""Queueing background work by task name.

Writers (services, the extender, the playground) queue Celery tasks through these names instead
of importing `policies.tasks`, whose modules import them in turn: no import cycle, and the task
names are stable whatever module a task lives in (messages already queued keep working after a
refactor). The tasks themselves are registered in `policies/tasks/`.
"""

from __future__ import annotations

from typing import Any

DISTRIBUTE_ACTIVE_POLICIES = "schedweb.distribute_active_policies"
QUEUE_CLASSES_ENSURE = "schedweb.queue_classes_ensure"
GANG_WORKLOADS_ENSURE = "schedweb.gang_workloads_ensure"
DECISIONS_RECORD = "schedweb.decisions_record"
DECISIONS_RESOLVE_CHOSEN = "schedweb.decisions_resolve_chosen"
DECISIONS_PRUNE = "schedweb.decisions_prune"
SHADOW_PICKS = "schedweb.shadow_picks"
CANARY_GUARD = "schedweb.canary_guard"
CANARY_CHECK = "schedweb.canary_check"
SHARES_PRUNE = "schedweb.shares_prune"
PODS_REQUEUE_UNBLOCKED = "schedweb.pods_requeue_unblocked"
PREVIEW_ALL_PENDING = "schedweb.preview_all_pending"
BACKTEST_RUN = "schedweb.backtest_run"
CLUSTER_WATCH = "schedweb.cluster_watch"
CLUSTER_WATCH_SUPERVISE = "schedweb.cluster_watch_supervise"


def registered_task(name: str):
    """The task registered as `name`. A web process imports no task module by itself (Celery's
    autodiscovery runs when a worker starts), so the first lookup there has Celery's loader
    import them, as the worker does."""
    from celery import current_app

    try:
        return current_app.tasks[name]
    except KeyError:
        current_app.loader.import_default_modules()
        return current_app.tasks[name]


def task_queue(name: str, *args: Any, countdown: float | None = None) -> None:
    """Queues task `name` with `args` (the registered task object, so eager mode applies);
    raises what the broker raises when it cannot take the message."""
    task = registered_task(name)
    if countdown is None:
        task.delay(*args)
    else:
        task.apply_async(args=list(args), countdown=countdown)
