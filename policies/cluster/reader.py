"""Incremental readers of the cluster snapshot in Redis (store.py: its keys, its versions and epoch,
its one writer).

Readers either poll (`refresh()`: the web's previews, once per request) or are pushed (`follow()`
with what a blocking XREAD on snap:events returned, from "<version>-0": the extender's
processes, policies/extender/runtime.py), which applies a watch event within milliseconds
whatever the cluster's size. An `in_place` reader (the extender) applies deltas to the state its
requests read, under `serve_lock`, instead of freezing a copy per change: freezing copies dicts
the size of the cluster (2-6 ms at 5000 nodes and 50 000 pods, docs/perf/issue-13-critical-path.txt
section 5), which a push per watch event would pay hundreds of times a second.

Readers never present an empty cluster as real: no snapshot -> `ClusterUnavailable` with the
watcher's status message; a snapshot whose watcher reports an error, whose heartbeat is older
than SCHEDWEB_SNAPSHOT_STALE_SECONDS, or that could not be checked against Redis for that long
is returned marked `stale`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

import orjson
import redis

from policies.cluster.convert import OBJECT_KINDS, ConversionError
from policies.cluster.files import FREEZE_ABOVE_BYTES, bulk_load
from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterSnapshot, ClusterState
from policies.cluster.store import (
    NODE,
    NODE_DELETE,
    OBJECT,
    OBJECT_DELETE,
    POD,
    POD_DELETE,
    RESET,
    SnapshotStore,
    cluster_name_check,
    decode_hash,
)
from policies.errors import ClusterUnavailable

log = logging.getLogger(__name__)

_LOAD_ATTEMPTS = 3
CATCH_UP_MAX = 20_000  # beyond this many deltas a full reload is cheaper than applying them
_XRANGE_BATCH = 2_000
_APPLY_CHUNK = 64  # deltas applied per hold of an in-place reader's serve lock (~1 ms at most)


class _PieceGone(Exception):
    """A piece of the stored state changed or went while a reader loaded it (not a ValueError:
    the snapshot is not damaged, only rewritten)."""


class SnapshotReader:
    """An in-memory copy of a cluster's snapshot, kept current from Redis.

    `current` is the last LoadedCluster (a frozen ClusterSnapshot plus status): no I/O, safe
    from any thread. `refresh()` does one round trip when nothing changed; otherwise it
    applies the new deltas to its own ClusterState and swaps in a new frozen snapshot
    (holders of the old one are unaffected). `follow(entries)` applies what a blocking XREAD
    of the events stream returned (`follow_from()` is the id to read after), falling back to
    `refresh()` when they do not continue the version held. `load()` = refresh, then current,
    for callers without a BackgroundRefresher.

    With `in_place`, `current.state` is the reader's own ClusterState, changed in place under
    `serve_lock` (never frozen): callers read it while holding that lock, and a change is
    applied between two of their reads, never during one. A full load builds a new state and
    swaps it in, so holders of the old one keep a consistent (older) picture. `on_change`
    (version) is called after each applied change, outside the lock. With `lean`, its state
    cuts the raw objects of pods bound to a node (policies/cluster/compact.py): for the
    extender's processes, which only count those pods. With `drop_before_load`, a full load
    lets go of the state held before it builds the new one, so the process never holds two (a
    process whose answers wait for its refresh anyway: the offload pool's; the listener keeps
    answering from the old one meanwhile); `release()` lets go of it outright.
    """

    def __init__(
        self,
        cluster: str,
        *,
        client: redis.Redis | None = None,
        stale_seconds: float | None = None,
        label_keys: Iterable[str] = (),
        catch_up_max: int = CATCH_UP_MAX,
        in_place: bool = False,
        on_change: Callable[[int], None] | None = None,
        lean: bool = False,
        drop_before_load: bool = False,
    ) -> None:
        self.store = SnapshotStore(cluster, client=client)
        self.lean = lean
        self.drop_before_load = drop_before_load
        self.cluster = self.store.cluster
        self.stale_seconds = stale_seconds if stale_seconds is not None else _stale_setting()
        self.catch_up_max = catch_up_max
        self.in_place = in_place
        self.on_change = on_change
        # Held by readers of an in-place state for a whole read, and by this reader for each
        # chunk of deltas it applies (at most _APPLY_CHUNK, JSON already parsed).
        self.serve_lock = threading.Lock()
        self._label_keys = tuple(label_keys)
        self._lock = threading.Lock()
        self._state: ClusterState | None = None
        self._snapshot: ClusterSnapshot | ClusterState | None = None
        self._epoch = ""
        self._version = 0
        self._meta: dict[str, str] = {}
        self._missing = False  # Redis answered but holds no snapshot (any more)
        self._unreadable = ""  # why the stored snapshot could not be loaded, if it could not
        self._unreadable_at: tuple[bytes, bytes] | None = None  # its (version, epoch)
        self._loaded: LoadedCluster | None = None
        self._failing_since: float | None = None  # monotonic time of the first Redis error
        self._last_error = ""
        self._dirty = False  # applied but not yet frozen (the freezing mode's follow)
        self.written_at: float | None = None  # the writer's time of the version held
        self.applied_at: float | None = None  # when this reader last changed its snapshot
        self.lag_seconds: float | None = None  # written -> applied, for that last change
        self.full_loads = 0  # counters for tests and metrics
        self.deltas_applied = 0
        self.refreshes = 0
        self.follows = 0

    # -- reading (no I/O) ------------------------------------------------------------------

    @property
    def current(self) -> LoadedCluster | None:
        """The last snapshot with its status, or None before the first successful load."""
        loaded = self._loaded
        failing = self._failing_since
        if loaded is None or failing is None or loaded.stale:
            return loaded
        if time.monotonic() - failing <= self.stale_seconds:
            return loaded
        return dataclasses.replace(
            loaded, stale=True, status="error", error=f"redis: {self._last_error}"
        )

    @property
    def version(self) -> int:
        return self._version

    @property
    def epoch(self) -> str:
        return self._epoch

    @property
    def failing(self) -> bool:
        """True while refreshes fail (Redis unreachable); the snapshot is then kept."""
        return self._failing_since is not None

    @property
    def meta(self) -> dict[str, str]:
        """The watcher's status hash as last read."""
        return self._meta

    def follow_from(self) -> str | None:
        """The events stream id a blocking XREAD continues from (entries after the version
        held), or None while there is no state to apply deltas to (refresh() loads it)."""
        if self._state is None or self._missing or self._unreadable:
            return None
        return f"{self._version}-0"

    def load(self) -> LoadedCluster:
        """Refreshes, then returns the snapshot. Without any snapshot: ClusterUnavailable
        whose message says why (the watcher's error, Redis unreachable, none written yet)."""
        try:
            self.refresh()
        except redis.RedisError as exc:
            self.note_error(exc)
            if self._loaded is None:
                raise ClusterUnavailable(
                    f"the live snapshot of cluster {self.cluster} cannot be read:"
                    f" Redis is unreachable ({_short(exc)})"
                ) from None
        current = self.current
        if current is None:
            raise ClusterUnavailable(self.unavailable_reason())
        return current

    def unavailable_reason(self) -> str:
        """Why there is no snapshot, in plain words."""
        meta = self._meta
        status, error = meta.get("status", ""), meta.get("error", "")
        if self._unreadable:
            return f"no usable snapshot of cluster {self.cluster}: {self._unreadable}"
        if error:
            return f"no snapshot of cluster {self.cluster} yet: {error}"
        if status == "starting":
            return (
                f"no snapshot of cluster {self.cluster} yet: the watcher is listing the"
                " cluster; try again in a few seconds"
            )
        return (
            f"no snapshot of cluster {self.cluster} yet: no watcher has written one"
            " (is the Celery worker with beat running?)"
        )

    def take_state(self) -> tuple[ClusterState, int, str] | None:
        """Loads the stored snapshot and hands over its mutable state, version and epoch (a
        watcher resuming the history); None if Redis holds none. Use the reader no further."""
        self.refresh()
        with self._lock:
            if self._state is None or self._missing:
                return None
            taken = (self._state, self._version, self._epoch)
            self._state = None
            return taken

    def release(self, when: Callable[[], bool] | None = None) -> bool:
        """Lets go of the state held (the next refresh loads it whole), for a process whose
        copy would sit idle: True if one was held (and `when()`, asked under the lock a refresh
        takes, said yes). Readers holding it keep it until they are done (under `serve_lock`
        for an in-place one)."""
        with self._lock:
            if self._state is None or (when is not None and not when()):
                return False
            with self.serve_lock:
                self._drop()
        return True

    def _drop(self) -> None:
        self._state = self._snapshot = self._loaded = None
        self._epoch, self._version = "", 0

    # -- refreshing ----------------------------------------------------------------------------

    def note_error(self, exc: BaseException) -> None:
        """Records a failed refresh: the snapshot is kept, and marked stale after the limit."""
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        self._last_error = _short(exc)

    def refresh(self) -> bool:
        """Brings the snapshot up to date; True if it changed. Raises redis.RedisError."""
        with self._lock:
            return self._refresh()

    def follow(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> bool:
        """Applies entries of the events stream as a blocking XREAD from `follow_from()`
        returned them; True if the snapshot changed. Entries that do not continue the version
        held (a gap, a reset, no state yet) fall back to `refresh()`, which reloads what is
        needed. Raises redis.RedisError (only that fallback talks to Redis)."""
        with self._lock:
            self.follows += 1
            if self._state is None or self._missing or self._unreadable:
                return self._refresh()
            before = self._version
            stop = self._apply_entries(entries)
            applied = self._version != before
            if stop is not None:
                changed = self._refresh()
                return changed or self._finish(applied)
            # an in-place state was published with each chunk; the status did not change
            return self._finish(applied, publish=not self.in_place)

    def _refresh(self) -> bool:
        keys = self.store.keys
        pipe = self.store.client.pipeline(transaction=False)
        pipe.get(keys.version)
        pipe.get(keys.epoch)
        pipe.hgetall(keys.meta)
        raw_version, raw_epoch, raw_meta = pipe.execute()
        self._failing_since = None
        self.refreshes += 1
        self._meta = decode_hash(raw_meta)
        changed = False
        if raw_version is None or raw_epoch is None:
            self._missing = True  # never written, or Redis lost it: keep what we hold
        else:
            self._missing = False
            version, epoch = int(raw_version), raw_epoch.decode()
            if self._state is None or epoch != self._epoch or version < self._version:
                changed = self._load_full()
            elif version > self._version:
                changed = self._catch_up(version)
        return self._finish(changed)

    def _finish(self, changed: bool, *, publish: bool = True) -> bool:
        """Publishes `current`: a new frozen snapshot if anything was applied since the last
        one (the freezing mode), the status otherwise (an in-place state is published as it
        changes)."""
        changed = changed or self._dirty
        if changed and self._state is not None and not self.in_place:
            self._snapshot = self._state.freeze()
        self._dirty = False
        if publish:
            self._publish()
        if changed and self.on_change is not None:
            self.on_change(self._version)
        return changed

    def _load_full(self, attempt: int = 1) -> bool:
        """Loads snap:full, then the deltas written since. False if there is none."""
        keys = self.store.keys
        # Do not parse the same unreadable blob again on every refresh.
        unreadable = self._unreadable_at
        if (
            unreadable
            and tuple(self.store.client.hmget(keys.full, "version", "epoch")) == unreadable
        ):
            return False
        pipe = self.store.client.pipeline(transaction=True)
        pipe.hmget(keys.full, "version", "epoch", "written_at", "chunks", "state")
        pipe.get(keys.version)
        (raw_version, raw_epoch, raw_written, raw_chunks, first), head = pipe.execute()
        if first is None or raw_version is None:
            self._missing = True
            return False
        count = int(raw_chunks) if raw_chunks and raw_chunks.isdigit() else 1
        large = count > 1 or len(first) > FREEZE_ABOVE_BYTES
        pieces = chain([first], self._pieces(count, (raw_version, raw_epoch, raw_written)))
        del first
        label_keys = set(self._label_keys)
        if self._state is not None:
            label_keys |= self._state.indexed_labels()
            if self.drop_before_load:
                with self.serve_lock:
                    self._drop()
        try:
            with bulk_load(freeze=large):
                state = ClusterState.from_bytes(pieces, label_keys=label_keys, lean=self.lean)
        except _PieceGone as exc:  # rewritten while it was read: the next refresh loads it
            log.info("snapshot of %s: %s; loading it again", self.cluster, exc)
            if self.drop_before_load and attempt < _LOAD_ATTEMPTS:  # nothing held meanwhile
                return self._load_full(attempt + 1)
            return False
        except ValueError as exc:  # written by another version of schedweb, or damaged
            log.error("snapshot of %s cannot be read: %s", self.cluster, exc)
            self._unreadable = f"the stored snapshot cannot be read ({exc})"
            self._unreadable_at = (raw_version, raw_epoch)
            return False
        self._unreadable, self._unreadable_at = "", None
        state.version = int(raw_version)
        # The state is swapped in whole: readers of the old one keep it, unchanged.
        with self.serve_lock:
            self._state, self._epoch = state, raw_epoch.decode()
            self._version = state.version
            self._applied(_float(raw_written.decode()) if raw_written else None)
            if self.in_place:
                self._snapshot = state
                self._publish()
        self.full_loads += 1
        if head is not None and int(head) > self._version:
            self._catch_up(int(head), allow_reload=False)
        return True

    def _pieces(self, count: int, written: tuple) -> Iterator[bytes]:
        """The stored state's pieces after the first, each fetched while the load parses the
        one before (held whole, 600 MB at 150 000 pods were half of a process's peak), each
        checked to be of the same write (`written`: version, epoch and time)."""
        keys = self.store.keys
        for number in range(1, count):
            *fields, piece = self.store.client.hmget(
                keys.full, "version", "epoch", "written_at", f"state.{number}"
            )
            if tuple(fields) != written or piece is None:
                raise _PieceGone(f"piece {number} of the stored snapshot changed or is gone")
            yield piece

    def _catch_up(self, target: int, *, allow_reload: bool = True) -> bool:
        """Applies deltas (version, target]; reloads the full snapshot if they are not all
        there (trimmed, reset) or too many."""
        if target - self._version > self.catch_up_max and allow_reload:
            return self._load_full()
        client, key = self.store.client, self.store.keys.events
        while self._version < target:
            entries = client.xrange(key, min=f"{self._version + 1}-0", max="+", count=_XRANGE_BATCH)
            if not entries:
                break
            stop = self._apply_entries(entries)
            if stop is not None:
                # A gap (trimmed, or a new history) or a replaced state: start over.
                return self._load_full() if allow_reload else self._give_up(stop)
        return True

    def _apply_entries(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> int | None:
        """Applies the entries that continue the version held, in order (older ones skipped:
        a refresh may have applied them already). Returns the number of the first entry that
        does not continue it (a gap or a reset), None when all did."""
        state = self._state
        assert state is not None
        expected = self._version + 1
        decoded: list[tuple[str, Any, bytes | None]] = []
        stop = None
        for entry_id, fields in entries:
            number = int(entry_id.split(b"-", 1)[0])
            if number < expected:
                continue
            op = fields.get(b"op", b"").decode()
            if number != expected or op == RESET:
                stop = number
                break
            decoded.append((op, _decode(op, fields.get(b"data", b"")), fields.get(b"t")))
            expected += 1
        for start in range(0, len(decoded), _APPLY_CHUNK):
            chunk = decoded[start : start + _APPLY_CHUNK]
            if self.in_place:
                with self.serve_lock:
                    self._apply_chunk(state, chunk)
                    self._snapshot = state
                    self._publish()
            else:
                self._apply_chunk(state, chunk)
                self._dirty = True
        return stop

    def _apply_chunk(self, state: ClusterState, chunk: list[tuple[str, Any, bytes | None]]) -> None:
        for op, value, _written in chunk:
            _apply(state, op, value)
        self.deltas_applied += len(chunk)
        self._version = state.version = self._version + len(chunk)
        written = chunk[-1][2]
        self._applied(_float(written.decode()) if written else None)

    def _applied(self, written_at: float | None) -> None:
        """Notes when the version now held was written and applied (for /readyz, /metrics)."""
        now = time.time()
        self.applied_at = now
        self.written_at = written_at
        self.lag_seconds = max(0.0, now - written_at) if written_at is not None else None

    def _give_up(self, number: int) -> bool:
        log.warning(
            "snapshot of %s: delta %d does not follow version %d; keeping version %d",
            self.cluster,
            number,
            self._version,
            self._version,
        )
        return True

    def _publish(self) -> None:
        """Rebuilds `current` from the snapshot and the meta (cheap: no copy of the data)."""
        if self._snapshot is None:
            self._loaded = None
            return
        meta = self._meta
        now = time.time()
        status = meta.get("status") or "unknown"
        error = meta.get("error", "")
        heartbeat = _float(meta.get("heartbeat_at"))
        age = max(0.0, now - heartbeat) if heartbeat else None
        stale = status != "ok" or age is None or age > self.stale_seconds
        if self._unreadable:
            stale, status, error = True, "error", f"{self._unreadable}; showing the last one"
        elif self._missing:
            stale, status = True, "error"
            error = (
                "Redis no longer holds the snapshot (restarted or flushed?); showing the last one"
            )
        elif stale and not error:
            if status == "starting":
                error = "the watcher is listing the cluster"
            elif age is not None:
                error = (
                    f"the watcher has not reported for {age:.0f} s (is the Celery worker running?)"
                )
            else:
                error = "no watcher is keeping this snapshot current"
        label = f"live {self.cluster} v{self._version}"
        if stale:
            label += f" (stale: {error})" if error else " (stale)"
        self._loaded = LoadedCluster(
            state=self._snapshot,
            source="live",
            label=label,
            version=self._version,
            age_seconds=age,
            stale=stale,
            status="stale" if stale and status == "ok" else status,
            error=error,
            updated_at=heartbeat,
            details=dict(meta, cluster=self.cluster, epoch=self._epoch),
        )


class BackgroundRefresher:
    """A daemon thread calling reader.refresh() every `interval` seconds, for processes that
    answer from `reader.current` without any I/O in the request (the extender). Redis errors
    are recorded, never raised: the last snapshot stays, marked stale after the limit."""

    def __init__(self, reader: SnapshotReader, *, interval: float = 0.15) -> None:
        self.reader = reader
        self.interval = interval
        self.errors = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> BackgroundRefresher:
        """Starts the thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name=f"snapshot-refresh-{self.reader.cluster}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, *, timeout: float = 5.0) -> None:
        """Stops the thread and waits for it (a refresh in progress finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> BackgroundRefresher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while True:
            try:
                self.reader.refresh()
            except Exception as exc:  # Redis down, a bad snapshot: keep the last, keep trying
                self.errors += 1
                self.last_error = _short(exc)
                self.reader.note_error(exc)
                if not isinstance(exc, redis.RedisError):
                    log.exception("snapshot refresh of %s failed", self.reader.cluster)
            if self._stop.wait(self.interval):
                return


@functools.cache
def _shared_reader(cluster: str, redis_url: str) -> SnapshotReader:
    return SnapshotReader(cluster)


def reader_for(cluster: str) -> SnapshotReader:
    """The process's reader of `cluster` (one per cluster and Redis URL), for web requests."""
    from django.conf import settings

    return _shared_reader(cluster_name_check(cluster), settings.REDIS_URL)


# -- helpers --------------------------------------------------------------------------------------


def _decode(op: str, data: bytes) -> Any:
    """A delta's data as `_apply` takes it: JSON parsed (outside the serve lock), names and keys
    as text; a value that cannot be decoded is passed on as an exception to skip it."""
    try:
        if op in (NODE, POD, OBJECT):
            return orjson.loads(data)
        return data.decode()
    except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:
        return exc


def _apply(state: ClusterState, op: str, value: Any) -> None:
    """One decoded delta applied to a reader's state; a bad one is logged and skipped."""
    try:
        if isinstance(value, Exception):
            raise value
        if op == NODE:
            state.apply_node(value)
        elif op == POD:
            state.apply_pod(value)
        elif op == NODE_DELETE:
            state.delete_node(value)
        elif op == POD_DELETE:
            state.delete_pod(value)
        elif op == OBJECT:
            if type(value) is not dict or value.get("kind") not in OBJECT_KINDS:
                raise ValueError("not an object view")
            state.apply_object_view(value)
        elif op == OBJECT_DELETE:
            state.delete_object(value)
        else:
            log.warning("unknown snapshot delta op %r skipped", op)
    except (ConversionError, orjson.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        log.warning("snapshot delta %s skipped: %s", op, exc)


def _float(value: str | None) -> float | None:
    with contextlib.suppress(TypeError, ValueError):
        return float(value) if value else None
    return None


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]


def _stale_setting() -> float:
    try:
        from django.conf import settings

        return float(settings.SCHEDWEB_SNAPSHOT_STALE_SECONDS)
    except Exception:  # Django not configured (a script): the documented default
        return 30.0
