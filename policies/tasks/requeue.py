"""The requeue nudge on beat (service: policies/extender/requeue.py)."""

from __future__ import annotations

from celery import shared_task

from policies.background import PODS_REQUEUE_UNBLOCKED
from policies.extender.requeue import requeue_run


@shared_task(name=PODS_REQUEUE_UNBLOCKED, time_limit=30, ignore_result=True)
def pods_requeue_unblocked() -> dict:
    """Nudges kube-scheduler to retry pods a policy rejected that would now pass."""
    return requeue_run()
