"""The extender's process-wide state and the background thread that keeps it current.

Each extender process holds the active policy versions (compiled) and the cluster snapshot in
memory. A daemon thread blocks on Redis (one XREAD over two streams: publishing's changes stream
and the snapshot's events, policies/publishing.py and policies/cluster/store.py; read by policies/cluster/reader.py), so a publish
or a watch event is pushed to every process and applied within milliseconds, whatever the
cluster's size, instead of being noticed at the next poll (issue 24: every 100 ms, and pods
created right after a publish were judged by the old version). The snapshot's deltas are applied
in place under the reader's serve lock (policies/cluster/reader.py, `in_place`): no copy of the
cluster per change. After each policy reload the process confirms what it serves
(publishing.served_record: publishers wait for it); every half second the same thread writes
that record as a heartbeat, checks the snapshot's status (a full refresh: one round trip), the
queue classes, writes this process's metrics file, and flushes the dashboard's per-minute
metrics and sampled decisions. Requests only read references the thread swaps in, or the
in-place snapshot under the serve lock, so a slow or dead Redis never delays an answer: the
extender keeps serving the last versions it holds.

A large body is answered in a child forked from the listener for it (policies/extender/offload.py):
it shares this runtime page by page (policies/extender/fork.py). The shadow lane's
process brings its snapshot up to date when it judges (`snapshot_on_demand`) instead of applying
every change of the cluster as it happens, which cost a process about 0.4 ms of CPU per
scheduled pod (a pod's binding is a snapshot change) on a machine whose cores kube-scheduler
needs.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from django.conf import settings

from policies.background import DECISIONS_RECORD, task_queue

from .catch_up import CatchUp
from .decisions import DecisionBuffer, Rate, decisions_queue
from .metrics import Metrics
from .registry import PolicyRegistry
from .service import Extender

log = logging.getLogger(__name__)

HOUSEKEEPING_SECONDS = 0.5  # heartbeat, snapshot status, queue classes
BLOCK_SECONDS = 0.5  # the longest XREAD block (Redis's socket timeout is 2 s)
METRICS_FLUSH_SECONDS = 1.0
DECISIONS_FLUSH_SECONDS = 2.0
RETRY_SECONDS = 0.5  # after Redis failed, before the next blocking read
# The shortest time between two wakes with entries: a busy cluster's events are taken in
# batches (a wake costs 0.12-0.18 ms of CPU in XREAD alone, measured with a 500-node snapshot
# on 2 loaded cores, plus 0.13-0.17 ms to apply one pod and publish it), at most 10 ms later
# than one at a time would have; a lone event is taken at once.
WAKE_GAP_SECONDS = 0.01
XREAD_COUNT = 2_000  # stream entries taken per read


def tasks_import() -> None:
    """Has Celery import the task modules now, at the process's start. Its first lookup of a
    task does (policies/background.py, registered_task), and that runs Django's system checks:
    365 ms of CPU here, mostly holding the GIL, which the first decisions flush spent while
    kube-scheduler's first calls waited."""
    from policies.background import registered_task

    try:
        registered_task(DECISIONS_RECORD)
    except Exception:  # the flush looks the task up again (and logs what fails then)
        log.exception("extender start: Celery's task modules could not be imported")


class ExtenderRuntime:
    """Everything one process needs to answer kube-scheduler. With `on_demand`, the background
    thread leaves the snapshot alone and `snapshot_refresh()` is called before each answer.
    `role` ("listener"): an extender process that reports what it serves (publishers
    wait for it); None (a web process's /readyz, tests) reports nothing."""

    def __init__(self, *, on_demand: bool = False, role: str | None = None) -> None:
        from policies.redis import redis_client

        self.pid = os.getpid()
        self.process = f"{socket.gethostname()}:{self.pid}"
        self.role = role
        self.on_demand = on_demand
        self.redis = redis_client()
        self.metrics = Metrics(directory=settings.SCHEDWEB_METRICS_DIR)
        self.decisions = DecisionBuffer(per_second=settings.SCHEDWEB_DECISIONS_PER_SECOND)
        self.rejections: deque[dict[str, Any]] = deque(maxlen=10_000)
        self.registry = PolicyRegistry()
        live = settings.SCHEDWEB_CLUSTER_SOURCE == "live"
        self.catch_up = CatchUp(
            seconds=settings.SCHEDWEB_EXTENDER_CATCH_UP_MS / 1000 if not on_demand else 0,
            live=lambda: live,
            observe=self.metrics.catch_up,
        )
        self.snapshots = snapshot_provider(on_change=self._snapshot_moved, on_demand=on_demand)
        self._asked_at = time.monotonic()  # the last snapshot_refresh() (on demand: a body)
        self._full_loads = 0  # the reader's full loads when the heap was last trimmed
        # Requests hold it while they read the snapshot: an in-place one changes under it.
        self.serve_lock: threading.Lock = getattr(self.snapshots, "serve_lock", threading.Lock())
        self.redis_ok = True
        self.last_error = ""
        self.started_at = time.time()
        # key ranges whose queue PriorityClasses exist (policies/queue_classes.py)
        self.class_ranges: tuple[tuple[int, int], ...] = ()
        self.gang_mode = ""  # workload | hold, as the worker detected (policies/gangs.py)
        self._changes_from: bytes | str = "0-0"  # the changes stream's last entry seen
        self._initial_load()
        tasks_import()
        self.extender = Extender(
            policies=lambda: self.registry.by_scheduler,
            snapshot=self.snapshots.current,
            metrics=self.metrics,
            record=self.decisions.append,
            sample=self.decisions.wanted,
            binder=binder(),
            rejected=self.rejections.append,
            catch_up=self.catch_up,
            shadow_details=Rate(per_second=settings.SCHEDWEB_SHADOW_DETAILS_PER_SECOND).wanted,
            shadow_listed=Rate(per_second=settings.SCHEDWEB_SHADOW_RECORDS_PER_SECOND).wanted,
        )
        self._report(confirm=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="schedweb-extender-refresh", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stops the background thread (tests, the listener's shutdown) and takes this process
        out of the served records."""
        self._stop.set()
        self._thread.join(2)
        if self.role is not None:
            from policies.publishing import served_forget

            with contextlib.suppress(Exception):
                served_forget(self.redis, self.process)

    def _initial_load(self) -> None:
        """Policies from Redis; from the database when Redis is down or holds none yet."""
        from policies.publishing import CHANGES_KEY

        problem = "Redis holds no published set"
        try:
            # The changes stream's position first: a publish after it is pushed to the thread.
            last = self.redis.xrevrange(CHANGES_KEY, count=1)
            self._changes_from = last[0][0] if last else "0-0"
            if self.registry.refresh_from_redis():
                problem = ""
        except Exception as exc:
            self.redis_ok, self.last_error = False, f"redis: {exc}"
            problem = str(exc)
        if problem:
            try:
                self.registry.load_from_database()
            except Exception as db_exc:  # nothing to serve: pods pass through until Redis has a set
                log.error("extender start: no policies (%s; database: %s)", problem, db_exc)
        self.snapshot_refresh()
        self._refresh_classes()

    def _refresh_classes(self) -> None:
        """The queue classes' ranges and the gang mode the worker recorded: one MGET."""
        from policies.gangs import MODE_KEY
        from policies.queue_classes import CLASSES_KEY, queue_classes_parse

        with contextlib.suppress(Exception):  # Redis down: keep the ranges and mode we hold
            classes, mode = self.redis.mget(CLASSES_KEY, MODE_KEY)
            self.class_ranges = queue_classes_parse(classes)
            self.gang_mode = orjson.loads(mode).get("mode", "") if mode else ""

    def class_ready(self, value: int) -> bool:
        """The PriorityClass of queue key `value` exists (as the worker last reported)."""
        return any(low <= value <= high for low, high in self.class_ranges)

    def namespace_labels(self, namespace: str):
        """A namespace's labels from the snapshot (None when the snapshot has no such one)."""
        snapshot = self.snapshots.current()
        if snapshot is None:
            return None
        return snapshot.state.namespaces().get(namespace)

    # -- the background thread ---------------------------------------------------------------

    def _run(self) -> None:
        from policies.publishing import CHANGES_KEY

        now = time.monotonic()
        next_housekeeping = now + HOUSEKEEPING_SECONDS
        last_metrics = last_decisions = now
        while not self._stop.is_set():
            streams: dict[str, Any] = {CHANGES_KEY: self._changes_from}
            events = self._events_key()
            follow_from = self.snapshots.follow_from() if events else None
            if follow_from is not None:
                streams[events] = follow_from
            block = max(1, int(min(BLOCK_SECONDS, next_housekeeping - time.monotonic()) * 1000))
            try:
                pushed = self.redis.xread(streams, count=XREAD_COUNT, block=block) or []
                self.redis_ok = True
            except Exception as exc:  # Redis down: keep serving, try again shortly
                self.redis_ok, self.last_error = False, f"redis: {exc}"
                pushed = []
                self._stop.wait(RETRY_SECONDS)
            woke = time.monotonic()
            for key, entries in pushed:
                if not entries:
                    continue
                if _text(key) == CHANGES_KEY:
                    self._changes_from = entries[-1][0]
                    self._policies_changed()
                elif not self.on_demand:
                    self._follow(entries)
            if self.rejections:
                self._flush_rejections()
            if self.extender.canary_counts:
                self.canary_flush()
            if pushed and (gap := WAKE_GAP_SECONDS - (time.monotonic() - woke)) > 0:
                self._stop.wait(gap)
            now = time.monotonic()
            if now < next_housekeeping:
                continue
            next_housekeeping = now + HOUSEKEEPING_SECONDS
            self._housekeeping()
            if now - last_metrics >= METRICS_FLUSH_SECONDS:
                last_metrics = now
                try:
                    self.metrics.write(gauges=self.gauges())  # /metrics: the listener's sum
                except OSError as exc:
                    self.last_error = f"metrics file: {exc}"
                with contextlib.suppress(Exception):  # the deltas are kept for the next flush
                    self.metrics.flush(self.redis)
            if now - last_decisions >= DECISIONS_FLUSH_SECONDS:
                last_decisions = now
                self._flush_decisions()

    def _events_key(self) -> str | None:
        """The snapshot's events stream this thread follows (a live source, not on demand)."""
        reader = getattr(self.snapshots, "reader", None)
        if reader is None or self.on_demand:
            return None
        return reader.store.keys.events

    def _policies_changed(self) -> None:
        """A change was pushed: reload the active set, and confirm what is served now."""
        try:
            changed = self.registry.refresh_from_redis()
            self.redis_ok = True
        except Exception as exc:
            self.redis_ok, self.last_error = False, f"redis: {exc}"
            return
        self._refresh_classes()
        if changed:
            self._report(confirm=True)

    def _follow(self, entries: list) -> None:
        """Snapshot deltas pushed by the XREAD: applied now (a gap or a reset reloads)."""
        if self.snapshots.follow(entries):
            gc.freeze()  # see snapshot_refresh

    def _housekeeping(self) -> None:
        """Every half second: what no push announces (the snapshot's status and a Redis that
        lost it, a publish missed while Redis was away, the queue classes), and the heartbeat."""
        try:
            changed = self.registry.refresh_from_redis()
            self.redis_ok = True
        except Exception as exc:
            self.redis_ok, self.last_error = False, f"redis: {exc}"
            changed = False
        if self.redis_ok:  # a Redis that is down costs its retries once per round, not thrice
            self._refresh_classes()
        if not self.on_demand:
            self.snapshot_refresh()
        self._memory_release()
        self._report(confirm=changed)

    def _memory_release(self) -> None:
        """After a full load (the old state dropped since), the heap's free pages go back to the
        system; an on-demand process (the shadow lane) idle for
        SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS lets go of its snapshot first (its next body loads
        it whole)."""
        reader = getattr(self.snapshots, "reader", None)
        if reader is None:
            return
        idle = settings.SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS
        # idleness asked again under the reader's lock: a body's refresh may have come meanwhile
        if (
            self.on_demand
            and idle
            and self._idle_for() > idle
            and reader.release(when=lambda: self._idle_for() > idle)
        ):
            # What the freezes since the last load kept from the collector (the cycles among
            # them too: frozen, they are never collected) is collected now, with no snapshot
            # held the collection is short, and nobody waits for an idle process.
            gc.unfreeze()
            gc.collect()
            self._full_loads = -1
        if reader.full_loads != self._full_loads:
            self._full_loads = reader.full_loads
            heap_trim()

    def _report(self, *, confirm: bool) -> None:
        """This process's record of what it serves (publishing.served_record); with `confirm`,
        the confirmation publishers wait for. Only for extender processes (a role)."""
        if self.role is None:
            return
        from policies.publishing import served_record

        snapshot = self.snapshots.current()
        record = {
            "process": self.process,
            "host": socket.gethostname(),
            "pid": self.pid,
            "role": self.role,
            "counter": self.registry.counter or 0,
            "policies": {
                name: served.label for name, served in sorted(self.registry.by_scheduler.items())
            },
            "shadows": self.registry.shadows(),
            "canaries": self.registry.canaries(),
            "snapshotVersion": snapshot.version if snapshot is not None else None,
            "at": time.time(),
            "since": self.started_at,
        }
        try:
            served_record(self.redis, record, confirm=confirm)
        except Exception as exc:
            self.redis_ok, self.last_error = False, f"redis: {exc}"

    def _snapshot_moved(self, version: int) -> None:
        """From the reader, after it applied changes: wakes the requests waiting for them."""
        catch_up = getattr(self, "catch_up", None)
        if catch_up is not None:
            catch_up.moved(version)

    def _snapshot_mark(self) -> tuple:
        """What tells the snapshot held apart from the next one (its version and the reader's
        full loads), without holding it."""
        current = self.snapshots.current()
        reader = getattr(self.snapshots, "reader", None)
        return (
            None if current is None else current.version,
            getattr(reader, "full_loads", None),
            current is None,
        )

    def _idle_for(self) -> float:
        return time.monotonic() - self._asked_at

    def snapshot_refresh(self) -> None:
        """The snapshot brought up to date (one Redis round trip when nothing changed)."""
        self._asked_at = time.monotonic()
        before = self._snapshot_mark()  # not the snapshot: a full load may let go of it
        try:
            self.snapshots.refresh()
        except Exception as exc:
            self.last_error = f"snapshot: {exc}"
        if self._snapshot_mark() != before:
            # The snapshot is long-lived: move it out of the cyclic collector's reach so that
            # no full collection (tens of ms over a big cluster) lands in a request. Objects
            # are still freed by reference counting when a later snapshot replaces them.
            gc.freeze()

    def canary_flush(self) -> None:
        """The canary counts to Redis and the guard on the totals (policies/extender/canary.py):
        a canary that trips stops judging here at once, and the first process to see it queues
        the rollback."""
        from policies.background import CANARY_GUARD
        from policies.rollout.guard import trip_claim

        try:
            trips = self.extender.canary_counts.flush(self.redis)
        except Exception as exc:  # kept for the next flush
            self.redis_ok, self.last_error = False, f"redis: {exc}"
            return
        for name, version, why in trips:
            self.registry.trip(name, version)
            self.metrics.count("canary_guard_trips", name)
            log.warning("canary %s/v%s tripped its guard: %s", name, version, why["reason"])
            try:
                if trip_claim(self.redis, name, version, why):
                    task_queue(CANARY_GUARD, name, version)
            except Exception as exc:  # the worker's periodic check rolls it back anyway
                log.error("canary %s/v%s: cannot queue the rollback (%s)", name, version, exc)

    def policies_refresh(self) -> None:
        """The active policies as Redis has them now (one round trip when nothing changed): a
        forked child's before its body, whose listener may not have read a publish yet."""
        try:
            self.registry.refresh_from_redis()
        except Exception as exc:  # Redis down: answer with what the listener held
            self.redis_ok, self.last_error = False, f"redis: {exc}"

    def _flush_rejections(self) -> None:
        from policies.extender.requeue import rejections_record

        batch = []
        while self.rejections:
            batch.append(self.rejections.popleft())
        try:
            recorded = rejections_record(
                self.redis, cluster=settings.SCHEDWEB_CLUSTER_NAME, rejections=batch
            )
            if recorded.evicted:
                self.metrics.count("requeue_evicted", value=recorded.evicted)
        except Exception as exc:
            # Dropped, not put back: a batch that fails for its content would otherwise block
            # every later one. A requeue nudge is an optimisation; kube-scheduler retries the
            # pods within five minutes anyway (policies/extender/requeue.py).
            log.warning("dropped %d rejected pods: cannot record them (%s)", len(batch), exc)

    def _flush_decisions(self) -> None:
        batch = self.decisions.take() + self.extender.shadows.tallies.take()
        if not batch:
            return
        try:
            decisions_queue(batch)
        except Exception as exc:
            log.warning("dropped %d sampled decisions: cannot queue them (%s)", len(batch), exc)

    # -- what this process serves, for /readyz and /metrics ------------------------------------

    def served(self) -> dict[str, Any]:
        """The policy set served: its counter, since when, and the versions by schedulerName."""
        installed = self.registry.installed_at
        return {
            "counter": self.registry.counter,
            "installedAt": installed,
            "ageSeconds": _age(installed),
            "process": self.process,
            "role": self.role,
        }

    def snapshot_status(self) -> dict[str, Any] | None:
        """The snapshot held: version, source, staleness, and when its version was written by
        the watcher and applied here (`lagSeconds`: the one from the other, for the last
        change applied)."""
        snapshot = self.snapshots.current()
        if snapshot is None:
            return None
        reader = getattr(self.snapshots, "reader", None)
        status: dict[str, Any] = {
            "source": snapshot.source,
            "version": snapshot.version,
            "stale": snapshot.stale,
        }
        if reader is not None:
            head = reader.meta.get("version")
            status.update(
                headVersion=int(head) if head and head.isdigit() else None,
                writtenAt=reader.written_at,
                ageSeconds=_age(reader.written_at),
                appliedAt=reader.applied_at,
                lagSeconds=_round(reader.lag_seconds),
                followed="on demand" if self.on_demand else "pushed",
            )
        return status

    def gauges(self) -> dict[str, float]:
        """This process's served counter and snapshot version with their ages (/metrics)."""
        served, snapshot = self.served(), self.snapshot_status() or {}
        values = {
            "policies_counter": served["counter"],
            "policies_age_seconds": served["ageSeconds"],
            "snapshot_version": snapshot.get("version"),
            "snapshot_version_age_seconds": snapshot.get("ageSeconds"),
            "snapshot_lag_seconds": snapshot.get("lagSeconds"),
        }
        return {k: float(v) for k, v in values.items() if v is not None}

    def health(self) -> dict[str, Any]:
        return {
            # which worker answered: a listener runs several behind one port, and a caller that
            # must know each of them serves a version (the end-to-end tests) tells them apart
            "pid": self.pid,
            "policies": {
                name: served.label for name, served in sorted(self.registry.by_scheduler.items())
            },
            "shadows": self.registry.shadows(),
            "canaries": self.registry.canaries(),
            "policiesFrom": self.registry.loaded_from,
            "served": self.served(),
            "redis": "ok" if self.redis_ok else "down",
            "snapshot": self.snapshot_status(),
            "catchUp": {
                "limitMs": round(self.catch_up.seconds * 1000),
                "waiting": self.catch_up.waiting,
            },
            "lastError": self.last_error,
        }


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _age(since: float | None) -> float | None:
    return None if since is None else round(max(0.0, time.time() - since), 3)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class _StaticSnapshots:
    """demo and file sources: loaded once per process."""

    def __init__(self) -> None:
        from policies.cluster.sources import cluster_default

        self._snapshot = cluster_default()

    def refresh(self) -> None:
        return None

    def follow(self, entries) -> None:
        return None

    def follow_from(self) -> None:
        return None

    def current(self):
        return self._snapshot


def snapshot_provider(*, on_change: Callable[[int], None] | None = None, on_demand: bool = False):
    """The snapshot source for extender processes: the live reader (pushed, changed in place),
    or a static one. On demand (the shadow lane, whose judgements wait for its refresh), a full
    load lets go of the old state first: the process never holds two."""
    if settings.SCHEDWEB_CLUSTER_SOURCE == "live":
        from policies.cluster.sources import live_snapshots

        # lean: bound pods' raw objects are never read here (policies/cluster/compact.py)
        return live_snapshots(
            in_place=True, on_change=on_change, lean=True, drop_before_load=on_demand
        )
    return _StaticSnapshots()


def heap_trim() -> None:
    """Hands the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere).
    A full load's parse and the state it replaced leave pages free but held (about 20 MB of a
    listener's after a reload at 5000 nodes and 50 000 pods). It takes a few ms (14 at most
    over that heap, measured on a loaded machine), once per full load."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim: Any = None


def binder():
    """Creates pods/binding through the Kubernetes API: only when SCHEDWEB_EXTENDER_BIND is on
    (and the source is live). The client is created and configured here, with the runtime,
    which the extender listener builds at its start (schedweb/asgi.py), not on the first bind."""
    if not settings.SCHEDWEB_EXTENDER_BIND or settings.SCHEDWEB_CLUSTER_SOURCE != "live":
        return None
    from policies.cluster.live import bind_pod, binder_client

    binder_client()
    return bind_pod


_runtime: ExtenderRuntime | None = None
_lock = threading.Lock()
_on_demand = False
_role: str | None = None


def snapshot_on_demand() -> None:
    """This process's runtime refreshes its snapshot when asked to (`snapshot_refresh()`), not
    in the background: for the offload pool's processes; called before the runtime is made."""
    global _on_demand
    _on_demand = True


def serve_as(role: str) -> None:
    """This process is an extender process ("listener"): its runtime reports what it
    serves, and publishers wait for it. Called before the runtime is made."""
    global _role
    _role = role


def runtime() -> ExtenderRuntime:
    """The process's runtime, created on first use (and again after a fork)."""
    global _runtime
    current = _runtime
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = ExtenderRuntime(on_demand=_on_demand, role=_role)
        return _runtime


def runtime_stop() -> None:
    """The process stops serving (the listener's shutdown): its runtime's thread ends and it no
    longer reports what it serves; the runtime stays for requests still being answered."""
    current = _runtime
    if current is not None and current.pid == os.getpid():
        current.close()


def reset_runtime() -> None:
    """Drops the process's runtime (tests)."""
    global _runtime
    with _lock:
        if _runtime is not None and _runtime.pid == os.getpid():
            _runtime.close()
        _runtime = None
