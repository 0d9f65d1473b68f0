"""Playground share links: expired ones are deleted."""

from __future__ import annotations

from celery import shared_task

from policies import services
from policies.background import SHARES_PRUNE


@shared_task(name=SHARES_PRUNE, time_limit=300)
def shares_prune() -> int:
    """Deletes share links past their expiry (SCHEDWEB_SHARE_DAYS; beat, hourly)."""
    return services.shares_prune()
