"""The canary's guard and quiet period in the worker (service: policies/rollout/canary.py)."""

from __future__ import annotations

from celery import shared_task

from policies.background import CANARY_CHECK, CANARY_GUARD


@shared_task(
    name=CANARY_GUARD,
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=1,
    retry_backoff_max=10,
    max_retries=10,
    time_limit=60,
)
def canary_guard(self, name: str, version: int) -> bool:
    """Rolls back a canary an extender process saw trip its guard."""
    from policies.rollout.canary import canary_guard_rollback

    return canary_guard_rollback(name=name, version=int(version))


@shared_task(name=CANARY_CHECK, time_limit=60)
def canary_check() -> dict[str, int]:
    """Rolls back tripped canaries the queue lost; promotes the quiet ones."""
    from policies.rollout.canary import canary_check as check

    return check()
