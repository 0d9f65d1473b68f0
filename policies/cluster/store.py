"""The cluster snapshot in Redis: one writer (the watcher), any number of incremental readers.

Keys, per cluster (`schedweb:{cluster}:`):

    snap:full     hash    version, epoch, state (ClusterState.to_bytes; past 64 MB cut at line ends
                          into state, state.1, state.2...), chunks, written_at
    snap:version  int     bumped by every change; readers poll only this (plus meta)
    snap:epoch    str     changes when the history restarts (Redis lost it, or a first write)
    snap:events   stream  one delta per version, id "<version>-0", fields op + data + t (the
                          writer's Unix time), MAXLEN ~ 100 000 (op: node, node.delete, pod,
                          pod.delete, object, object.delete, reset)
    snap:meta     hash    source, server, status (starting|ok|error), error, heartbeat_at,
                          last_event_at, last_sync_at, last_full_at, nodes, pods, version
    watch:lock    str     the watcher's token, with a TTL it renews (one watcher per cluster)
    watch:starting str    set by the supervisor when it queues a watch (no double queueing)

Versions and the epoch: the state in `snap:full` is the state after applying every delta up to
its version, so a reader loads it once and then applies the stream's deltas after its version.
The stream, the counter and the epoch change together (a Lua script for deltas, MULTI for a
full write). A reader reloads the full snapshot when the epoch changed (Redis restarted and the
watcher wrote a new history), the version went backwards, a delta it needs was trimmed, or it
meets a `reset` entry (the writer replaced the whole state). Timestamps are Unix seconds.

Readers: policies/cluster/reader.py (polled by the web, pushed in the extender's processes).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import secrets
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import redis

from policies.cluster.state import ClusterState

log = logging.getLogger(__name__)

EVENTS_MAXLEN = 100_000  # deltas kept; a reader further behind reloads the full snapshot
# Full loads tried in a row by a reader that let go of its state first (drop_before_load), when
# the stored snapshot was rewritten while it read it: it has nothing else to answer from.
_DELTA_BATCH = 500  # deltas per script call: keeps each Redis command short
# A stored state's piece (Redis takes values up to 512 MB), a little under 64 MiB with Redis's
# own header: its allocator's size class.
FULL_CHUNK_BYTES = 64 * 2**20 - 4096
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")

# Delta operations (the stream's `op` field).
NODE = "node"  # data: the Node JSON (managedFields and images removed)
NODE_DELETE = "node.delete"  # data: the node name
POD = "pod"  # data: the Pod JSON (managedFields removed)
POD_DELETE = "pod.delete"  # data: the pod key (uid)
# data: a Namespace, Service or controller view (convert.object_view: names, labels, selectors)
OBJECT = "object"
OBJECT_DELETE = "object.delete"  # data: its object_key ("Kind/namespace/name")
RESET = "reset"  # the whole state was replaced: reload snap:full
OPS = frozenset({NODE, NODE_DELETE, POD, POD_DELETE, OBJECT, OBJECT_DELETE, RESET})

# KEYS: version, events, epoch. ARGV: epoch, maxlen, the writer's time, then op/data pairs.
# Returns the new version, or -1 when Redis does not hold this writer's epoch (it restarted,
# was flushed, or another writer reset the history): the writer must write a full snapshot.
_DELTAS_LUA = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
for i = 4, #ARGV, 2 do
  v = v + 1
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], v .. '-0', 'op', ARGV[i], 'data', ARGV[i + 1],
    't', ARGV[3])
end
redis.call('SET', KEYS[1], v)
return v
"""
# KEYS: lock. ARGV: token, ttl ms. 1 = renewed, 2 = it had expired and was taken again,
# 0 = someone else holds it.
_RENEW_LUA = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not holder then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end
return 0
"""
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class SnapshotLost(RuntimeError):
    """Redis no longer holds this writer's history (restarted, flushed, or reset by another
    writer): the writer must write a full snapshot before any further delta."""


def cluster_name_check(cluster: str) -> str:
    """The cluster name, if it is safe inside a Redis key; ValueError naming the rule if not."""
    if type(cluster) is not str or not _NAME.fullmatch(cluster):
        raise ValueError(
            f"invalid cluster name {cluster!r}: use 1-63 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return cluster


@dataclasses.dataclass(frozen=True)
class StoreKeys:
    """The Redis keys of one cluster."""

    cluster: str

    def _key(self, suffix: str) -> str:
        return f"schedweb:{self.cluster}:{suffix}"

    @property
    def full(self) -> str:
        return self._key("snap:full")

    @property
    def version(self) -> str:
        return self._key("snap:version")

    @property
    def epoch(self) -> str:
        return self._key("snap:epoch")

    @property
    def events(self) -> str:
        return self._key("snap:events")

    @property
    def meta(self) -> str:
        return self._key("snap:meta")

    @property
    def lock(self) -> str:
        return self._key("watch:lock")

    @property
    def starting(self) -> str:
        return self._key("watch:starting")

    def all(self) -> list[str]:
        return [
            self.full,
            self.version,
            self.epoch,
            self.events,
            self.meta,
            self.lock,
            self.starting,
        ]


class SnapshotStore:
    """One cluster's keys on one Redis: the lock, the meta hash, and housekeeping. The writer
    and readers build on it."""

    def __init__(self, cluster: str, *, client: redis.Redis | None = None) -> None:
        self.cluster = cluster_name_check(cluster)
        self.keys = StoreKeys(cluster)
        self._client = client

    @property
    def client(self) -> redis.Redis:
        """The Redis client: the one given, else the process's (policies.redis)."""
        if self._client is None:
            from policies.redis import redis_client

            self._client = redis_client()
        return self._client

    # -- the watcher lock ------------------------------------------------------------------

    def lock_acquire(self, *, ttl: float) -> str | None:
        """A new token if the lock was free (now held for `ttl` seconds), else None."""
        token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        if self.client.set(self.keys.lock, token, nx=True, px=int(ttl * 1000)):
            return token
        return None

    def lock_renew(self, token: str, *, ttl: float) -> str:
        """ "held" (renewed), "retaken" (it had expired, e.g. Redis restarted) or "lost"."""
        result = self.client.eval(_RENEW_LUA, 1, self.keys.lock, token, int(ttl * 1000))
        return {1: "held", 2: "retaken"}.get(int(result), "lost")

    def lock_release(self, token: str) -> None:
        """Releases the lock if `token` still holds it."""
        self.client.eval(_RELEASE_LUA, 1, self.keys.lock, token)

    def lock_holder(self) -> str | None:
        """Who holds the lock (host:pid:random), if anyone."""
        value = self.client.get(self.keys.lock)
        return value.decode() if value is not None else None

    # -- status -----------------------------------------------------------------------------

    def meta_read(self) -> dict[str, str]:
        """The watcher's status hash (empty when no watcher ever wrote one)."""
        return decode_hash(self.client.hgetall(self.keys.meta))

    def meta_write(self, fields: Mapping[str, Any]) -> None:
        """Sets status fields (None -> "")."""
        if fields:
            self.client.hset(self.keys.meta, mapping=_encode_hash(fields))

    def clear(self) -> None:
        """Deletes every key of this cluster (tests, and an operator resetting a cluster)."""
        self.client.delete(*self.keys.all())


class SnapshotWriter:
    """The single writer of a cluster's snapshot (the watcher, holding the lock).

    `full(state, reset=True)` replaces the stored state (first write, a relist that changed
    much, Redis lost the data); `full(state, reset=False)` is a checkpoint of an unchanged
    version so that new readers start close to the head; `deltas([(op, data), ...])` appends
    changes, one version each, in one round trip per 500.
    """

    def __init__(
        self, store: SnapshotStore, *, maxlen: int = EVENTS_MAXLEN, pod_objects: bool = True
    ) -> None:
        self.store = store
        self.maxlen = maxlen
        # Pods' raw objects are kept: previews of a live pod read `pod.object`. Without them
        # the snapshot is a quarter of the size (to_bytes(pod_objects=False)).
        self.pod_objects = pod_objects
        self.epoch = ""
        self.version = 0
        self._deltas = store.client.register_script(_DELTAS_LUA)

    def adopt(self, *, epoch: str, version: int) -> None:
        """Continue an existing history (a watcher resuming what a previous one wrote)."""
        self.epoch, self.version = epoch, version

    def full(self, state: ClusterState, *, reset: bool) -> int:
        """Writes the whole state; returns its version (see the class docstring)."""
        if reset or not self.epoch:
            return self._reset(state)
        self._checkpoint(state)
        return self.version

    def _reset(self, state: ClusterState) -> int:
        keys, client = self.store.keys, self.store.client
        stored_epoch, stored_version = client.mget(keys.epoch, keys.version)
        stored_epoch = stored_epoch.decode() if stored_epoch is not None else ""
        # Same history when Redis still holds our epoch; otherwise start a new one, numbered
        # on from the highest version seen, so versions never go backwards for a reader.
        epoch = self.epoch if self.epoch and stored_epoch == self.epoch else uuid.uuid4().hex[:16]
        version = max(int(stored_version or 0), self.version) + 1
        state.version = version
        data = state.to_bytes(pod_objects=self.pod_objects)
        pipe = client.pipeline(transaction=True)
        if epoch != stored_epoch:
            pipe.delete(keys.events)
        _full_write(pipe, keys.full, data, version=version, epoch=epoch)
        pipe.set(keys.version, version)
        pipe.set(keys.epoch, epoch)
        pipe.xadd(
            keys.events,
            {"op": RESET, "data": b"", "t": repr(time.time())},
            id=f"{version}-0",
            maxlen=self.maxlen,
            approximate=True,
        )
        pipe.execute()
        self.epoch, self.version = epoch, version
        return version

    def _checkpoint(self, state: ClusterState) -> None:
        keys = self.store.keys
        state.version = self.version
        data = state.to_bytes(pod_objects=self.pod_objects)
        with self.store.client.pipeline(transaction=True) as pipe:
            pipe.watch(keys.epoch, keys.version)
            epoch, version = pipe.mget(keys.epoch, keys.version)
            if epoch is None or epoch.decode() != self.epoch or int(version or 0) != self.version:
                raise SnapshotLost("Redis no longer holds this snapshot's history")
            pipe.multi()
            _full_write(pipe, keys.full, data, version=self.version, epoch=self.epoch)
            try:
                pipe.execute()
            except redis.WatchError:
                raise SnapshotLost("the snapshot changed while a checkpoint was written") from None

    def deltas(self, batch: Iterable[tuple[str, bytes | str]]) -> int:
        """Appends changes (op, data) in order; returns the version after the last one.
        SnapshotLost when Redis no longer holds this writer's epoch."""
        if not self.epoch:
            raise SnapshotLost("no full snapshot written yet")
        keys = self.store.keys
        args: list[Any] = []
        for op, data in batch:
            args += (op, data)
            if len(args) >= 2 * _DELTA_BATCH:
                self._append(keys, args)
                args = []
        if args:
            self._append(keys, args)
        return self.version

    def delta(self, op: str, data: bytes | str) -> int:
        """One change (see deltas)."""
        return self.deltas([(op, data)])

    def _append(self, keys: StoreKeys, args: list[Any]) -> None:
        result = int(
            self._deltas(
                keys=[keys.version, keys.events, keys.epoch],
                args=[self.epoch, self.maxlen, repr(time.time()), *args],
            )
        )
        if result < 0:
            raise SnapshotLost(
                "Redis no longer holds this snapshot's history (restarted or flushed?)"
            )
        self.version = result

    def status(self, **fields: Any) -> None:
        """Updates the meta hash (status, error, heartbeat_at, counts...)."""
        self.store.meta_write(fields)


# -- helpers --------------------------------------------------------------------------------------


def _full_write(pipe: Any, key: str, data: bytes, *, version: int, epoch: str) -> None:
    """The whole state into the snap:full hash, in one transaction with the caller's commands:
    fields state, state.1, state.2... of at most FULL_CHUNK_BYTES each, cut at line ends, and
    chunks (their number). Redis refuses a value over 512 MB (proto-max-bulk-len), which a
    snapshot of 150 000 pods with their raw objects passes (issue 28: about 640 MB)."""
    chunks = _chunked(data, FULL_CHUNK_BYTES)
    pipe.delete(key)  # fewer chunks than last time: no field of the old ones left behind
    pipe.hset(
        key,
        mapping={
            "version": version,
            "epoch": epoch,
            "state": chunks[0],
            "chunks": len(chunks),
            "written_at": time.time(),
        },
    )
    for number, chunk in enumerate(chunks[1:], start=1):
        pipe.hset(key, f"state.{number}", chunk)  # one command each: no 1 GB query buffer


def _chunked(data: bytes, size: int) -> list[memoryview]:
    """`data` cut at the last line end within every `size` bytes (a longer line stays whole):
    views, no copy. ClusterState.from_bytes reads the pieces in order, each a run of whole
    lines. Under `size`, not just past it: Redis's allocator rounds a value just past 64 MB up
    to its 80 MB size class (the first sizing run at 50 000 pods held 289 MB for 213 MB)."""
    view, chunks, start = memoryview(data), [], 0
    while len(data) - start > size:
        end = data.rfind(b"\n", start, start + size)
        if end <= start:
            end = data.find(b"\n", start + size)
            if end < 0:
                break
        chunks.append(view[start:end])
        start = end + 1
    chunks.append(view[start:])
    return chunks


def decode_hash(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode(errors="replace") for k, v in raw.items()}


def _encode_hash(fields: Mapping[str, Any]) -> dict[str, str]:
    return {k: "" if v is None else str(v) for k, v in fields.items()}
