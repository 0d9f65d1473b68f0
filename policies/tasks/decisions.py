"""Sampled extender decisions: stored in batches, then completed with where pods were bound."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from policies import services
from policies.background import (
    DECISIONS_PRUNE,
    DECISIONS_RECORD,
    DECISIONS_RESOLVE_CHOSEN,
    SHADOW_PICKS,
)
from policies.cluster.sources import cluster_default
from policies.errors import ClusterUnavailable


@shared_task(
    name=DECISIONS_RECORD,
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=2,
    max_retries=5,
    time_limit=60,
)
def decisions_record(self, batch: list[dict]) -> int:
    """Stores a batch of sampled extender decisions (sent by web processes, never in a request)."""
    return services.decisions_store(batch=batch)


@shared_task(name=DECISIONS_RESOLVE_CHOSEN, time_limit=120)
def decisions_resolve_chosen() -> int:
    """Fills in where recently decided pods were bound, from the cluster snapshot."""
    try:
        cluster = cluster_default()
    except ClusterUnavailable:
        return 0
    return services.decisions_resolve_chosen(cluster=cluster)


@shared_task(name=DECISIONS_PRUNE, time_limit=300)
def decisions_prune() -> int:
    """Deletes decision records past SCHEDWEB_DECISIONS_KEEP_DAYS (beat, hourly)."""
    return services.decisions_prune(older_than_days=settings.SCHEDWEB_DECISIONS_KEEP_DAYS)


@shared_task(name=SHADOW_PICKS, time_limit=60)
def shadow_picks() -> int:
    """Adds the model's kube-scheduler pick under both versions to recent shadow records (beat,
    every 30 s; a bounded number per run)."""
    from policies.rollout.services import shadow_picks_fill

    try:
        return shadow_picks_fill(cluster=cluster_default)  # read only if a record awaits
    except ClusterUnavailable:
        return 0
