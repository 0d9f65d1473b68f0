"""Celery tasks: thin wrappers that take ids, call one service, retry with backoff and have time
limits. Scheduled by beat (schedweb/celery.py)."""

from __future__ import annotations

import logging

from celery import shared_task

from policies.cluster_tasks import cluster_watch, cluster_watch_supervise  # noqa: F401  (registers them)

log = logging.getLogger(__name__)


@shared_task(
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=10,
    time_limit=30,
)
def distribute_active_policies(self) -> int:
    """Writes the active versions from the database to Redis and bumps the counter."""
    from policies.publication import active_policies_publish

    return active_policies_publish()


def _after_commit() -> None:
    """After a publish, rollback or deactivation commits: write the active set now, queue the task.

    The web process writes Redis itself (one pipeline), so a new version serves within the
    extenders' poll even while no worker is connected (a worker reconnects to a restarted Redis
    with kombu's backoff of up to 30 s). The task is queued anyway: it retries with backoff when
    Redis could not be written just now, and rewrites the set from the database after two
    concurrent publishes wrote out of order. If the broker is down too, beat repairs within a
    minute.
    """
    from policies.publication import active_policies_publish

    try:
        active_policies_publish()
    except Exception as exc:
        log.warning("could not write the active policies to Redis now (%s); the task will", exc)
    try:
        distribute_active_policies.delay()
    except Exception as exc:  # the broker is Redis: down means the extenders keep the last set
        log.warning(
            "could not queue policy distribution (%s); the periodic run will repair it", exc
        )


distribute_active_policies.after_commit = _after_commit


@shared_task(bind=True, autoretry_for=(Exception,), retry_backoff=2, max_retries=5, time_limit=60)
def decisions_record(self, batch: list[dict]) -> int:
    """Stores a batch of sampled extender decisions (sent by web processes, never in a request)."""
    from policies.services import decisions_store

    return decisions_store(batch=batch)


@shared_task(time_limit=120)
def decisions_resolve_chosen() -> int:
    """Fills in where recently decided pods were bound, from the cluster snapshot."""
    from policies.selectors import ClusterUnavailable, cluster_default
    from policies.services import decisions_resolve_chosen as resolve

    try:
        cluster = cluster_default()
    except ClusterUnavailable:
        return 0
    return resolve(cluster=cluster)


@shared_task(time_limit=30, ignore_result=True)
def pods_requeue_unblocked() -> dict:
    """Nudges kube-scheduler to retry pods a policy rejected that would now pass (policies/requeue.py)."""
    from django.conf import settings

    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return {}
    from policies.cluster.live import LiveClient
    from policies.distribution import active_entries_read
    from policies.redis import redis_client
    from policies.requeue import requeue_unblocked
    from policies.selectors import ClusterUnavailable, cluster_default

    client = redis_client()
    if not client.exists(f"schedweb:requeue:{settings.SCHEDWEB_CLUSTER_NAME}"):
        return {}
    try:
        snapshot = cluster_default()
    except ClusterUnavailable:
        return {}
    _, policies = active_entries_read()
    counts = requeue_unblocked(
        client=client,
        cluster=settings.SCHEDWEB_CLUSTER_NAME,
        snapshot=snapshot,
        policies=policies,
        kube=_kube_client(LiveClient),
    )
    if counts.get("requeued"):
        log.info("requeued %d pods a policy would now admit", counts["requeued"])
    return counts


_kube = None


def _kube_client(factory):
    global _kube
    if _kube is None:
        _kube = factory.from_settings()
    return _kube
