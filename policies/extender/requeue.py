"""Requeueing pods a policy rejected everywhere, once the cluster changed so that it would not.

kube-scheduler retries a pod that an extender rejected only on node events, on deletions of
assigned pods, or after five minutes in its unschedulable pool: pod additions and bindings do
not requeue it (k8s.io/kubernetes v1.35 pkg/scheduler/backend/queue/scheduling_queue.go,
AssignedPodAdded moves only pods with cross-topology terms). A gang member rejected because its
group was incomplete would therefore wait minutes after the group completes. Any update of the
pending pod itself does requeue it, so schedweb re-evaluates the pods it rejected against the
current snapshot and annotates those that would now pass on some node.

    extender (filter rejected every node) -> Redis hash schedweb:requeue:<cluster> (uid ->
                       entry) and sorted set schedweb:requeue:<cluster>:order (uid by time),
                       written together by one Lua script: at most MAX_ENTRIES, the oldest
                       evicted first (a flood of rejections cannot keep out the next real one)
    beat, every 2 s -> requeue_unblocked(): evaluate, annotate `schedweb.io/requeue` (again
                       every 5 s), forget once the pod is bound, gone or 10 minutes old
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import orjson

from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile
from policies.rollout.split import Split

log = logging.getLogger(__name__)

ANNOTATION = "schedweb.io/requeue"
MAX_AGE_SECONDS = 600  # kube-scheduler flushes its unschedulable pool after 5 minutes anyway
NUDGE_EVERY_SECONDS = 5.0  # a nudge can land while the pod is mid-cycle; repeat until it is bound


def requeue_key(cluster: str) -> str:
    return f"schedweb:requeue:{cluster}"


def _order_key(cluster: str) -> str:
    """The sorted set of the hash's uids by rejection time: what eviction takes the oldest of."""
    return f"{requeue_key(cluster)}:order"


MAX_ENTRIES = 10_000  # pods remembered per cluster: at most about 10 MB of Redis
# An entry as stored: ASCII fields at their limits below, with "nudged", take 796 bytes as JSON;
# names of escaped control or multi-byte characters can take more, and are not stored.
MAX_ENTRY_BYTES = 1024
_LIMITS = {"uid": 128, "namespace": 63, "name": 253, "policy": 253}
BATCH = 1000  # entries per script call: each call holds Redis for about a millisecond


@dataclass(frozen=True, slots=True)
class Recorded:
    """What rejections_record did: entries written, and older ones evicted to make room."""

    written: int
    evicted: int


def _valid(entry: dict[str, Any]) -> bool:
    """An entry the sweep can use: bounded strings (the protocol checks them too; this is the
    storage's own guard) and a finite number for `at`."""
    for field, limit in _LIMITS.items():
        value = entry.get(field)
        if type(value) is not str or not value or len(value) > limit:
            return False
    at = entry.get("at")
    return type(at) in (int, float) and math.isfinite(at)


# KEYS: the hash, the order set. ARGV: the cap, then uid, entry, time for each entry. Writes
# them all, then evicts the oldest (by time) until the hash holds at most the cap; returns how
# many were evicted. Atomic: two extender processes cannot both pass a check and both write
# (10 300 rejections filled the old check-then-HSET past its cap). Uids in the hash but not in
# the order set (written before it existed) join it as the oldest.
_RECORD = """
local cap = tonumber(ARGV[1])
if redis.call('ZCARD', KEYS[2]) < redis.call('HLEN', KEYS[1]) then
  for _, uid in ipairs(redis.call('HKEYS', KEYS[1])) do
    redis.call('ZADD', KEYS[2], 'NX', 0, uid)
  end
end
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], ARGV[i + 2], ARGV[i])
end
local evicted = 0
local excess = redis.call('HLEN', KEYS[1]) - cap
while excess > 0 do
  local oldest = redis.call('ZPOPMIN', KEYS[2], excess)
  if #oldest == 0 then break end
  for j = 1, #oldest, 2 do
    evicted = evicted + redis.call('HDEL', KEYS[1], oldest[j])
  end
  excess = redis.call('HLEN', KEYS[1]) - cap
end
return evicted
"""
# KEYS: the hash. ARGV: uid, entry. Replaces an entry only if it is still there (the sweep's
# "nudged" mark must not bring back an entry evicted or forgotten meanwhile).
_UPDATE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
"""


def _entry_bytes(entry: dict[str, Any]) -> bytes:
    """The stored form: only the known fields."""
    return orjson.dumps(
        {field: entry[field] for field in (*_LIMITS, "at", "nudged") if field in entry}
    )


def rejections_record(client, *, cluster: str, rejections: list[dict[str, Any]]) -> Recorded:
    """Called by extender processes (background thread): remember pods rejected everywhere.

    Invalid entries are skipped. The hash keeps the newest MAX_ENTRIES rejections: past that
    the oldest are evicted (the sweep forgets entries after MAX_AGE_SECONDS anyway)."""
    valid: dict[str, tuple[bytes, float]] = {}
    for r in rejections:
        if _valid(r):
            data = _entry_bytes(r)
            if len(data) <= MAX_ENTRY_BYTES:
                valid[r["uid"]] = (data, float(r["at"]))
    if not valid:
        return Recorded(0, 0)
    keys = [requeue_key(cluster), _order_key(cluster)]
    record = client.register_script(_RECORD)
    items = list(valid.items())
    evicted = 0
    for start in range(0, len(items), BATCH):
        args: list[Any] = [MAX_ENTRIES]
        for uid, (data, at) in items[start : start + BATCH]:
            args += [uid, data, repr(at)]
        evicted += int(record(keys=keys, args=args))
    if evicted:
        log.warning(
            "requeue hash %s is full (%d pods): evicted the %d oldest",
            keys[0],
            MAX_ENTRIES,
            evicted,
        )
    return Recorded(len(valid), evicted)


def _forget(client, cluster: str, uids: list) -> None:
    """Removes entries from the hash and the order set together."""
    if uids:
        pipe = client.pipeline(transaction=True)
        pipe.hdel(requeue_key(cluster), *uids)
        pipe.zrem(_order_key(cluster), *uids)
        pipe.execute()


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
    _forget(client, cluster, stale)
    return len(stale)


def _judging_entry(entry: dict[str, Any] | None, pod) -> dict[str, Any] | None:
    """The entry of the version that judges `pod`: a canary's for the pods of its share (issue
    25), so a pod the canary rejects is nudged only once the canary is gone or would admit it."""
    canary = (entry or {}).get("canary")
    if pod is None or not isinstance(canary, dict):
        return entry
    try:
        split = Split.of(canary.get("share") or {})
    except (KeyError, TypeError, ValueError):
        return entry  # the extender does not serve this canary either
    return canary if split.canary(pod["uid"], pod["namespace"], pod["labels"]) else entry


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
    update = client.register_script(_UPDATE)
    for uid_bytes, data in raw.items():
        uid = uid_bytes.decode()
        entry = orjson.loads(data)
        pod = state.pod(uid)
        policy_entry = _judging_entry(policies.get(entry["policy"]), pod)
        gone = pod is None or bool(pod["nodeName"])
        compiled = _compiled_or_none(policy_entry)
        if gone or compiled is None or now - entry["at"] > MAX_AGE_SECONDS:
            _forget(client, cluster, [uid])  # bound, gone, policy withdrawn or unservable, old
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
        update(keys=[key], args=[uid, _entry_bytes({**entry, "nudged": now})])
        counts["requeued"] += 1
    return counts
