"""Publishing: from the database's active versions to what extenders read in Redis.

    schedweb:policies:active   hash  policy name -> JSON {name, version, document, contentHash, schedulerNames, activatedAt}
    schedweb:policies:counter  int   bumped on every change; readers reload only when it moved
                                     (seeded from the clock, so it never repeats after a flush)

The database is the source of truth. After every publish, rollback or deactivation commits, the
web process rewrites the hash itself and queues the distribution task, which rewrites it again
(and beat runs it every minute, which repairs a Redis that was flushed). Extenders compile the
documents themselves when the counter moves (a few ms per policy).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from policies.background import DISTRIBUTE_ACTIVE_POLICIES, QUEUE_CLASSES_ENSURE, task_queue
from policies.models import PolicyActivation
from policies.redis import redis_client

log = logging.getLogger(__name__)

ACTIVE_KEY = "schedweb:policies:active"
COUNTER_KEY = "schedweb:policies:counter"


# --- the database side -----------------------------------------------------------------------


def active_policies_entries() -> list[dict[str, Any]]:
    """The active version of every policy, as stored in Redis."""
    activations = (
        PolicyActivation.objects.filter(active=True)
        .select_related("policy", "version")
        .order_by("policy__name")
    )
    return [
        {
            "name": a.policy.name,
            "version": a.version.number,
            "document": a.version.document,
            "contentHash": a.version.content_hash,
            "schedulerNames": a.version.scheduler_names,
            "activatedAt": a.activated_at.isoformat(),
        }
        for a in activations
    ]


def active_policies_publish() -> int:
    """Rewrites Redis from the database; returns the new counter."""
    return active_entries_write(active_policies_entries())


def active_policies_after_commit() -> None:
    """After a publish, rollback or deactivation commits: write the active set now, queue the task.

    The web process writes Redis itself (one pipeline), so a new version serves within the
    extenders' poll even while no worker is connected (a worker reconnects to a restarted Redis
    with kombu's backoff of up to 30 s). The task is queued anyway: it retries with backoff when
    Redis could not be written just now, and rewrites the set from the database after two
    concurrent publishes wrote out of order. If the broker is down too, beat repairs within a
    minute.
    """
    try:
        active_policies_publish()
    except Exception as exc:
        log.warning("could not write the active policies to Redis now (%s); the task will", exc)
    try:
        task_queue(DISTRIBUTE_ACTIVE_POLICIES)
        task_queue(QUEUE_CLASSES_ENSURE)  # a new queue: range needs its PriorityClasses
    except Exception as exc:  # the broker is Redis: down means the extenders keep the last set
        log.warning(
            "could not queue policy distribution (%s); the periodic run will repair it", exc
        )


# --- the Redis side --------------------------------------------------------------------------


def active_entries_write(entries: list[dict[str, Any]]) -> int:
    """Replaces the published set atomically; returns the new counter value."""
    client = redis_client()
    pipe = client.pipeline(transaction=True)
    pipe.delete(ACTIVE_KEY)
    if entries:
        pipe.hset(ACTIVE_KEY, mapping={e["name"]: orjson.dumps(e) for e in entries})
    # A Redis restarted empty must not restart the counter at 1: a reader that saw 1 before
    # would take the new set for the one it has. Seeding an absent counter from the clock (in
    # microseconds) keeps it above every value handed out before.
    pipe.set(COUNTER_KEY, time.time_ns() // 1000, nx=True)
    pipe.incr(COUNTER_KEY)
    return int(pipe.execute()[-1])


def active_counter_read() -> int | None:
    """The counter alone: one round trip, for readers checking whether to reload.

    None when the key does not exist: Redis was flushed or restarted empty. Readers then keep
    what they serve until the periodic distribution writes the set again.
    """
    value = redis_client().get(COUNTER_KEY)
    return int(value) if value is not None else None


def active_entries_read() -> tuple[int, dict[str, dict[str, Any]]]:
    """(counter, entries by policy name), read atomically."""
    pipe = redis_client().pipeline(transaction=True)
    pipe.get(COUNTER_KEY)
    pipe.hgetall(ACTIVE_KEY)
    counter, raw = pipe.execute()
    entries = {k.decode(): orjson.loads(v) for k, v in raw.items()}
    return int(counter or 0), entries
