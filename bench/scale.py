"""Scale (issue 28): 5000 nodes with 5000, 50 000 and 150 000 generated pods, in this process.

What load does not distort is measured (CPU time of this thread, sizes), with wall time beside it
for a quiet machine:
1. build: the watcher's state from API JSON (ClusterState.from_objects), its write to Redis
   (to_bytes: MB, CPU), and an extender process's load of those bytes (ClusterState.from_bytes
   with lean=True, as SnapshotReader(lean=True) loads; issue 28 target: at most 10 s at 150 000
   pods);
2. updates, as an extender process's reader applies them (reader._decode, then reader._apply on
   its in-place lean state): a pending pod bound to a node (the pod's JSON as the watcher writes
   the delta) and a node's label changed, CPU per update, median and p99; the ratio of the
   largest cluster's median to the smallest's (target: at most 1.5);
3. the preview with kube-scheduler's model (evaluation.preview_run, the bench policy) of a
   pending pod over the web's full state: the first one over a snapshot (the model's index of
   the existing pods built) and the median of the next ones (target: at most 500 ms), then the
   median over snapshots that each follow 100 changed pods, as a live cluster's previews do (the
   model's view moved by the changes, policies/schedmodel/plugins.py Existing.moved).

The memory of every process (the extender's listener and a child it forks for a large body, the
watcher, a reader) is the sizing suite's (bench/sizing.py, which measures 5000 x 150 000 too);
the time from a binding to every extender process is the push suite's (bench/push.py).

SCHEDWEB_BENCH_SCALE="5000x5000,5000x50000,5000x150000" chooses the sizes (nodes x pods; the
update ratio compares the first with the last).
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from functools import partial

import orjson

from .engine import POLICY, _pods

SIZES = [(5000, 5_000), (5000, 50_000), (5000, 150_000)]
UPDATES = 1000
NODE_UPDATES = 300
PREVIEWS = 5
CHANGES_PER_PREVIEW = 100  # pods changed between two previews over a live cluster's snapshots
TARGET_LOAD_S = 10.0
TARGET_UPDATE_RATIO = 1.5
TARGET_PREVIEW_S = 0.5


def sizes_from_env() -> list[tuple[int, int]]:
    raw = os.environ.get("SCHEDWEB_BENCH_SCALE", "")
    if not raw:
        return list(SIZES)
    return [tuple(int(n) for n in part.split("x")) for part in raw.split(",")]  # type: ignore[misc]


def _timed(action):
    """(result, CPU seconds of this thread, wall seconds) of action()."""
    gc.collect()
    cpu, wall = time.thread_time(), time.perf_counter()
    result = action()
    return result, time.thread_time() - cpu, time.perf_counter() - wall


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _updates(state, pending: list[dict], node_objects: list[dict]) -> dict[str, list[float]]:
    """CPU seconds per applied update, as the in-place reader applies a delta."""
    from policies.cluster.reader import _apply, _decode
    from policies.cluster.store import NODE, POD

    rng = random.Random(28)
    names = [n["metadata"]["name"] for n in node_objects]
    binds = []
    for i in range(UPDATES):  # new pending pods (not timed), then each bound (timed)
        obj = orjson.loads(orjson.dumps(pending[i % len(pending)]))
        obj["metadata"] |= {"uid": f"scale-{i}", "name": f"scale-{i}"}
        obj["metadata"]["resourceVersion"] = str(90_000_000 + i)
        _apply(state, POD, obj)
        obj["spec"]["nodeName"] = names[rng.randrange(len(names))]
        obj["metadata"]["resourceVersion"] = str(91_000_000 + i)
        binds.append(orjson.dumps(obj))
    labels = []
    for i in range(NODE_UPDATES):
        obj = orjson.loads(orjson.dumps(node_objects[rng.randrange(len(node_objects))]))
        obj["metadata"].setdefault("labels", {})["scale/turn"] = str(i)
        labels.append(orjson.dumps(obj))
    out: dict[str, list[float]] = {"bind": [], "label": []}
    clock = time.thread_time
    gc.collect()
    for kind, op, deltas in (("bind", POD, binds), ("label", NODE, labels)):
        for data in deltas:
            started = clock()
            _apply(state, op, _decode(op, data))
            out[kind].append(clock() - started)
    return out


def _preview(live, changed: list[dict]) -> dict[str, float]:
    """Previews over a snapshot of `live`: the first (the model's view of the bound pods built),
    then PREVIEWS more, then PREVIEWS over snapshots that follow CHANGES_PER_PREVIEW changes each
    (`changed`: raw bound pods, applied again with a label more), as a live cluster's do."""
    from policies.cluster.loaded import LoadedCluster
    from policies.evaluation import preview_run
    from policies.schedmodel.profile import profile_default

    state = live.freeze()
    cluster = LoadedCluster(state=state, source="file", label="bench scale")
    pods = _pods(state)
    profile = profile_default()
    _, first_cpu, first_wall = _timed(
        lambda: preview_run(document=POLICY, pod=pods[0], cluster=cluster, profile=profile)
    )
    cpu, wall = [], []
    for i in range(PREVIEWS):
        _, c, w = _timed(
            lambda i=i: preview_run(
                document=POLICY, pod=pods[(i + 1) % len(pods)], cluster=cluster, profile=profile
            )
        )
        cpu.append(c)
        wall.append(w)
    after_cpu, after_wall = [], []
    for i in range(PREVIEWS):
        for obj in changed[i * CHANGES_PER_PREVIEW : (i + 1) * CHANGES_PER_PREVIEW]:
            obj["metadata"].setdefault("labels", {})["bench-changed"] = str(i)
            live.apply_pod(obj)
        after = LoadedCluster(state=live.freeze(), source="file", label="bench scale")
        _, c, w = _timed(
            lambda i=i, after=after: preview_run(
                document=POLICY, pod=pods[i % len(pods)], cluster=after, profile=profile
            )
        )
        after_cpu.append(c)
        after_wall.append(w)
    return {
        "first_cpu": first_cpu,
        "first_wall": first_wall,
        "cpu": statistics.median(cpu),
        "wall": statistics.median(wall),
        "after_cpu": statistics.median(after_cpu),
        "after_wall": statistics.median(after_wall),
    }


def measure(nodes: int, pods: int) -> dict[str, float]:
    """One size: build, write, lean load, updates, preview (see the module docstring)."""
    from policies.cluster.demo import generate_cluster, generate_cluster_objects
    from policies.cluster.state import ClusterState, gc_paused

    raw = orjson.dumps(generate_cluster(nodes, pods, seed=28))
    with gc_paused():  # through JSON, as from the API server: no strings shared
        node_objects, pod_objects = orjson.loads(raw)
    del raw
    objects = generate_cluster_objects(pod_objects)
    pending = [p for p in pod_objects if p["status"]["phase"] == "Pending"]
    state, build_cpu, build_wall = _timed(
        partial(ClusterState.from_objects, node_objects, pod_objects, objects)
    )
    changed = [p for p in pod_objects if p["spec"].get("nodeName")][
        : PREVIEWS * CHANGES_PER_PREVIEW
    ]
    del pod_objects
    data, write_cpu, _ = _timed(state.to_bytes)
    preview = _preview(state, changed)
    del state
    lean, load_cpu, load_wall = _timed(partial(ClusterState.from_bytes, data, lean=True))
    size_mb = len(data) / 1e6
    del data
    updates = _updates(lean, pending, node_objects)
    verdict = "ok" if load_wall <= TARGET_LOAD_S else "OVER TARGET"
    print(
        f"  {nodes} nodes x {pods:6d} pods: watcher's build from API JSON {build_cpu:6.2f} s CPU"
        f" ({build_wall:.2f} s wall); write {size_mb:.0f} MB in {write_cpu:.2f} s CPU;"
        f" an extender process's lean load {load_cpu:.2f} s CPU ({load_wall:.2f} s wall;"
        f" target <= {TARGET_LOAD_S:.0f} s: {verdict})"
    )
    for kind, label in (("bind", "a pod bound"), ("label", "a node's label changed")):
        samples = updates[kind]
        print(
            f"    update, {label:22s} CPU median {statistics.median(samples) * 1e3:.3f} ms"
            f"  p99 {_p99(samples) * 1e3:.3f} ms  (n={len(samples)})"
        )
    verdict = "ok" if preview["wall"] <= TARGET_PREVIEW_S else "OVER TARGET"
    print(
        f"    preview with the scheduler model: first over the snapshot {preview['first_cpu']:.3f}"
        f" s CPU ({preview['first_wall']:.3f} s wall), then median {preview['cpu']:.3f} s CPU"
        f" ({preview['wall']:.3f} s wall; target <= {TARGET_PREVIEW_S:.1f} s: {verdict});"
        f" after {CHANGES_PER_PREVIEW} pods changed, median {preview['after_cpu']:.3f} s CPU"
        f" ({preview['after_wall']:.3f} s wall)"
    )
    return {
        "build_cpu_s": build_cpu,
        "write_mb": size_mb,
        "write_cpu_s": write_cpu,
        "load_cpu_s": load_cpu,
        "load_wall_s": load_wall,
        "bind_cpu_median_ms": statistics.median(updates["bind"]) * 1e3,
        "bind_cpu_p99_ms": _p99(updates["bind"]) * 1e3,
        "label_cpu_median_ms": statistics.median(updates["label"]) * 1e3,
        "preview_first_cpu_s": preview["first_cpu"],
        "preview_cpu_s": preview["cpu"],
        "preview_wall_s": preview["wall"],
        "preview_after_changes_cpu_s": preview["after_cpu"],
    }


def run() -> dict[str, float]:
    sizes = sizes_from_env()
    print(
        "== scale: snapshot build, updates and preview by cluster size, in process (CPU time of"
        " this thread; wall beside it)"
    )
    rows = {}
    for nodes, pods in sizes:
        rows[nodes, pods] = measure(nodes, pods)
        gc.collect()
    results = {f"scale_{n}_{p}_{k}": v for (n, p), row in rows.items() for k, v in row.items()}
    if len(rows) >= 2:
        small, large = rows[sizes[0]], rows[sizes[-1]]
        for kind in ("bind", "label"):
            ratio = large[f"{kind}_cpu_median_ms"] / small[f"{kind}_cpu_median_ms"]
            verdict = "ok" if ratio <= TARGET_UPDATE_RATIO else "OVER TARGET"
            print(
                f"  CPU per update ({kind}), {sizes[-1][1]} pods over {sizes[0][1]} pods:"
                f" {ratio:.2f}x (target <= {TARGET_UPDATE_RATIO}: {verdict})"
            )
            results[f"scale_{kind}_cpu_ratio"] = ratio
    return results
