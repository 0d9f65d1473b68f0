"""`python -m bench.sizing_worker MODE DIR`: one worker-side memory measurement for bench/sizing.py,
in a process of its own (Django set up as a Celery worker's pool process has it), printing JSON
with its resident memory now and at its peak (VmRSS, VmHWM), in MB.

    watch DIR   what the snapshot watcher does on its first sync (policies/cluster/watcher.py):
                the list responses (DIR/*.json, as the API server's pages decode) turned into a
                ClusterState (state_from_objects) and written whole to Redis (SnapshotWriter.full)
    rewrite DIR the same write again, as a new history (a watcher starting afresh after Redis lost
                the snapshot): every reader then loads the whole snapshot while it holds the old
    read DIR    what a task reading the snapshot does (the requeue sweep every 2 s, previews,
                gangs): SnapshotReader.load() of the cluster the watch mode wrote, then, once
                the parent has rewritten it (it prints "loaded" and waits for a line on stdin),
                the new one loaded while the old one is still held
    idle DIR    Django and schedweb's modules imported, nothing loaded: the process's floor
    generate DIR NODES PODS   writes the cluster's list responses to DIR (generate_cluster and
                the Namespaces, ReplicaSets and Services a real cluster has), in a process of
                its own so that the benchmark's stays small

SCHEDWEB_REDIS_URL and SCHEDWEB_CLUSTER_NAME say where the snapshot goes.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def generate(directory: Path, nodes: int, pods: int) -> None:
    import django
    import orjson

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    django.setup()

    from policies.cluster.demo import generate_cluster, generate_cluster_objects

    nodes_json, pods_json = generate_cluster(nodes, pods, seed=26)
    resources = {"Namespace": "namespaces", "ReplicaSet": "replicasets", "Service": "services"}
    by_resource: dict[str, list] = {}
    for obj in generate_cluster_objects(pods_json):
        by_resource.setdefault(resources[obj["kind"]], []).append(obj)
    (directory / "nodes.json").write_bytes(orjson.dumps(nodes_json))
    (directory / "pods.json").write_bytes(orjson.dumps(pods_json))
    (directory / "objects.json").write_bytes(orjson.dumps(by_resource))


def main(mode: str, directory: Path) -> dict[str, float]:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    django.setup()
    import orjson
    import redis
    from django.conf import settings

    from policies.cluster.reader import SnapshotReader
    from policies.cluster.store import SnapshotStore, SnapshotWriter
    from policies.cluster.watcher import state_from_objects

    cluster = settings.SCHEDWEB_CLUSTER_NAME
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=120)
    kept = None
    if mode in ("watch", "rewrite"):
        nodes = orjson.loads((directory / "nodes.json").read_bytes())
        pods = orjson.loads((directory / "pods.json").read_bytes())
        objects = orjson.loads((directory / "objects.json").read_bytes())
        state, _problems = state_from_objects(nodes, pods, objects)
        del nodes, pods, objects
        store = SnapshotStore(cluster, client=client)
        if mode == "watch":
            store.clear()
        SnapshotWriter(store).full(state, reset=True)
        store.meta_write({"status": "ok", "heartbeat_at": time.time()})
        kept = state  # the watcher keeps its state and follows the watches with it
    elif mode == "read":
        reader = SnapshotReader(cluster, client=client)  # a process keeps its reader (reader_for)
        kept = (reader, reader.load())
        # The parent rewrites the snapshot as a new history, then says "go": the reader loads
        # it whole while its tasks may still hold the old one.
        print("loaded", flush=True)
        sys.stdin.readline()
        kept = (reader, kept[1], reader.load())
    elif mode != "idle":
        raise SystemExit(f"unknown mode {mode!r}: watch, read or idle")
    gc.collect()
    result = {"rss_mb": _status("VmRSS"), "peak_mb": _status("VmHWM")}
    del kept
    return result


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
