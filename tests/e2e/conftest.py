"""End-to-end fixtures: an own kube-apiserver (its node set is the test's alone), the schedweb
stack as processes, and a stock kube-scheduler started with `manage.py schedulerconfig`."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness import resources
from tests.harness.controlplane import ControlPlane

from .stack import RedisServer, SchedwebStack

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def wait_until(
    check: Callable[[], object], *, timeout: float, interval: float = 0.1, what: str = "condition"
) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("e2e-plane")) as control_plane:
        yield control_plane


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("e2e-redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(request, plane, redis_server, tmp_path_factory) -> Iterator[SchedwebStack]:
    # The extender over mutual TLS, as `make run`; a module's STACK_ENV adds settings (bind).
    running = SchedwebStack(
        tmp_path_factory.mktemp("e2e-stack"),
        kubeconfig=plane.kubeconfig,
        redis=redis_server,
        extra_env=getattr(request.module, "STACK_ENV", None),
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()
        for log in ("web.log", "extender.log", "worker.log"):
            path: Path = running.workdir / log
            if path.exists():
                print(
                    f"--- {log} (tail)\n"
                    + "\n".join(path.read_text(errors="replace").splitlines()[-30:])
                )


def make_nodes(
    api, names: list[str], *, cpu: str = "8", memory: str = "32Gi", labels: dict | None = None
) -> None:
    for name in names:
        resources.node_create(
            api=api,
            manifest=resources.node_manifest(
                name=name, cpu=cpu, memory=memory, labels=labels or {}
            ),
        )


def wait_nodes_known(stack: SchedwebStack, names: list[str]) -> None:
    """Waits until every extender worker's snapshot holds the nodes `names`: the extender lets a
    node it has no data for pass with score 0 (failurePolicy Ignore), so a test that expects
    its verdicts on them waits for the snapshot to reach every worker, not for a time."""

    def version_listing_them() -> int:
        status, body = stack.request("GET", "/api/v1/cluster/nodes?limit=500")
        if status != 200 or not set(names) <= {n["name"] for n in body["results"]}:
            return 0
        return body["snapshot"]["version"]

    stack.wait_snapshot(wait_until(version_listing_them, timeout=60, what=f"nodes {names}"))


def create_pod(
    api,
    name: str,
    *,
    scheduler: str = "schedweb",
    namespace: str = "default",
    labels: dict | None = None,
    cpu: str = "100m",
    memory: str = "64Mi",
) -> dict:
    manifest = resources.pod_manifest(
        name=name,
        namespace=namespace,
        scheduler_name=scheduler,
        labels=labels or {},
        cpu=cpu,
        memory=memory,
    )
    return resources.pod_create(api=api, manifest=manifest)


def node_of(api, name: str, namespace: str = "default") -> str:
    return resources.pod_get(api=api, name=name, namespace=namespace)["spec"].get("nodeName", "")


def events_for(api, name: str, namespace: str = "default") -> list[dict]:
    listed = api.get(
        f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}"
    )
    return listed.get("items", [])


@contextlib.contextmanager
def watcher_paused(stack: SchedwebStack) -> Iterator[None]:
    """The Celery worker (the cluster's watcher) stopped, every process of it: schedweb's
    snapshot stays behind kube-scheduler until the block ends, however fast the push (give the
    stack a SCHEDWEB_SNAPSHOT_STALE_SECONDS longer than the pause)."""
    assert stack.worker is not None
    os.killpg(stack.worker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(stack.worker.pid, signal.SIGCONT)


def a_request_waits(stack: SchedwebStack) -> bool:
    """Some extender worker holds a request waiting for its snapshot (its /readyz)."""
    _, body = stack.extender_request("GET", "/readyz")
    return isinstance(body, dict) and body["extender"]["catchUp"]["waiting"] > 0
