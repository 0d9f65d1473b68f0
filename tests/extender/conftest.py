"""Extender fixtures: a fresh runtime on an isolated Redis database, policies published into it,
and request bodies shaped exactly as Go's encoding/json writes ExtenderArgs."""

from __future__ import annotations

import copy
import hashlib
import threading
from pathlib import Path

import orjson
import pytest

from policies.cluster.demo import demo_objects
from policies.extender.runtime import reset_runtime, runtime
from policies.publishing import active_entries_write
from tests.redisdb import redis_database

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


@pytest.fixture
def extender_redis(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    with redis_database(settings, 12) as client:
        reset_runtime()
        yield client
        reset_runtime()


# A policy whose answer depends on the snapshot's pods: it fits by CPU left after them.
ROOM = """\
name: room
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: fits
    expression: node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu
scores:
  - name: free
    expression: (node.allocatable.cpu - node.requested.cpu) * 100 / node.allocatable.cpu
"""


def active_entry(document: str, version: int) -> dict:
    """One entry of the published set, as the distribution task writes it."""
    import yaml

    parsed = yaml.safe_load(document)
    return {
        "name": parsed["name"],
        "version": version,
        "document": document,
        "contentHash": hashlib.sha256(document.encode()).hexdigest(),
        "schedulerNames": parsed["schedulerNames"],
        "activatedAt": "2026-11-22T00:00:00+00:00",
    }


class Published:
    """Publishes policy documents straight into Redis (as the distribution task does)."""

    def __init__(self, client) -> None:
        self.client = client
        self.versions: dict[str, int] = {}

    def __call__(self, *documents: str) -> None:
        import yaml

        entries = []
        for text in documents:
            name = yaml.safe_load(text)["name"]
            self.versions[name] = self.versions.get(name, 0) + 1
            entries.append(active_entry(text, self.versions[name]))
        active_entries_write(entries)
        runtime().registry.refresh_from_redis()  # what the background thread does when told


@pytest.fixture
def publish(extender_redis) -> Published:
    return Published(extender_redis)


def runtime_by_hand():
    """The process's runtime with its background thread stopped, its last round over: the test
    does that thread's work itself (flushing rejections, taking sampled decisions, reading the
    queue classes), and no round of the thread's, every 100 ms, takes or undoes part of it."""
    state = runtime()
    state.close()
    state._thread.join(60)
    assert not state._thread.is_alive(), "the runtime's thread did not stop"
    return state


@pytest.fixture
def queries_anywhere(monkeypatch) -> list[str]:
    """The SQL of every query any thread runs while the test does, the runtime's refresh thread
    excepted (its flushes are off the request path). django_assert_num_queries counts only the
    calling thread's connection; the ASGI entry answers in an event loop's thread or a worker's.
    """
    from django.db.backends.utils import CursorWrapper

    seen: list[str] = []
    execute = CursorWrapper._execute_with_wrappers

    def counted(self, sql, params, many, executor):
        if threading.current_thread().name != "schedweb-extender-refresh":
            seen.append(sql)
        return execute(self, sql, params, many, executor)

    monkeypatch.setattr(CursorWrapper, "_execute_with_wrappers", counted)
    return seen


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


def go_pod(
    name: str = "web-1",
    *,
    scheduler: str = "schedweb",
    cpu: str = "100m",
    memory: str = "64Mi",
    labels=None,
    uid: str | None = None,
) -> dict:
    """A Pod as the scheduler's informer holds it (defaults filled in, no TypeMeta)."""
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or hashlib.md5(name.encode()).hexdigest(),
            "resourceVersion": "123456",
            "creationTimestamp": "2026-11-22T00:00:00Z",
            "labels": labels or {"app": "web"},
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "schedulerName": scheduler,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerOrEqual",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def demo_node_objects() -> list[dict]:
    return copy.deepcopy(demo_objects()[0])


def args_body(pod: dict, names: list[str] | None = None, *, full: bool = False) -> bytes:
    """ExtenderArgs with nodeCacheCapable true (names) or false (full Node objects)."""
    if full:
        nodes = demo_node_objects()
        if names is not None:
            nodes = [n for n in nodes if n["metadata"]["name"] in names]
        return orjson.dumps(
            {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
        )
    if names is None:
        names = [n["metadata"]["name"] for n in demo_node_objects()]
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
