"""The extender's process-wide state and the background thread that keeps it current.

Each web process holds the active policy versions (compiled) and the cluster snapshot in memory.
A daemon thread polls Redis every 100 ms: one GET of the published-policies counter (reloads
only when it moved) and the snapshot reader's refresh; it also writes this process's metrics file,
flushes the dashboard's per-minute metrics and sampled decisions. Requests only read references swapped in by that thread, so a slow or dead Redis
never delays an answer: the extender keeps serving the last versions it holds.

The offload pool's processes (policies/extender/offload.py) answer only the rare large body: they
bring their snapshot up to date when one arrives (`snapshot_on_demand`) instead of applying every
change of the cluster as it happens, which cost each of them about 0.4 ms of CPU per scheduled
pod (a pod's binding is a snapshot change) on a machine whose cores kube-scheduler needs.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from django.conf import settings

from policies.background import DECISIONS_RECORD, task_queue
from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile

from .metrics import Metrics
from .service import Extender, ServedPolicy

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1
METRICS_FLUSH_SECONDS = 1.0
DECISIONS_FLUSH_SECONDS = 2.0


class PolicyRegistry:
    """Active versions by schedulerName, rebuilt when the Redis counter moves."""

    def __init__(self) -> None:
        self.counter: int | None = None
        self.by_scheduler: dict[str, ServedPolicy] = {}
        self.loaded_from = "nothing yet"
        self._compiled: dict[str, Any] = {}  # contentHash -> CompiledPolicy

    def install(self, entries: list[dict[str, Any]], *, source: str) -> None:
        """Compiles what is new (by content hash) and swaps the whole mapping at once."""
        by_scheduler: dict[str, ServedPolicy] = {}
        compiled_cache: dict[str, Any] = {}
        for entry in entries:
            key = entry["contentHash"]
            compiled = self._compiled.get(key)
            if compiled is None:
                try:
                    compiled = policy_compile(entry["document"])
                except PolicyInvalid as exc:
                    log.error(
                        "active policy %s v%s does not compile here: %s",
                        entry["name"],
                        entry["version"],
                        exc,
                    )
                    continue
            compiled_cache[key] = compiled
            served = ServedPolicy(entry["name"], entry["version"], compiled)
            for scheduler_name in compiled.spec.scheduler_names:
                by_scheduler[scheduler_name] = served
        self._compiled = compiled_cache
        self.by_scheduler = by_scheduler  # one reference swap: requests see old or new, never half
        self.loaded_from = source

    def refresh_from_redis(self) -> bool:
        from policies.publishing import active_counter_read, active_entries_read

        counter = active_counter_read()
        if counter is None or counter == self.counter:
            return False  # None: an empty Redis; keep serving what we hold
        counter, entries = active_entries_read()
        self.install(list(entries.values()), source="redis")
        self.counter = counter
        return True

    def load_from_database(self) -> None:
        """Start-up fallback when Redis cannot be read (never on a request)."""
        from policies.publishing import active_policies_entries

        self.install(active_policies_entries(), source="database")


class DecisionBuffer:
    """Sampled decisions waiting to be written by a Celery task, at most `per_second` a second."""

    def __init__(self, *, per_second: float, capacity: int = 2000) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._per_second = per_second
        self._allowance = per_second
        self._last = time.monotonic()

    def wanted(self) -> bool:
        """Whether to record the next decision (a token bucket): asked BEFORE building the record,
        which costs about a millisecond for 500 nodes."""
        now = time.monotonic()
        self._allowance = min(
            self._per_second, self._allowance + (now - self._last) * self._per_second
        )
        self._last = now
        if self._allowance >= 1:
            self._allowance -= 1
            return True
        return False

    def append(self, decision: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        self._items.append(decision)

    def take(self) -> list[dict[str, Any]]:
        """The records so far, oldest first; deferred ones are built here, off the request path."""
        items = []
        while self._items:
            item = self._items.popleft()
            if callable(item):
                try:
                    item = item()
                except Exception:  # a record is a sample: never let one stop the others
                    log.exception("could not build a sampled decision record")
                    continue
            items.append(item)
        return items


class ExtenderRuntime:
    """Everything one process needs to answer kube-scheduler. With `on_demand`, the background
    thread leaves the snapshot alone and `snapshot_refresh()` is called before each answer."""

    def __init__(self, *, on_demand: bool = False) -> None:
        from policies.redis import redis_client

        self.pid = os.getpid()
        self.on_demand = on_demand
        self.redis = redis_client()
        self.metrics = Metrics(directory=settings.SCHEDWEB_METRICS_DIR)
        self.decisions = DecisionBuffer(per_second=settings.SCHEDWEB_DECISIONS_PER_SECOND)
        self.rejections: deque[dict[str, Any]] = deque(maxlen=10_000)
        self.registry = PolicyRegistry()
        self.snapshots = snapshot_provider()
        self.redis_ok = True
        self.last_error = ""
        self.started_at = time.time()
        # key ranges whose queue PriorityClasses exist (policies/queue_classes.py)
        self.class_ranges: tuple[tuple[int, int], ...] = ()
        self.gang_mode = ""  # workload | hold, as the worker detected (policies/gangs.py)
        self._initial_load()
        self.extender = Extender(
            policies=lambda: self.registry.by_scheduler,
            snapshot=self.snapshots.current,
            metrics=self.metrics,
            record=self.decisions.append,
            sample=self.decisions.wanted,
            binder=binder(),
            rejected=self.rejections.append,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="schedweb-extender-refresh", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stops the background thread (tests; processes just exit)."""
        self._stop.set()
        self._thread.join(2)

    def _initial_load(self) -> None:
        """Policies from Redis; from the database when Redis is down or holds none yet."""
        problem = "Redis holds no published set"
        try:
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
        self.snapshots.refresh()
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

    def _run(self) -> None:
        last_metrics = last_decisions = time.monotonic()
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.registry.refresh_from_redis()
                self.redis_ok = True
            except Exception as exc:
                self.redis_ok, self.last_error = False, f"redis: {exc}"
            if self.redis_ok:  # a Redis that is down costs its retries once per loop, not thrice
                self._refresh_classes()
            if not self.on_demand:
                self.snapshot_refresh()
            if self.rejections:
                self._flush_rejections()
            now = time.monotonic()
            if now - last_metrics >= METRICS_FLUSH_SECONDS:
                last_metrics = now
                try:
                    self.metrics.write()  # /metrics: the listener's sum reads it
                except OSError as exc:
                    self.last_error = f"metrics file: {exc}"
                with contextlib.suppress(Exception):  # the deltas are kept for the next flush
                    self.metrics.flush(self.redis)
            if now - last_decisions >= DECISIONS_FLUSH_SECONDS:
                last_decisions = now
                self._flush_decisions()

    def snapshot_refresh(self) -> None:
        """The snapshot brought up to date (one Redis round trip when nothing changed)."""
        before = self.snapshots.current()
        try:
            self.snapshots.refresh()
        except Exception as exc:
            self.last_error = f"snapshot: {exc}"
        if self.snapshots.current() is not before:
            # The snapshot is long-lived: move it out of the cyclic collector's reach so that
            # no full collection (tens of ms over a big cluster) lands in a request. Objects
            # are still freed by reference counting when a later snapshot replaces them.
            gc.freeze()

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
        batch = self.decisions.take()
        if not batch:
            return
        try:
            task_queue(DECISIONS_RECORD, batch)
        except Exception as exc:
            log.warning("dropped %d sampled decisions: cannot queue them (%s)", len(batch), exc)

    def health(self) -> dict[str, Any]:
        snapshot = self.snapshots.current()
        return {
            # which worker answered: a listener runs several behind one port, and a caller that
            # must know each of them serves a version (the end-to-end tests) tells them apart
            "pid": self.pid,
            "policies": {
                name: served.label for name, served in sorted(self.registry.by_scheduler.items())
            },
            "policiesFrom": self.registry.loaded_from,
            "redis": "ok" if self.redis_ok else "down",
            "snapshot": None
            if snapshot is None
            else {"source": snapshot.source, "version": snapshot.version, "stale": snapshot.stale},
            "lastError": self.last_error,
        }


class _StaticSnapshots:
    """demo and file sources: loaded once per process."""

    def __init__(self) -> None:
        from policies.cluster.sources import cluster_default

        self._snapshot = cluster_default()

    def refresh(self) -> None:
        return None

    def current(self):
        return self._snapshot


def snapshot_provider():
    """The snapshot source for extender processes: the live reader, or a static one."""
    if settings.SCHEDWEB_CLUSTER_SOURCE == "live":
        from policies.cluster.sources import live_snapshots

        return live_snapshots()
    return _StaticSnapshots()


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


def snapshot_on_demand() -> None:
    """This process's runtime refreshes its snapshot when asked to (`snapshot_refresh()`), not
    in the background: for the offload pool's processes; called before the runtime is made."""
    global _on_demand
    _on_demand = True


def runtime() -> ExtenderRuntime:
    """The process's runtime, created on first use (and again after a fork)."""
    global _runtime
    current = _runtime
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = ExtenderRuntime(on_demand=_on_demand)
        return _runtime


def reset_runtime() -> None:
    """Drops the process's runtime (tests)."""
    global _runtime
    with _lock:
        if _runtime is not None and _runtime.pid == os.getpid():
            _runtime.close()
        _runtime = None
