"""What holds a snapshot's memory (issue 28): `python -m bench.memory_profile [NODES PODS] [--full]`.

A generated cluster (policies/cluster/demo.py, through JSON as from the API server) stored as the
watcher stores it (to_bytes), then loaded as an extender process loads it (lean; `--full`: as a
web or worker process, every raw object kept): the CPU time of the load, then the same load under
tracemalloc (what it holds after, its peak, the top allocation sites), and what the loaded state
holds by part of the views, each object counted once (a shared one under the first part that
reaches it). Not a suite of `make bench`: a profile for docs/perf.
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
import time
import tracemalloc
from collections import Counter

import orjson

MB = 1e6


def _deep_size(obj, seen: set[int]) -> int:
    """getsizeof of obj and everything it holds (dicts, lists, tuples), each object once."""
    total, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return total


def breakdown(state) -> Counter:
    """Bytes by part: the pod and node views' fields, the view dicts, the indexes' own dicts."""
    seen: set[int] = set()
    parts: Counter = Counter()
    for pod in state._pods.values():
        seen.add(id(pod))
        parts["pod: the view dict"] += sys.getsizeof(pod)
    for node in state._nodes.values():
        seen.add(id(node))
        parts["node: the view dict"] += sys.getsizeof(node)
    for pod in state._pods.values():
        for key, value in pod.items():
            parts[f"pod.{key}"] += _deep_size(value, seen)
    for node in state._nodes.values():
        for key, value in node.items():
            parts[f"node.{key}"] += _deep_size(value, seen)
    for name in ("_pods", "_live", "_by_ns", "_by_label", "_by_node"):
        index = getattr(state, name)
        parts["indexes (dicts and keys)"] += sys.getsizeof(index)
        for key, bucket in index.items():
            parts["indexes (dicts and keys)"] += _deep_size(key, seen)
            if name not in ("_pods", "_live"):  # buckets: dicts of uid -> view
                parts["indexes (dicts and keys)"] += sys.getsizeof(bucket)
                for uid in bucket:
                    parts["indexes (dicts and keys)"] += _deep_size(uid, seen)
    return parts


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    os.environ.setdefault("SCHEDWEB_SECRET_KEY", "bench-only-key")
    import django

    django.setup()
    from policies.cluster.demo import generate_cluster, generate_cluster_objects
    from policies.cluster.state import ClusterState, gc_paused

    numbers = [int(a) for a in argv if a.isdigit()]
    nodes, pods = (numbers + [5000, 50_000][len(numbers) :])[:2]
    lean = "--full" not in argv
    raw = orjson.dumps(generate_cluster(nodes, pods, seed=28))
    with gc_paused():
        node_objects, pod_objects = orjson.loads(raw)
    del raw
    objects = generate_cluster_objects(pod_objects)
    data = ClusterState.from_objects(node_objects, pod_objects, objects).to_bytes()
    del node_objects, pod_objects, objects
    gc.collect()
    options = {"lean": True} if lean else {}
    if lean and "lean" not in inspect.signature(ClusterState.from_bytes).parameters:
        options = {}  # a version without lean states: measured as it loads
    mode = "lean" if options else "full"
    print(f"{nodes} nodes x {pods} pods, stored: {len(data) / MB:.0f} MB; loaded {mode}")

    cpu = time.process_time()
    state = ClusterState.from_bytes(data, **options)
    print(f"  load: {time.process_time() - cpu:.2f} s CPU")
    del state
    gc.collect()

    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    state = ClusterState.from_bytes(data, **options)
    current, peak = tracemalloc.get_traced_memory()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    print(
        f"  tracemalloc: the load holds {current / MB:.0f} MB after, {peak / MB:.0f} MB at its"
        f" peak (besides the stored bytes); {current / pods:.0f} bytes a pod, nodes included"
    )
    print("  top allocation sites of what the load holds:")
    for stat in after.compare_to(before, "lineno")[:8]:
        frame = stat.traceback[0]
        where = f"{os.path.relpath(frame.filename)}:{frame.lineno}"
        print(f"    {stat.size_diff / MB:8.1f} MB  {stat.count_diff:9d} blocks  {where}")
    parts = breakdown(state)
    total = sum(parts.values())
    print(f"  what the state holds (getsizeof, each object once): {total / MB:.0f} MB")
    for part, size in parts.most_common(14):
        print(f"    {size / MB:8.1f} MB  {100 * size / total:5.1f}%  {part}")


if __name__ == "__main__":
    main(sys.argv[1:])
