"""Published policies in Redis: what extenders serve.

    schedweb:policies:active   hash  policy name -> JSON {name, version, document, contentHash, schedulerNames, activatedAt}
    schedweb:policies:counter  int   bumped on every change; readers reload only when it moved
                                     (seeded from the clock, so it never repeats after a flush)

The database is the source of truth; a Celery task rewrites the hash from it after every
publish, rollback or deactivation (and on a schedule, which repairs a Redis that was flushed).
Extenders compile the documents themselves when the counter moves (a few ms per policy).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from policies.redis import redis_client

ACTIVE_KEY = "schedweb:policies:active"
COUNTER_KEY = "schedweb:policies:counter"


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
