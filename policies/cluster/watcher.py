"""The watch loop: list Nodes and Pods (and the Namespaces, Services and controllers the model
of kube-scheduler reads, see live.KINDS), then follow their watches into a ClusterState and
the Redis snapshot store. Pure of Celery: the watch service (policies/cluster/sync.py) runs it until a
deadline and re-arms it; tests run it in a thread.

    sync:   list every kind -> a new state (full snapshot written, readers reload), or,
            when a state exists (resumed from Redis, or after 410 Gone), the differences with
            it as deltas: nothing lost, nothing duplicated
    watch:  one thread per kind reads its watch (from the list's resourceVersion, with
            bookmarks) into one queue; this thread applies each event to the state and
            publishes it as a delta (batched: one Redis round trip per burst)
    410:    relist both kinds and diff (above)
    errors: the failed watch restarts from its last resourceVersion after an exponential
            backoff with jitter (cap 30 s); the status says why meanwhile
    Redis:  a failed write or a Redis that lost our history (restart, flush) marks the store
            dirty; the state keeps following the cluster, and the whole state is written again
            as soon as Redis answers (with backoff)
    lock:   renewed every ttl/3; if another watcher holds it, this one stops

Only `policies.cluster.live` talks to the API server; this module gets a client object.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import redis

from policies.cluster.convert import (
    ConversionError,
    node_view,
    object_key,
    object_view,
    pod_key,
    pod_view,
)
from policies.cluster.files import bulk_load
from policies.cluster.live import (
    KINDS,
    OBJECT_RESOURCES,
    Gone,
    KubeError,
    LiveClient,
    WatchStream,
)
from policies.cluster.reader import SnapshotReader
from policies.cluster.state import ClusterState
from policies.cluster.store import (
    NODE,
    NODE_DELETE,
    OBJECT,
    OBJECT_DELETE,
    POD,
    POD_DELETE,
    SnapshotLost,
    SnapshotStore,
    SnapshotWriter,
)
from policies.engine.inputs import NodeView, PodView

log = logging.getLogger(__name__)

_DRAIN = 2_000  # events taken from the queue per batch
_POLL = 0.2  # seconds the loop waits for an event before its housekeeping
FREEZE_ABOVE_OBJECTS = 2_000  # larger listings are built under bulk_load() with gc.freeze()


@dataclass
class WatchResult:
    """What one run did, for the SyncRun record and the logs."""

    status: str  # ok | error
    error: str
    nodes: int
    pods: int
    version: int
    events: int
    relists: int
    ended_by: str  # deadline | stop | lock-lost

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def state_from_objects(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    objects: dict[str, Sequence[dict[str, Any]]] | None = None,
) -> tuple[ClusterState, list[str]]:
    """A state from listed raw objects (`objects`: resource name -> listed items, for the
    OBJECT_RESOURCES); an object the views cannot be built from is skipped and named in the
    returned problems (one bad pod must not hide the cluster)."""
    problems: list[str] = []
    node_views: list[NodeView] = []
    pod_views: list[PodView] = []
    object_views: list[dict[str, Any]] = []
    for resource, items in (objects or {}).items():
        for obj in items:
            try:
                object_views.append(object_view(obj, OBJECT_RESOURCES[resource]))
            except ConversionError as exc:
                problems.append(str(exc))
    with bulk_load(freeze=len(pods) + len(nodes) > FREEZE_ABOVE_OBJECTS):
        for obj in nodes:
            try:
                node_views.append(node_view(obj, requested={}, pod_count=0))
            except ConversionError as exc:
                problems.append(str(exc))
        for obj in pods:
            try:
                pod_views.append(pod_view(obj))
            except ConversionError as exc:
                problems.append(str(exc))
        state = ClusterState.from_views(nodes=node_views, pods=pod_views, objects=object_views)
        return state, problems


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _pod_key_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


class ClusterWatcher:
    """Keeps one cluster's snapshot in Redis current (see the module docstring).

    `run(seconds=...)` returns at the deadline, on `stop()`, or when the lock is lost; it can
    be called again and resumes from its state and resource versions.
    """

    def __init__(
        self,
        *,
        client: LiveClient,
        store: SnapshotStore,
        lock_token: str | None = None,
        lock_ttl: float = 30.0,
        resume: bool = True,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        watch_seconds: tuple[int, int] = (120, 180),
        heartbeat_seconds: float = 2.0,
        checkpoint_events: int = 10_000,
        checkpoint_seconds: float = 60.0,
        on_synced: Callable[[WatchResult], None] | None = None,
        on_bound_pods_deleted: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.writer = SnapshotWriter(store)
        self.lock_token = lock_token
        self.lock_ttl = lock_ttl
        self.resume = resume
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.watch_seconds = watch_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.checkpoint_events = checkpoint_events
        self.checkpoint_seconds = checkpoint_seconds
        self.on_synced = on_synced
        # Bound pods deleted in a batch of events ({podUid, node, at}): where they ran, for
        # records that would otherwise learn it only from a later snapshot (too late then).
        self.on_bound_pods_deleted = on_bound_pods_deleted
        self._deleted_bound: list[dict[str, Any]] = []
        self.state: ClusterState | None = None
        self.events = 0  # watch events applied, over all runs
        self.relists = 0  # syncs after the first (410 Gone)
        self.skipped = 0  # objects the views could not be built from
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._generation = 0
        self._streams: dict[str, WatchStream] = {}
        self._streams_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._rv: dict[str, str] = {}
        self._need_sync = True
        self._synced_once = False
        self._retry_at = 0.0  # monotonic: when the next sync may be tried
        self._sync_failures = 0
        self._watch_errors: dict[str, KubeError] = {}
        self._watch_failures: dict[str, int] = {}
        self._restart_at: dict[str, float] = {}
        self._connected: set[str] = set()
        self._connected_at: dict[str, float] = {}
        self._gone_streak = 0  # 410s with no event in between: relists back off after the first
        self._error = ""  # the current problem, "" when healthy
        self._error_since = 0.0
        self._store_dirty = False  # Redis lacks our latest state: write it whole when it answers
        self._store_error = ""
        self._store_failures = 0
        self._store_retry_at = 0.0
        self._since_full = 0  # deltas since the last full write
        self._last_full = 0.0
        self._last_heartbeat = 0.0
        self._last_lock = 0.0
        self._last_event_at = 0.0
        self._last_sync_at = 0.0
        self._started_at = time.time()
        self._ended_by = ""
        self._status_written: tuple[str, str] | None = None

    # -- public ---------------------------------------------------------------------------------

    def run(self, *, seconds: float | None = None) -> WatchResult:
        """Lists and watches until `seconds` pass (None: until stop()); returns what it did."""
        end = time.monotonic() + seconds if seconds is not None else float("inf")
        self._stop.clear()
        self._ended_by = ""
        if self.state is None and self.resume:
            self._resume_from_store()
        if not self._need_sync:
            self._start_watches()  # a second run: continue from the resource versions
        try:
            while not self._stop.is_set() and time.monotonic() < end:
                if self._need_sync:
                    if time.monotonic() < self._retry_at:
                        self._wait(min(self._retry_at, end))
                    else:
                        self._sync()
                else:
                    self._pump(end)
                self._housekeeping()
        finally:
            self._stop_watches()
            self._final_status()
        if not self._ended_by:
            self._ended_by = "stop" if self._stop.is_set() else "deadline"
        return self.result()

    def stop(self) -> None:
        """Ends run() soon (from any thread): open watches are closed at once."""
        self._stop.set()
        self._close_streams()

    def result(self) -> WatchResult:
        """The current figures."""
        error = self._error or self._store_error
        return WatchResult(
            status="error" if error else "ok",
            error=error,
            nodes=self.state.node_count() if self.state is not None else 0,
            pods=self.state.pod_count() if self.state is not None else 0,
            version=self.writer.version,
            events=self.events,
            relists=self.relists,
            ended_by=self._ended_by,
        )

    # -- sync -----------------------------------------------------------------------------------

    def _resume_from_store(self) -> None:
        """Continue the history in Redis (a re-armed task): readers then get deltas for what
        changed meanwhile, instead of all reloading a full snapshot."""
        reader = SnapshotReader(self.store.cluster, client=self.store.client)
        try:
            taken = reader.take_state()
        except (redis.RedisError, ValueError) as exc:
            log.info("cluster %s: not resuming the stored snapshot (%s)", self.store.cluster, exc)
            return
        if taken is not None:
            self.state, version, epoch = taken
            self.writer.adopt(epoch=epoch, version=version)
            log.info("cluster %s: resuming snapshot v%d", self.store.cluster, version)

    def _sync(self) -> None:
        """List both kinds; build or diff the state; publish; start the watches."""
        self._stop_watches()
        if self.state is None and not self._error:
            # Readers see "starting" only when there is nothing to show yet; a resumed or
            # relisting watcher leaves the stored snapshot's status alone meanwhile, and a
            # retry after a failed list leaves its error standing (it is still the reason).
            self._write_status("starting", "")
        try:
            nodes = self.client.list_nodes()
            pods = self.client.list_pods()
            objects = {kind: self.client.list(kind) for kind in OBJECT_RESOURCES}
        except KubeError as exc:
            self._sync_failures += 1
            self._retry_at = time.monotonic() + self._backoff(self._sync_failures)
            self._set_error(exc.message)
            log.warning("cluster %s: list failed: %s", self.store.cluster, exc.message)
            return
        if self.state is None:
            self.state, problems = state_from_objects(
                nodes.items, pods.items, {k: v.items for k, v in objects.items()}
            )
            self._skip(problems)
            self._write_full(reset=True)
        else:
            ops = self._diff(nodes.items, pods.items)
            for kind, listing in objects.items():
                ops.extend(self._diff_objects(kind, listing.items))
            total = self.state.node_count() + self.state.pod_count()
            if len(ops) > max(2_000, total // 4):
                self._write_full(reset=True)  # cheaper for readers than thousands of deltas
            else:
                self._publish(ops)
        if self._synced_once:
            self.relists += 1
        self._synced_once = True
        self._rv = {"nodes": nodes.resource_version, "pods": pods.resource_version}
        self._rv.update({kind: listing.resource_version for kind, listing in objects.items()})
        self._need_sync = False
        self._sync_failures = 0
        self._last_sync_at = time.time()
        self._watch_errors.clear()
        self._set_error("")
        self._heartbeat(force=True)
        self._start_watches()
        if self.on_synced is not None:
            self.on_synced(self.result())

    def _diff(
        self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
    ) -> list[tuple[str, Any]]:
        """Applies a fresh listing to the state; the deltas for what differed. Objects are
        compared by resourceVersion, so unchanged ones are not even converted."""
        state = self.state
        assert state is not None
        ops: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for obj in nodes:
            name = (obj.get("metadata") or {}).get("name") or ""
            seen.add(name)
            current = state.node(name)
            if current is None or _rv(current["object"]) != _rv(obj):
                op = self._apply_node(obj)
                if op is not None:
                    ops.append(op)
        for view in list(state.nodes()):
            if view["name"] not in seen and state.delete_node(view["name"]):
                ops.append((NODE_DELETE, view["name"]))
        seen = set()
        for obj in pods:
            key = _pod_key_of(obj)
            seen.add(key)
            current = state.pod(key)
            if current is None or _rv(current["object"]) != _rv(obj):
                op = self._apply_pod(obj)
                if op is not None:
                    ops.append(op)
        for view in list(state.pods()):
            key = pod_key(view)
            if key not in seen and state.delete_pod(key):
                ops.append((POD_DELETE, key))
        return ops

    def _diff_objects(self, resource: str, items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        """The same for one kind of OBJECT_RESOURCES."""
        state = self.state
        assert state is not None
        kind = OBJECT_RESOURCES[resource]
        held = state.objects(kind)
        ops: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for obj in items:
            meta = obj.get("metadata") or {}
            key = object_key(kind, meta.get("namespace") or "", meta.get("name") or "")
            seen.add(key)
            current = held.get(key)
            if current is None or current["resourceVersion"] != _rv(obj):
                op = self._apply_object(kind, obj)
                if op is not None:
                    ops.append(op)
        for key in [k for k in state.objects(kind) if k not in seen]:
            if state.delete_object(key):
                ops.append((OBJECT_DELETE, key))
        return ops

    # -- watches --------------------------------------------------------------------------------

    def _start_watches(self) -> None:
        for kind in KINDS:
            self._start_watch(kind)

    def _start_watch(self, kind: str) -> None:
        self._restart_at.pop(kind, None)
        thread = threading.Thread(
            target=self._watch_loop,
            args=(kind, self._generation, self._rv.get(kind, "")),
            name=f"watch-{kind}-{self.store.cluster}",
            daemon=True,
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _watch_loop(self, kind: str, generation: int, rv: str) -> None:
        """One kind's watches, back to back, into the queue (runs in its own thread)."""
        put = self._queue.put
        while not self._stop.is_set() and generation == self._generation:
            try:
                stream = self.client.watch(
                    kind, resource_version=rv, timeout_seconds=random.randint(*self.watch_seconds)
                )
            except Gone:
                put(("gone", kind, generation, None))
                return
            except KubeError as exc:
                put(("error", kind, generation, exc))
                return
            with self._streams_lock:
                current = not self._stop.is_set() and generation == self._generation
                if current:
                    self._streams[kind] = stream
            if not current:
                stream.close()
                return
            put(("connected", kind, generation, None))
            try:
                for event_type, obj in stream:
                    rv = _rv(obj) or rv
                    put(("event", kind, generation, (event_type, obj)))
            except Gone:
                put(("gone", kind, generation, None))
                return
            except KubeError as exc:
                put(("error", kind, generation, exc))
                return
            finally:
                with self._streams_lock:
                    if self._streams.get(kind) is stream:
                        del self._streams[kind]
            # The server ended the watch (timeoutSeconds): watch on from the last version.

    def _stop_watches(self) -> None:
        """Ends the watch threads of this generation; their queued items are ignored."""
        self._generation += 1
        self._close_streams()
        self._connected.clear()
        for thread in self._threads:
            thread.join(timeout=1.0)  # a thread still connecting exits when it connects
        self._threads = [t for t in self._threads if t.is_alive()]

    def _close_streams(self) -> None:
        with self._streams_lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for stream in streams:
            stream.close()

    # -- events ---------------------------------------------------------------------------------

    def _pump(self, end: float) -> None:
        """Waits briefly for queued items, then handles every item available."""
        try:
            item = self._queue.get(timeout=max(0.0, min(_POLL, end - time.monotonic())))
        except queue.Empty:
            return
        items = [item]
        get = self._queue.get_nowait
        try:
            while len(items) < _DRAIN:
                items.append(get())
        except queue.Empty:
            pass
        ops: list[tuple[str, Any]] = []
        for what, kind, generation, payload in items:
            if generation != self._generation:
                continue  # from watches that were replaced
            if what == "event":
                op = self._apply_event(kind, *payload)
                if op is not None:
                    ops.append(op)
            elif what == "connected":
                self._watch_connected(kind)
            elif what == "gone":
                log.info(
                    "cluster %s: %s watch expired (410 Gone); relisting", self.store.cluster, kind
                )
                self._need_sync = True
                self._gone_streak += 1
            elif what == "error":
                self._watch_failed(kind, payload)
        if ops:
            self._gone_streak = 0
            self._publish(ops)
        if self._deleted_bound:
            deleted, self._deleted_bound = self._deleted_bound[:500], []
            try:
                self.on_bound_pods_deleted(deleted)  # type: ignore[misc]
            except Exception:  # a record is a nicety; the snapshot is the job
                log.exception("cluster %s: reporting deleted bound pods failed", self.store.cluster)
        if self._need_sync:
            # Relist at once after a 410; back off if relisting keeps ending in 410.
            delay = self._backoff(self._gone_streak - 1) if self._gone_streak > 1 else 0.0
            self._retry_at = time.monotonic() + delay

    def _apply_event(
        self, kind: str, event_type: str, obj: dict[str, Any]
    ) -> tuple[str, Any] | None:
        rv = _rv(obj)
        if rv:
            self._rv[kind] = rv
        if event_type == "BOOKMARK":
            return None
        self.events += 1
        self._last_event_at = time.time()
        state = self.state
        assert state is not None
        if event_type == "DELETED":
            if kind == "nodes":
                name = (obj.get("metadata") or {}).get("name") or ""
                return (NODE_DELETE, name) if state.delete_node(name) else None
            if kind in OBJECT_RESOURCES:
                meta = obj.get("metadata") or {}
                key = object_key(
                    OBJECT_RESOURCES[kind], meta.get("namespace") or "", meta.get("name") or ""
                )
                return (OBJECT_DELETE, key) if state.delete_object(key) else None
            key = _pod_key_of(obj)
            node = (obj.get("spec") or {}).get("nodeName")
            uid = (obj.get("metadata") or {}).get("uid")
            if node and uid and self.on_bound_pods_deleted is not None:
                self._deleted_bound.append(
                    {"kind": "chosen", "podUid": str(uid), "node": str(node), "at": time.time()}
                )
            return (POD_DELETE, key) if state.delete_pod(key) else None
        if event_type not in ("ADDED", "MODIFIED"):
            log.warning(
                "cluster %s: unknown %s watch event %r ignored",
                self.store.cluster,
                kind,
                event_type,
            )
            return None
        if kind in OBJECT_RESOURCES:
            return self._apply_object(OBJECT_RESOURCES[kind], obj)
        return self._apply_node(obj) if kind == "nodes" else self._apply_pod(obj)

    def _apply_node(self, obj: dict[str, Any]) -> tuple[str, Any] | None:
        try:
            view = self.state.apply_node(obj)  # type: ignore[union-attr]
        except ConversionError as exc:
            self._skip([str(exc)])
            return None
        return NODE, orjson.dumps(view["object"])

    def _apply_pod(self, obj: dict[str, Any]) -> tuple[str, Any] | None:
        try:
            view = self.state.apply_pod(obj)  # type: ignore[union-attr]
        except ConversionError as exc:
            self._skip([str(exc)])
            return None
        return POD, orjson.dumps(view["object"])

    def _apply_object(self, kind: str, obj: dict[str, Any]) -> tuple[str, Any] | None:
        try:
            view = self.state.apply_object(kind, obj)  # type: ignore[union-attr]
        except ConversionError as exc:
            self._skip([str(exc)])
            return None
        return OBJECT, orjson.dumps(view)

    def _skip(self, problems: list[str]) -> None:
        for problem in problems[:5]:
            log.warning("cluster %s: skipped an object: %s", self.store.cluster, problem)
        self.skipped += len(problems)

    def _watch_connected(self, kind: str) -> None:
        self._connected.add(kind)
        self._connected_at[kind] = time.monotonic()
        self._watch_errors.pop(kind, None)
        if not self._watch_errors:
            self._set_error("")

    def _watch_failed(self, kind: str, exc: KubeError) -> None:
        self._connected.discard(kind)
        # A watch that had been up for a while starts a fresh count; one that breaks right
        # after connecting keeps counting, so a flapping server cannot make us spin.
        if time.monotonic() - self._connected_at.get(kind, 0.0) > 30.0:
            self._watch_failures[kind] = 0
        failures = self._watch_failures.get(kind, 0) + 1
        self._watch_failures[kind] = failures
        self._watch_errors[kind] = exc
        # The first break of a watch that was working is retried at once (the server ended
        # the connection); repeated failures back off.
        delay = 0.0 if failures == 1 else self._backoff(failures - 1)
        self._restart_at[kind] = time.monotonic() + delay
        if failures > 1:
            self._set_error(exc.message)
        log.info(
            "cluster %s: %s watch failed (%s); retry in %.1f s",
            self.store.cluster,
            kind,
            exc.message,
            delay,
        )

    # -- the store ------------------------------------------------------------------------------

    def _publish(self, ops: list[tuple[str, Any]]) -> None:
        if self._store_dirty:
            return  # the whole state is written when Redis answers again
        try:
            self.writer.deltas(ops)
            self.state.version = self.writer.version  # type: ignore[union-attr]
            self._since_full += len(ops)
        except SnapshotLost as exc:
            log.warning("cluster %s: %s; writing the full snapshot", self.store.cluster, exc)
            self._store_dirty = True
            self._store_retry_at = 0.0
            self._recover_store()
        except redis.RedisError as exc:
            self._store_failed(exc)

    def _write_full(self, *, reset: bool) -> None:
        if self._store_dirty and not reset:
            return
        try:
            self.writer.full(self.state, reset=reset)  # type: ignore[arg-type]
            self._since_full = 0
            self._last_full = time.monotonic()
            self.store.meta_write({"last_full_at": time.time()})
            self._store_ok()
        except SnapshotLost:
            self._store_dirty = True
            self._store_retry_at = 0.0
        except redis.RedisError as exc:
            self._store_failed(exc)

    def _store_failed(self, exc: Exception) -> None:
        self._store_dirty = True
        self._store_failures += 1
        self._store_error = f"redis: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        self._store_retry_at = time.monotonic() + self._backoff(self._store_failures)
        log.warning("cluster %s: snapshot store failed (%s)", self.store.cluster, self._store_error)

    def _store_ok(self) -> None:
        if self._store_dirty or self._store_error:
            log.info("cluster %s: snapshot store recovered", self.store.cluster)
        self._store_dirty = False
        self._store_error = ""
        self._store_failures = 0
        self._status_written = None  # rewrite the status into a Redis that may have lost it

    def _recover_store(self) -> None:
        """A dirty store gets the whole state again (a new history if Redis lost ours)."""
        if self.state is None or time.monotonic() < self._store_retry_at:
            return
        if not self._check_lock():
            return
        self._store_dirty = True  # _write_full(reset) below clears it on success
        self._write_full(reset=True)
        if not self._store_dirty:
            self._heartbeat(force=True)

    # -- housekeeping ---------------------------------------------------------------------------

    def _housekeeping(self) -> None:
        now = time.monotonic()
        for kind, when in list(self._restart_at.items()):
            if now >= when and not self._need_sync:
                self._start_watch(kind)
        if self._store_dirty:
            self._recover_store()
            return
        lock_due = self.lock_token and now - self._last_lock >= self.lock_ttl / 3
        if lock_due and not self._check_lock():
            return
        if (
            self.state is not None
            and self.writer.epoch
            and self._since_full
            and (
                self._since_full >= self.checkpoint_events
                or now - self._last_full >= self.checkpoint_seconds
            )
        ):
            self._write_full(reset=False)  # so that new readers start near the head
        if now - self._last_heartbeat >= self.heartbeat_seconds:
            self._heartbeat()

    def _check_lock(self) -> bool:
        """Renews the lock; False (and the run ends) if another watcher holds it."""
        if not self.lock_token:
            return True
        try:
            held = self.store.lock_renew(self.lock_token, ttl=self.lock_ttl)
        except redis.RedisError as exc:
            self._store_failed(exc)
            return False
        self._last_lock = time.monotonic()
        if held == "lost":
            log.warning("cluster %s: another watcher holds the lock; stopping", self.store.cluster)
            self._ended_by = "lock-lost"
            self._stop.set()
            return False
        return True

    def _heartbeat(self, *, force: bool = False) -> None:
        """Status, counts and the time (readers judge staleness by it); also notices a Redis
        that lost our history while no event came."""
        self._last_heartbeat = time.monotonic()
        if self._store_dirty:
            return
        state = self.state
        error = self._error
        fields: dict[str, Any] = {"heartbeat_at": time.time()}
        if self._last_event_at:
            fields["last_event_at"] = self._last_event_at
        if self._last_sync_at:
            fields["last_sync_at"] = self._last_sync_at
        if state is not None and self.writer.epoch:
            # Counts of the state this watcher holds (a watcher that never listed leaves the
            # previous figures alone: they describe the snapshot still stored).
            fields.update(
                nodes=state.node_count(), pods=state.pod_count(), version=self.writer.version
            )
        status = (
            ("error", error) if error else ("ok", "") if self._synced_once else ("starting", "")
        )
        if force or status != self._status_written:
            fields.update(self._status_fields(*status))
        keys = self.store.keys
        try:
            pipe = self.store.client.pipeline(transaction=False)
            pipe.hset(
                keys.meta, mapping={k: "" if v is None else str(v) for k, v in fields.items()}
            )
            pipe.get(keys.epoch)
            _, epoch = pipe.execute()
        except redis.RedisError as exc:
            self._store_failed(exc)
            return
        if "status" in fields:
            self._status_written = status
        if self.writer.epoch and (epoch is None or epoch.decode() != self.writer.epoch):
            log.warning("cluster %s: Redis lost the snapshot; writing it again", self.store.cluster)
            self._store_dirty = True
            self._store_retry_at = 0.0
            self._recover_store()

    def _status_fields(self, status: str, error: str) -> dict[str, Any]:
        return {
            "status": status,
            "error": error,
            "error_since": self._error_since if error else "",
            "source": "live",
            "server": self.client.server,
            "watcher": f"{socket.gethostname()}:{os.getpid()}",
            "started_at": self._started_at,
        }

    def _write_status(self, status: str, error: str) -> None:
        try:
            self.store.meta_write(
                {**self._status_fields(status, error), "heartbeat_at": time.time()}
            )
            self._status_written = (status, error)
        except redis.RedisError as exc:
            self._store_failed(exc)

    def _set_error(self, message: str) -> None:
        """Records the current problem ("" = healthy) and writes the status when it changes."""
        if message == self._error:
            return
        if message and not self._error:
            self._error_since = time.time()
        self._error = message
        status = (
            ("error", message) if message else ("ok", "") if self._synced_once else ("starting", "")
        )
        if not self._store_dirty:
            self._write_status(*status)

    def _final_status(self) -> None:
        """Last heartbeat of the run (the next run, or the task re-arming, takes over)."""
        if self.state is not None and not self._store_dirty:
            self._heartbeat(force=True)
        elif self.state is None and self._error and not self._store_dirty:
            self._write_status("error", self._error)

    def _backoff(self, failures: int) -> float:
        """Exponential with jitter: base * 2^(n-1), capped, times a random 0.5-1 (so that many
        watchers restarting together do not retry in step)."""
        delay = min(self.backoff_cap, self.backoff_base * 2 ** max(0, failures - 1))
        return delay * random.uniform(0.5, 1.0)

    def _wait(self, until: float) -> None:
        self._stop.wait(max(0.0, min(until - time.monotonic(), _POLL * 5)))
