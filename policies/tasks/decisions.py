"""Sampled extender decisions: stored in batches, then completed with where pods were bound."""

from __future__ import annotations

import logging

import orjson
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

log = logging.getLogger(__name__)


@shared_task(
    name=DECISIONS_RECORD,
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=2,
    max_retries=5,
    time_limit=60,
)
def decisions_record(self, batch: list[dict] | str) -> int:
    """Stores a batch of sampled extender decisions (sent by web processes, never in a request):
    the records themselves, or (from an extender listener) their JSON encoded by orjson, which
    a listener's thread encodes in a seventh of the time kombu's JSON takes for 500 nodes."""
    if isinstance(batch, str):
        try:
            batch = orjson.loads(batch)
        except orjson.JSONDecodeError as exc:
            log.warning("dropped a batch of sampled decisions that is not JSON: %s", exc)
            return 0
    if not isinstance(batch, list):
        log.warning("dropped a batch of sampled decisions that is not a list")
        return 0
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
