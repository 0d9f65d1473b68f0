"""One interface over the three cluster sources: `cluster_source(name).snapshot()`.

    demo   the bundled synthetic cluster, built once per process
    file   a kubectl JSON/YAML file, loaded again only when its mtime or size changes
    live   the watcher's snapshot in Redis through a process-wide SnapshotReader (one round
           trip when nothing changed). When Redis holds no snapshot and no watcher has ever
           reported (a one-shot `manage.py evaluate --cluster live`, or no Celery running),
           or Redis is unreachable, the cluster is listed directly from the API server and
           kept for a few seconds. Once a watcher has reported, its message stands instead
           ("unauthorized: ...") and nothing is listed behind its back.

Every caller but the extender loads clusters with `cluster_load(name)`, `cluster_default()` (the
configured source), `cluster_for(key=)` (the pages' choice) or `cluster_from_text()` (a test
case's own cluster); the extender uses `live_snapshots()` (no I/O in its requests: its own
thread refreshes).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import redis

from policies.cluster.demo import demo_state
from policies.cluster.files import ClusterFileError, load_cluster_bytes, load_cluster_file
from policies.cluster.loaded import LoadedCluster
from policies.cluster.reader import SnapshotReader, reader_for
from policies.cluster.store import cluster_name_check
from policies.errors import ClusterUnavailable, InputError

log = logging.getLogger(__name__)

DIRECT_TTL = 5.0  # seconds a direct listing is reused
_FILE_CACHE_MAX = 8


class ClusterSource(Protocol):
    """A place cluster state comes from."""

    name: str

    def snapshot(self) -> LoadedCluster:
        """The current snapshot, or ClusterUnavailable / InputError saying why there is none."""
        ...


class DemoSource:
    """The bundled demo cluster (deterministic), frozen once."""

    name = "demo"

    def __init__(self) -> None:
        self._loaded: LoadedCluster | None = None
        self._lock = threading.Lock()

    def snapshot(self) -> LoadedCluster:
        with self._lock:
            if self._loaded is None:
                self._loaded = LoadedCluster(
                    state=demo_state().freeze(), source="demo", label="demo", version=1
                )
        return self._loaded


class FileSource:
    """A kubectl JSON/YAML file; reloaded when it changes on disk."""

    def __init__(self, path: str) -> None:
        self.name = path
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._loaded: LoadedCluster | None = None
        self._loads = 0
        self._lock = threading.Lock()

    def snapshot(self) -> LoadedCluster:
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if self._loaded is None or stamp != self._stamp:
                try:
                    state = load_cluster_file(self.path)
                except ClusterFileError as exc:
                    raise InputError(str(exc)) from None
                self._loads += 1
                self._stamp = stamp
                self._loaded = LoadedCluster(
                    state=state.freeze(),
                    source="file",
                    label=f"file {self.path}",
                    version=self._loads,
                    updated_at=stat.st_mtime,
                    details={"path": str(self.path)},
                )
            loaded = self._loaded
        loaded.age_seconds = max(0.0, time.time() - stat.st_mtime)
        return loaded


class LiveSource:
    """The watcher's snapshot in Redis (see the module docstring for the direct fallback)."""

    name = "live"

    def __init__(
        self, cluster: str, *, reader: SnapshotReader | None = None, direct_fallback: bool = True
    ) -> None:
        self.cluster = cluster_name_check(cluster)
        self._reader = reader
        self.direct_fallback = direct_fallback
        self._direct: tuple[float, LoadedCluster] | None = None
        self._direct_lock = threading.Lock()

    @property
    def reader(self) -> SnapshotReader:
        if self._reader is None:
            self._reader = reader_for(self.cluster)
        return self._reader

    def snapshot(self) -> LoadedCluster:
        reader = self.reader
        try:
            return reader.load()
        except ClusterUnavailable:
            redis_down = reader.failing
            if not self.direct_fallback or (reader.meta and not redis_down):
                raise
        return self._list_directly()

    def _list_directly(self) -> LoadedCluster:
        """Lists the API server (one-shot use without a watcher); kept DIRECT_TTL seconds."""
        from policies.cluster.live import OBJECT_RESOURCES, KubeError, LiveClient
        from policies.cluster.watcher import state_from_objects

        with self._direct_lock:
            if self._direct is not None and time.monotonic() - self._direct[0] < DIRECT_TTL:
                return self._direct[1]
            client = LiveClient.from_settings()
            try:
                nodes = client.list_nodes()
                pods = client.list_pods()
                objects = {kind: client.list(kind).items for kind in OBJECT_RESOURCES}
            except KubeError as exc:
                raise ClusterUnavailable(
                    f"no snapshot of cluster {self.cluster} in Redis, and listing it directly"
                    f" failed: {exc}"
                ) from None
            state, problems = state_from_objects(nodes.items, pods.items, objects)
            for problem in problems[:5]:
                log.warning("live cluster %s: skipped an object: %s", self.cluster, problem)
            loaded = LoadedCluster(
                state=state.freeze(),
                source="live",
                label=f"live {self.cluster} (listed directly: no watcher snapshot in Redis)",
                version=0,
                age_seconds=0.0,
                updated_at=time.time(),
                details={"cluster": self.cluster, "direct": "true", "server": client.server},
            )
            self._direct = (time.monotonic(), loaded)
            return loaded


class LiveSnapshots:
    """The extender's view of the live snapshot: `refresh()` and `follow()` (what a blocking
    XREAD of the events stream pushed) from its background thread, `current()` in requests (no
    I/O; an in-place reader's state is read under `serve_lock`). Redis errors never propagate
    (an extender must keep answering): they are recorded on the reader, which keeps the last
    snapshot and marks it stale after the limit, and in `last_error`."""

    def __init__(self, reader: SnapshotReader) -> None:
        self.reader = reader
        self.serve_lock = reader.serve_lock
        self.last_error = ""

    def refresh(self) -> bool:
        """True if the snapshot changed; False if not, or if Redis could not be read."""
        return self._guarded(self.reader.refresh)

    def follow(self, entries: list) -> bool:
        """Applies pushed entries of the events stream; True if the snapshot changed."""
        return self._guarded(self.reader.follow, entries)

    def follow_from(self) -> str | None:
        """The events stream id to read after (None: no state yet; refresh() loads it)."""
        return self.reader.follow_from()

    def _guarded(self, call, *args) -> bool:
        try:
            changed = call(*args)
        except redis.RedisError as exc:
            self.reader.note_error(exc)
            self.last_error = f"redis: {exc}"
            return False
        except Exception as exc:  # a bad snapshot: keep the last one, say why
            log.exception(
                "live snapshot of %s could not be brought up to date", self.reader.cluster
            )
            self.last_error = f"snapshot: {exc}"
            return False
        self.last_error = ""
        return changed

    def current(self) -> LoadedCluster | None:
        return self.reader.current


_demo = DemoSource()
_files: OrderedDict[str, FileSource] = OrderedDict()
_live: dict[str, LiveSource] = {}
_registry_lock = threading.Lock()


def cluster_source(name: str) -> ClusterSource:
    """`demo`, `live` (the configured cluster, SCHEDWEB_CLUSTER_NAME) or a file path."""
    if name == "demo":
        return _demo
    if name == "live":
        from django.conf import settings

        cluster = settings.SCHEDWEB_CLUSTER_NAME
        with _registry_lock:
            source = _live.get(cluster)
            if source is None:
                source = _live[cluster] = LiveSource(cluster)
        return source
    if not name or "\x00" in name:
        raise InputError("the cluster source must be demo, live or the path of a kubectl JSON file")
    path = os.path.abspath(name)
    with _registry_lock:
        source = _files.get(path)
        if source is None:
            source = _files[path] = FileSource(name)
            while len(_files) > _FILE_CACHE_MAX:
                _files.popitem(last=False)
        else:
            _files.move_to_end(path)
    return source


def live_snapshots(
    cluster: str | None = None,
    *,
    in_place: bool = False,
    on_change: Callable[[int], None] | None = None,
    lean: bool = False,
    drop_before_load: bool = False,
) -> LiveSnapshots:
    """A fresh reader of the live snapshot for a process that refreshes it itself (the
    extender: `in_place`, `lean` and `drop_before_load`, see SnapshotReader)."""
    if cluster is None:
        from django.conf import settings

        cluster = settings.SCHEDWEB_CLUSTER_NAME
    return LiveSnapshots(
        SnapshotReader(
            cluster_name_check(cluster),
            in_place=in_place,
            on_change=on_change,
            lean=lean,
            drop_before_load=drop_before_load,
        )
    )


# --- loading, for every caller of the engine but the extender ------------------------------------


def cluster_load(source: str) -> LoadedCluster:
    """`demo`, `live` (the watcher's snapshot in Redis) or the path of a kubectl JSON/YAML file.
    InputError for an unusable file, ClusterUnavailable when live has no snapshot."""
    return cluster_source(source).snapshot()


def cluster_default() -> LoadedCluster:
    """The configured cluster source (SCHEDWEB_CLUSTER_SOURCE)."""
    from django.conf import settings

    source = settings.SCHEDWEB_CLUSTER_SOURCE
    if source == "file":
        return cluster_load(str(settings.SCHEDWEB_CLUSTER_FILE))
    return cluster_load(source)


CLUSTER_KEYS = ("", "demo")  # the pages' choice: "" = the configured source, or the demo


def cluster_for(*, key: str) -> LoadedCluster:
    """The configured cluster source ("") or the bundled demo cluster ("demo")."""
    if key == "demo":
        return cluster_load("demo")
    return cluster_default()


def cluster_from_text(text: str) -> LoadedCluster:
    """A cluster given inline (a test case's kubectl JSON/YAML)."""
    return cluster_from_bytes(text.encode(), name="the test case's cluster", source="inline")


def cluster_from_bytes(data: bytes, *, name: str, source: str = "file") -> LoadedCluster:
    """A cluster from kubectl JSON/YAML bytes already read (a test case's file); `name` stands
    for it in messages. InputError when unusable."""
    try:
        state = load_cluster_bytes(data, name=name)
    except ClusterFileError as exc:
        raise InputError(str(exc)) from None
    label = "inline" if source == "inline" else f"file {name}"
    return LoadedCluster(state=state.freeze(), source=source, label=label)
