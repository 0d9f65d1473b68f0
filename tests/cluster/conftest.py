"""Fixtures for the live-cluster tests: an isolated Redis database, unique names, a private
redis-server that tests may kill, watchers run in threads, and a polling wait.

Redis: the shared test instance (SCHEDWEB_REDIS_URL, started by scripts/test.sh), database 13,
with a unique cluster name per test (its keys are deleted afterwards). The Redis-restart test
starts its own redis-server on a free 127.0.0.1 port instead.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from policies.cluster.live import LiveClient
from policies.cluster.reader import SnapshotReader
from policies.cluster.store import SnapshotStore
from policies.cluster.watcher import ClusterWatcher, WatchResult
from policies.redis import redis_client
from tests.harness.controlplane import ControlPlane
from tests.harness.processes import ManagedProcess, free_ports

SHARED_REDIS = os.environ.get("SCHEDWEB_REDIS_URL", "redis://127.0.0.1:6390/0")
LIVE_DB_URL = SHARED_REDIS.rsplit("/", 1)[0] + "/13"


def wait_until(check: Callable[[], Any], *, timeout: float = 60.0, what: str = "condition") -> Any:
    """Polls `check` every 10 ms until it returns something truthy; that value, or a failure
    naming `what` (never a fixed sleep). The limit only ends a wait that failed: generous, since
    a loaded machine stretches every step and a condition that comes early costs nothing; how
    fast changes arrive is measured by `make bench` (bench/snapshot.py), not here."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except (AssertionError, redis.RedisError, KeyError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            extra = f" (last error: {last_error})" if last_error else ""
            pytest.fail(f"{what} not reached within {timeout} s{extra}")
        time.sleep(0.01)


@pytest.fixture
def live_redis(settings) -> Iterator[redis.Redis]:
    """The process's Redis client pointed at database 13 of the shared test Redis."""
    settings.REDIS_URL = LIVE_DB_URL
    redis_client.cache_clear()
    client = redis_client()
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(
            f"no Redis at {LIVE_DB_URL}: run `scripts/services.sh redis 6390` (make test does)",
            pytrace=False,
        )
    yield client
    redis_client.cache_clear()


@pytest.fixture
def cluster_name(live_redis) -> Iterator[str]:
    """A cluster name no other test uses; its keys are deleted afterwards."""
    name = f"t-{secrets.token_hex(4)}"
    yield name
    SnapshotStore(name, client=live_redis).clear()


@pytest.fixture
def names() -> Callable[[str], str]:
    """Unique Kubernetes object names on the shared control plane: names("node") -> live-ab12cd-node."""
    prefix = f"live-{secrets.token_hex(3)}"
    return lambda what: f"{prefix}-{what}"


class RunningWatcher:
    """A ClusterWatcher running in a thread; stop() joins it and returns its result."""

    def __init__(self, watcher: ClusterWatcher, *, seconds: float = 120.0) -> None:
        self.watcher = watcher
        self.result: WatchResult | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(seconds,), daemon=True)
        self._thread.start()

    def _run(self, seconds: float) -> None:
        try:
            self.result = self.watcher.run(seconds=seconds)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def stop(self) -> WatchResult:
        self.watcher.stop()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the watcher did not stop within 60 s"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@pytest.fixture
def run_watcher() -> Iterator[Callable[..., RunningWatcher]]:
    """Starts watchers in threads: run_watcher(client=..., store=..., **options), or
    run_watcher(watcher=w) to run an existing one again; all are stopped at the end."""
    started: list[RunningWatcher] = []

    def start(
        *,
        client: LiveClient | None = None,
        store: SnapshotStore | None = None,
        watcher: ClusterWatcher | None = None,
        seconds: float = 120.0,
        **options: Any,
    ) -> RunningWatcher:
        if watcher is None:
            assert client is not None and store is not None
            options.setdefault("backoff_cap", 2.0)  # tests wait for recoveries: retry quickly
            watcher = ClusterWatcher(client=client, store=store, **options)
        running = RunningWatcher(watcher, seconds=seconds)
        started.append(running)
        return running

    yield start
    for running in started:
        with contextlib.suppress(BaseException):
            running.stop()


def synced_reader(store: SnapshotStore, *, timeout: float = 60.0, **options: Any) -> SnapshotReader:
    """A reader of `store` once a snapshot exists."""
    reader = SnapshotReader(store.cluster, client=store.client, **options)

    def loaded() -> bool:
        reader.refresh()
        return reader.current is not None

    wait_until(loaded, timeout=timeout, what=f"a snapshot of {store.cluster}")
    return reader


def closed_port_kubeconfig(control_plane: ControlPlane, directory: Path) -> Path:
    """A kubeconfig for https://127.0.0.1:<a port nobody listens on>, otherwise valid."""
    (port,) = free_ports(count=1)
    source = control_plane.kubeconfig.read_text()
    path = directory / "kubeconfig-closed-port"
    path.write_text(source.replace(control_plane.url, f"https://127.0.0.1:{port}"))
    return path


class PrivateRedis:
    """A redis-server of our own on a free 127.0.0.1 port, that a test may stop and start."""

    def __init__(self, workdir: Path) -> None:
        (self.port,) = free_ports(count=1)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self._process: ManagedProcess | None = None

    def start(self) -> None:
        self._process = ManagedProcess(
            name="redis-server",
            argv=[
                "/usr/bin/redis-server",
                *("--bind", "127.0.0.1", "--port", str(self.port)),
                *("--save", "", "--appendonly", "no", "--dir", str(self.workdir)),
            ],
            log_path=self.workdir / "redis.log",
        )
        self._process.start()
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        self._process.wait_ready(check=lambda: bool(probe.ping()), timeout=60, what="PING")
        probe.close()

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop(grace=5)
            self._process = None

    def client(self) -> redis.Redis:
        """A client with the product's short timeouts (policies.redis)."""
        return redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=1.0)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of the test's own (the shared one must not be restarted or stopped)."""
    with ControlPlane(tmp_path_factory.mktemp("private-plane")) as plane:
        yield plane


def apiserver_stop(plane: ControlPlane) -> None:
    """Stops kube-apiserver alone, at once (SIGKILL after 1 s: a graceful stop waits ~10 s for
    open watches). Relies on ControlPlane internals, like apiserver_restart."""
    plane._apiserver.stop(grace=1.0)  # type: ignore[union-attr]


def apiserver_restart(plane: ControlPlane) -> None:
    """Restarts only kube-apiserver (etcd keeps the data): its watch cache starts again at the
    current revision, so a watch from an older resourceVersion gets 410 Gone. Relies on
    ControlPlane internals (no public restart exists)."""
    etcd_url = next(a for a in plane._etcd.argv if a.startswith("--listen-client-urls="))  # type: ignore[union-attr]
    plane._apiserver.stop()  # type: ignore[union-attr]
    plane._start_apiserver(
        port=int(plane.url.rsplit(":", 1)[1]),
        etcd_port=int(etcd_url.rsplit(":", 1)[1]),
        tokens=plane.workdir / "tokens.csv",
    )


@pytest.fixture
def viewer(db):
    """An API client (token) and a browser client (session) for a user with the viewer role."""
    from django.test import Client

    from tests.conftest import make_user, token_client

    user = make_user("cluster-viewer", "viewer")
    browser = Client()
    browser.force_login(user)
    return SimpleNamespace(api=token_client(user), browser=browser, user=user)


@pytest.fixture
def live_settings(settings, cluster_name):
    """Settings for the live source on this test's cluster; returns a setter for the kubeconfig."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_CLUSTER_NAME = cluster_name

    def use(kubeconfig: Path | None) -> None:
        settings.SCHEDWEB_KUBECONFIG = kubeconfig

    use(None)
    return use
