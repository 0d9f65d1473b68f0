"""Distribution of the active policy versions to Redis (service: policies/publishing.py)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from policies.background import (
    DISTRIBUTE_ACTIVE_POLICIES,
    GANG_WORKLOADS_ENSURE,
    QUEUE_CLASSES_ENSURE,
)
from policies.publishing import active_policies_publish


@shared_task(
    name=DISTRIBUTE_ACTIVE_POLICIES,
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=10,
    time_limit=30,
)
def distribute_active_policies(self) -> int:
    """Writes the active versions from the database to Redis and bumps the counter."""
    return active_policies_publish()


@shared_task(
    name=QUEUE_CLASSES_ENSURE,
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=10,
    time_limit=120,
)
def queue_classes_ensure(self) -> int:
    """Creates the PriorityClasses of the active policies' queue keys (live clusters only)
    and tells the webhooks which exist; returns how many were created."""
    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return 0
    from policies.queue_classes import queue_classes_ensure as ensure

    return ensure()


@shared_task(name=GANG_WORKLOADS_ENSURE, time_limit=30, ignore_result=True)
def gang_workloads_ensure() -> int:
    """Detects whether the cluster serves Workloads and creates those of linked gangs (live
    clusters only; every 2 s, like the requeue nudge: a gang waits for its Workload)."""
    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return 0
    from policies.gangs import gang_workloads_ensure as ensure

    return ensure()
