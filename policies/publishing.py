"""Publishing: from the database's active versions to what extenders read in Redis, and back:
which extender processes serve them.

    schedweb:policies:active      hash    policy name -> JSON {name, version, document,
                                          contentHash, schedulerNames, activatedAt, shadow?}
                                          (shadow: its shadow version, issue 25)
                                          canary?: its canary version and share
    schedweb:policies:counter     int     bumped on every change; readers reload only when it
                                          moved (seeded from the clock: it never repeats after
                                          a flush)
    schedweb:extenders:changes    stream  one entry per change of the active set (field `what`),
                                          MAXLEN ~ 1000: every extender process blocks on it
                                          (XREAD), so a change is pushed, not polled for
    schedweb:extenders:served     hash    extender process ("host:pid") -> JSON {process, host,
                                          pid, role, counter, policies, snapshotVersion, at,
                                          since}: what it serves, rewritten on every reload and
                                          as a heartbeat (`at`) every half second
    schedweb:extenders:confirms   stream  process + counter, one entry per reload, MAXLEN ~ 10 000:
                                          what a publisher blocks on while it waits

The database is the source of truth. After every publish, rollback or deactivation commits, the
web process rewrites the hash itself and queues the distribution task, which rewrites it again
(and beat runs it every minute, which repairs a Redis that was flushed). Extenders compile the
documents themselves when told of a change (a few ms per policy) and confirm the counter they
now serve; the web process returns once every live extender process (one that reported within
SCHEDWEB_EXTENDER_LIVE_SECONDS) serves the new counter, or after
SCHEDWEB_PUBLISH_CONFIRM_SECONDS, saying which have not confirmed (`served_wait`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db import connection, transaction

from policies.background import DISTRIBUTE_ACTIVE_POLICIES, QUEUE_CLASSES_ENSURE, task_queue
from policies.models import PolicyActivation
from policies.redis import redis_client

log = logging.getLogger(__name__)

ACTIVE_KEY = "schedweb:policies:active"
COUNTER_KEY = "schedweb:policies:counter"
CHANGES_KEY = "schedweb:extenders:changes"
SERVED_KEY = "schedweb:extenders:served"
CONFIRMS_KEY = "schedweb:extenders:confirms"
CHANGES_MAXLEN = 1_000
CONFIRMS_MAXLEN = 10_000
_WAIT_SLICE = 0.5  # seconds one XREAD of the confirmations blocks (the client's timeout is 2 s)
FORGET_AFTER_SECONDS = 3600.0  # a process silent this long is dropped from the served hash


# --- the database side -----------------------------------------------------------------------


def active_policies_entries() -> list[dict[str, Any]]:
    """The active version of every policy, as stored in Redis, with its shadow (issue 25) as
    `shadow`: {version, document, contentHash, schedulerNames}, when it has one in force, and
    its canary as `canary`: the same and `share` ({percent} or {selector})."""
    activations = (
        PolicyActivation.objects.filter(active=True)
        .select_related("policy", "version")
        .order_by("policy__name", "role")
    )
    entries: dict[int, dict[str, Any]] = {}
    shadows: dict[int, dict[str, Any]] = {}
    canaries: dict[int, dict[str, Any]] = {}
    for a in activations:
        version = {
            "version": a.version.number,
            "document": a.version.document,
            "contentHash": a.version.content_hash,
            "schedulerNames": a.version.scheduler_names,
        }
        if a.role == PolicyActivation.Role.SHADOW:
            shadows[a.policy_id] = version
        elif a.role == PolicyActivation.Role.CANARY:
            rollout = a.rollout or {}
            canaries[a.policy_id] = {
                **version,
                "share": rollout.get("share") or {},
                "guard": rollout.get("guard") or {},
            }
        elif a.role == PolicyActivation.Role.ACTIVE:
            entries[a.policy_id] = {
                "name": a.policy.name,
                **version,
                "activatedAt": a.activated_at.isoformat(),
            }
    for policy_id, shadow in shadows.items():
        if policy_id in entries:  # a shadow is judged only beside its active version
            entries[policy_id]["shadow"] = shadow
    for policy_id, canary in canaries.items():
        if policy_id in entries:  # the active version is the canary's stable version
            entries[policy_id]["canary"] = canary
    return list(entries.values())


def publishing_lock() -> None:
    """Serialises publish/rollback/deactivate across policies (the schedulerName check) and
    every write of the active set to Redis (`active_policies_publish`), in the current
    transaction.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: transactions are IMMEDIATE
    (settings), so the first write lock already serialises them."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [0x5C4ED])


def active_policies_publish() -> int:
    """Rewrites Redis from the database; returns the new counter.

    Read and written under the publishing lock: a distribution that read the database before a
    publish committed has written Redis before that publish's own write, never after it (the
    task of an earlier publish, running late, once put the version it read back over a
    rollback: pods created after the rollback returned were judged by the old version)."""
    with transaction.atomic():
        publishing_lock()
        return active_entries_write(active_policies_entries())


@dataclass
class Distribution:
    """One distribution of the active set after a publish, rollback or deactivation commits:
    called by `transaction.on_commit`; `counter` is the new counter, None until it ran or when
    Redis failed.

    The web process writes Redis itself (one pipeline), so a new version serves as soon as the
    extenders are told, even while no worker is connected (a worker reconnects to a restarted
    Redis with kombu's backoff of up to 30 s). The task is queued anyway: it retries with backoff
    when Redis could not be written just now, and rewrites the set from the database after two
    concurrent publishes wrote out of order. If the broker is down too, beat repairs within a
    minute."""

    ran: bool = False
    counter: int | None = None
    error: str = ""

    def __call__(self) -> None:
        self.ran = True
        try:
            self.counter = active_policies_publish()
        except Exception as exc:
            self.error = f"Redis could not be written ({_short(exc)})"
            log.warning("could not write the active policies to Redis now (%s); the task will", exc)
        try:
            task_queue(DISTRIBUTE_ACTIVE_POLICIES)
            task_queue(QUEUE_CLASSES_ENSURE)  # a new queue: range needs its PriorityClasses
        except Exception as exc:  # the broker is Redis: down means the extenders keep the last set
            log.warning(
                "could not queue policy distribution (%s); the periodic run will repair it", exc
            )

    def served(self, *, timeout: float | None = None) -> ServedReport:
        """Waits until every live extender process serves what was written (see served_wait)."""
        if not self.ran:
            return ServedReport(
                counter=None,
                error="not distributed yet: it is written to Redis when the transaction commits",
            )
        if self.counter is None:
            return ServedReport(
                counter=None,
                error=f"not distributed: {self.error}; the periodic distribution retries it",
            )
        return served_wait(self.counter, timeout=timeout)


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
    # Tells every extender process (blocked on this stream) to reload now.
    pipe.xadd(CHANGES_KEY, {"what": "policies"}, maxlen=CHANGES_MAXLEN, approximate=True)
    return int(pipe.execute()[-2])


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


# --- what extender processes serve ------------------------------------------------------------


@dataclass(frozen=True)
class ServedReport:
    """Which live extender processes serve a change (a counter of the active set or later).

    `confirmed`: the processes that do; `pending`: those that had not confirmed when the wait
    ended, each {process, role, counter, policies, seenSecondsAgo}. `counter` is None when the
    change was not written to Redis (`error` says why)."""

    counter: int | None
    confirmed: tuple[str, ...] = ()
    pending: tuple[dict[str, Any], ...] = ()
    waited_seconds: float = 0.0
    timeout_seconds: float = 0.0
    error: str = ""
    live_seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def served_by_all(self) -> bool:
        return self.counter is not None and not self.pending

    def to_dict(self) -> dict[str, Any]:
        """The REST answer's `served` object."""
        return {
            "servedByAll": self.served_by_all,
            "counter": self.counter,
            "processes": len(self.confirmed) + len(self.pending),
            "confirmed": list(self.confirmed),
            "notConfirmed": [dict(p) for p in self.pending],
            "waitedSeconds": round(self.waited_seconds, 3),
            "summary": self.summary(),
            "error": self.error,
        }

    def summary(self) -> str:
        """One sentence for the page and the CLI."""
        if self.counter is None:
            return self.error
        total = len(self.confirmed) + len(self.pending)
        if total == 0:
            return (
                "no extender process has reported in the last "
                f"{self.live_seconds:g} s: none serves it yet (each one loads it when it starts)"
            )
        processes = f"{total} extender process{'es' if total != 1 else ''}"
        if not self.pending:
            return (
                f"served by all {processes} (confirmed in {self.waited_seconds * 1000:.0f} ms)"
                if total > 1
                else f"served by the {processes} (confirmed in {self.waited_seconds * 1000:.0f} ms)"
            )
        names = ", ".join(_pending_words(p) for p in self.pending)
        return (
            f"not confirmed within {self.timeout_seconds:g} s by {len(self.pending)} of "
            f"{processes}: {names}"
        )


def _pending_words(record: dict[str, Any]) -> str:
    serves = ", ".join(sorted(set(record.get("policies", {}).values()))) or "no policy"
    return (
        f"{record['process']} ({record.get('role') or 'extender'}, serves {serves}, "
        f"last seen {record.get('seenSecondsAgo', 0):.1f} s ago)"
    )


def served_record(client, record: dict[str, Any], *, confirm: bool) -> None:
    """An extender process's record of what it serves (its heartbeat); with `confirm`, also
    the confirmation a publisher waits for (after a reload)."""
    pipe = client.pipeline(transaction=False)
    pipe.hset(SERVED_KEY, record["process"], orjson.dumps(record))
    if confirm:
        pipe.xadd(
            CONFIRMS_KEY,
            {"process": record["process"], "counter": record["counter"]},
            maxlen=CONFIRMS_MAXLEN,
            approximate=True,
        )
    pipe.execute()


def served_forget(client, process: str) -> None:
    """An extender process that stops takes itself out of the served hash."""
    client.hdel(SERVED_KEY, process)


def served_read(client=None, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every extender process's record, with `seenSecondsAgo` (records long silent are dropped)."""
    client = client or redis_client()
    now = time.time() if now is None else now
    records, gone = [], []
    for process, raw in client.hgetall(SERVED_KEY).items():
        try:
            record = orjson.loads(raw)
            seen = now - float(record["at"])
            record["counter"] = int(record["counter"])
        except (ValueError, TypeError, KeyError, orjson.JSONDecodeError):
            gone.append(process)
            continue
        if seen > FORGET_AFTER_SECONDS:
            gone.append(process)
            continue
        record["seenSecondsAgo"] = round(max(0.0, seen), 3)
        records.append(record)
    if gone:
        client.hdel(SERVED_KEY, *gone)
    return sorted(records, key=lambda r: r.get("process", ""))


def served_wait(
    counter: int,
    *,
    timeout: float | None = None,
    live_seconds: float | None = None,
    client=None,
    clock: Callable[[], float] = time.monotonic,
) -> ServedReport:
    """Blocks until every live extender process serves `counter` (or a later one), at most
    `timeout` seconds (SCHEDWEB_PUBLISH_CONFIRM_SECONDS). A process is live when it reported
    within `live_seconds` (SCHEDWEB_EXTENDER_LIVE_SECONDS). Wakes on each confirmation (a
    blocking XREAD of the confirmations stream, from its last entry before the first look, so
    none is missed), never polls. Redis failing meanwhile ends the wait with what is known."""
    from django.conf import settings

    if timeout is None:
        timeout = settings.SCHEDWEB_PUBLISH_CONFIRM_SECONDS
    if live_seconds is None:
        live_seconds = settings.SCHEDWEB_EXTENDER_LIVE_SECONDS
    client = client or redis_client()
    started = clock()
    deadline = started + timeout
    confirmed: list[str] = []
    pending: list[dict[str, Any]] = []
    error = ""
    try:
        last = _last_id(client, CONFIRMS_KEY)
        while True:
            live = [r for r in served_read(client) if r["seenSecondsAgo"] <= live_seconds]
            confirmed = [r["process"] for r in live if r["counter"] >= counter]
            pending = [_pending(r) for r in live if r["counter"] < counter]
            remaining = deadline - clock()
            if not pending or remaining <= 0:
                break
            block = max(1, int(min(remaining, _WAIT_SLICE) * 1000))
            for _key, entries in client.xread({CONFIRMS_KEY: last}, count=1000, block=block) or ():
                if entries:
                    last = entries[-1][0]
    except Exception as exc:  # Redis went away: say what is known
        log.warning("could not follow the extenders' confirmations: %s", exc)
        error = f"Redis could not be read while waiting ({_short(exc)})"
    return ServedReport(
        counter=counter,
        confirmed=tuple(confirmed),
        pending=tuple(pending),
        waited_seconds=clock() - started,
        timeout_seconds=timeout,
        error=error,
        live_seconds=live_seconds,
    )


def _pending(record: dict[str, Any]) -> dict[str, Any]:
    keep = ("process", "role", "counter", "policies", "seenSecondsAgo")
    return {k: record[k] for k in keep if k in record}


def _last_id(client, key: str) -> bytes | str:
    """The id of the stream's last entry ("0-0" when it is empty or absent)."""
    last = client.xrevrange(key, count=1)
    return last[0][0] if last else "0-0"


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
