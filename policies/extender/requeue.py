"""Requeueing pods a policy rejected everywhere, once the cluster changed so that it would not.

kube-scheduler retries a pod that an extender rejected only on node events, on deletions of
assigned pods, or after five minutes in its unschedulable pool: pod additions and bindings do
not requeue it (k8s.io/kubernetes v1.35 pkg/scheduler/backend/queue/scheduling_queue.go,
AssignedPodAdded moves only pods with cross-topology terms). A gang member rejected because its
group was incomplete would therefore wait minutes after the group completes. Any update of the
pending pod itself does requeue it, so schedweb re-evaluates the pods it rejected against the
current snapshot and annotates those that would now pass on some node.

    extender (filter rejected every node) -> Redis hash schedweb:requeue:<cluster>
    beat, every 2 s -> requeue_unblocked(): evaluate, annotate `schedweb.io/requeue` (again
                       every 5 s), forget once the pod is bound, gone or 10 minutes old
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile

log = logging.getLogger(__name__)

ANNOTATION = "schedweb.io/requeue"
MAX_AGE_SECONDS = 600  # kube-scheduler flushes its unschedulable pool after 5 minutes anyway
NUDGE_EVERY_SECONDS = 5.0  # a nudge can land while the pod is mid-cycle; repeat until it is bound


def requeue_key(cluster: str) -> str:
    return f"schedweb:requeue:{cluster}"


MAX_ENTRIES = 10_000  # pods remembered per cluster: about 2 MB of Redis at the bounds below
_LIMITS = {"uid": 128, "namespace": 63, "name": 253, "policy": 253}


def _valid(entry: dict[str, Any]) -> bool:
    """An entry the sweep can use: bounded strings (the protocol checks them too; this is the
    storage's own guard) and a number for `at`."""
    for field, limit in _LIMITS.items():
        value = entry.get(field)
        if type(value) is not str or not value or len(value) > limit:
            return False
    return type(entry.get("at")) in (int, float)


def rejections_record(client, *, cluster: str, rejections: list[dict[str, Any]]) -> int:
    """Called by extender processes (background thread): remember pods rejected everywhere.

    Invalid entries are skipped, and nothing new is added once the hash holds MAX_ENTRIES
    (the sweep forgets entries after MAX_AGE_SECONDS, with every source). Returns the number
    written."""
    valid = {r["uid"]: orjson.dumps(r) for r in rejections if _valid(r)}
    if not valid:
        return 0
    key = requeue_key(cluster)
    if client.hlen(key) >= MAX_ENTRIES:
        log.warning(
            "requeue hash %s is full (%d pods); not adding %d", key, MAX_ENTRIES, len(valid)
        )
        return 0
    client.hset(key, mapping=valid)
    return len(valid)


def rejections_prune(client, *, cluster: str, now: float | None = None) -> int:
    """Forgets entries older than MAX_AGE_SECONDS or unreadable; returns how many. Runs whatever
    the cluster source (the sweep itself runs only with the live source)."""
    key = requeue_key(cluster)
    now = time.time() if now is None else now
    stale = []
    for uid, data in client.hscan_iter(key, count=1000):
        try:
            entry = orjson.loads(data)
            old = now - float(entry["at"]) > MAX_AGE_SECONDS
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            old = True
        if old:
            stale.append(uid)
    if stale:
        client.hdel(key, *stale)
    return len(stale)


def _compiled_or_none(entry: dict[str, Any] | None):
    """The entry's policy under the installation's budget, as the extender compiles it; None
    when it is withdrawn or does not compile here (the extender does not serve it either)."""
    if entry is None:
        return None
    try:
        return policy_compile(entry["document"])
    except PolicyInvalid:
        return None


def requeue_run() -> dict[str, int]:
    """One beat run: nudges the pods the active policies would now admit (live source only)."""
    from django.conf import settings

    from policies.cluster.live import LiveClient
    from policies.cluster.sources import cluster_default
    from policies.errors import ClusterUnavailable
    from policies.publishing import active_entries_read
    from policies.redis import redis_client

    client = redis_client()
    if settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        # Nothing to nudge without a cluster; still forget what the extender remembered.
        return {"forgotten": rejections_prune(client, cluster=settings.SCHEDWEB_CLUSTER_NAME)}
    if not client.exists(requeue_key(settings.SCHEDWEB_CLUSTER_NAME)):
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
    """One Kubernetes client per worker process, created on first use."""
    global _kube
    if _kube is None:
        _kube = factory.from_settings()
    return _kube


def requeue_unblocked(
    *,
    client,
    cluster: str,
    snapshot,
    policies: dict[str, dict[str, Any]],
    kube,
    now: float | None = None,
) -> dict[str, int]:
    """Annotates rejected pods that the active policy would now admit somewhere.

    `policies`: active entries by policy name (distribution format); `kube`: has
    annotate_pod(namespace=, name=, annotations=); `now`: the run's time (the clock's unless a
    test gives its own). Returns counts for logging and tests.
    """
    key = requeue_key(cluster)
    raw = client.hgetall(key)
    counts = {"checked": 0, "requeued": 0, "forgotten": 0}
    now = time.time() if now is None else now
    state = snapshot.state
    nodes = state.nodes()
    for uid_bytes, data in raw.items():
        uid = uid_bytes.decode()
        entry = orjson.loads(data)
        pod = state.pod(uid)
        policy_entry = policies.get(entry["policy"])
        gone = pod is None or bool(pod["nodeName"])
        compiled = _compiled_or_none(policy_entry)
        if gone or compiled is None or now - entry["at"] > MAX_AGE_SECONDS:
            client.hdel(key, uid)  # bound, gone, policy withdrawn or not servable, or too old
            counts["forgotten"] += 1
            continue
        counts["checked"] += 1
        if now - entry.get("nudged", 0) < NUDGE_EVERY_SECONDS:
            continue
        evaluation = compiled.evaluate(pod, nodes, state, scores=False)
        if not any(evaluation.passed):
            continue
        annotations = {ANNOTATION: f"{now:.3f}"}
        try:
            kube.annotate_pod(namespace=pod["namespace"], name=pod["name"], annotations=annotations)
        except Exception as exc:  # the next run tries again
            log.warning("could not requeue %s/%s: %s", pod["namespace"], pod["name"], exc)
            continue
        # Kept until the pod is bound: a nudge that lands mid-cycle may be lost.
        client.hset(key, uid, orjson.dumps({**entry, "nudged": now}))
        counts["requeued"] += 1
    return counts
