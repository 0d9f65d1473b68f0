"""Distribution of the active policy versions to Redis (service: policies/publishing.py)."""

from __future__ import annotations

from celery import shared_task

from policies.background import DISTRIBUTE_ACTIVE_POLICIES
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
