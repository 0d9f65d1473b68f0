"""An extender listener of a benchmark's own: `python -m schedweb.extender_server` as `make run`
configures it (mutual TLS, certificates from scripts/extender-certs.sh), over a kubectl file of
`objects` and a private Redis into which `policies` are published as the worker publishes them.
Used by bench/admission.py and bench/hostile.py; bench/extender.py runs the whole stack instead."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def bench_listener(
    workdir: Path,
    *,
    objects: list[dict],
    policies: dict[str, str],
    redis_values: dict[str, bytes] | None = None,
) -> Iterator[tuple[int, Path, object]]:
    """(port, tls directory, process) of a started listener (not yet known to answer: the
    caller waits for what it needs). `policies`: name -> document, each version 1 for
    schedulerName schedweb; `redis_values`: further keys the worker would have written."""
    from policies.publishing import ACTIVE_KEY, COUNTER_KEY
    from tests.e2e.stack import RedisServer
    from tests.harness.processes import ManagedProcess, free_ports
    from tests.listeners import listener_env, mtls_settings

    cluster_file = workdir / "cluster.json"
    cluster_file.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    tls = workdir / "tls"
    subprocess.run([str(ROOT / "scripts/extender-certs.sh"), str(tls)], check=True)
    redis = RedisServer(workdir / "redis").start()
    (port,) = free_ports(count=1)
    env = listener_env(
        workdir,
        redis_url=redis.url,
        SCHEDWEB_CLUSTER_SOURCE="file",
        SCHEDWEB_CLUSTER_FILE=str(cluster_file),
        SCHEDWEB_EXTENDER_PORT=str(port),
        SCHEDWEB_EXTENDER_WORKERS="1",
        SCHEDWEB_LOG_LEVEL="WARNING",
        **mtls_settings(tls),
    )
    listener = None
    try:
        import redis as redis_lib

        client = redis_lib.Redis.from_url(redis.url)
        for name, document in policies.items():
            entry = {
                "name": name,
                "version": 1,
                "document": document,
                "contentHash": hashlib.sha256(document.encode()).hexdigest(),
                "schedulerNames": ["schedweb"],
                "activatedAt": "2026-11-25T00:00:00+00:00",
            }
            client.hset(ACTIVE_KEY, name, orjson.dumps(entry))
        client.set(COUNTER_KEY, 1)
        for key, value in (redis_values or {}).items():
            client.set(key, value)
        listener = ManagedProcess(
            name="extender",
            argv=[Path(sys.executable), "-m", "schedweb.extender_server"],
            log_path=workdir / "extender.log",
            env=env,
            cwd=ROOT,
        )
        listener.start()
        yield port, tls, listener
    finally:
        if listener is not None:
            listener.stop(grace=10)
        redis.stop()
