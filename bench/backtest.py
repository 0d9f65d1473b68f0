"""Backtest benchmark: what judging one recorded pod costs, with and without taking the pod out
of the snapshot first (policies/cluster/exclude.py), at 500 and 5000 nodes (2 pods per node).

Per pod: kube-scheduler's model cycle with bin-packing served (policies/backtest/run.py `judge`);
with exclusion, also deleting the pod from the mutable copy, freezing it and putting it back,
and deriving the model's index of bound pods for that snapshot from the full one's
(run.cluster_without; rebuilt from scratch instead, a pod cost 20x: 90 ms against 4.3 ms at 500
nodes, 1.3 s against 53 ms at 5000). The copy itself is built once per backtest (printed
apart). Medians and their ratio come from
the same run; the backtest's time cap (240 s in a worker) divided by the median is how many pods
one backtest can judge at that size.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.stats import measure

SIZES = (500, 5000)


def run() -> dict[str, float]:
    from policies.backtest.jobs import BACKGROUND_SECONDS
    from policies.backtest.run import cluster_without, judge
    from policies.cluster.demo import generate_cluster, generate_cluster_objects
    from policies.cluster.exclude import PodExcluder
    from policies.cluster.loaded import LoadedCluster
    from policies.cluster.state import ClusterState
    from policies.engine.policy import compile_policy

    document = (
        Path(__file__).resolve().parents[1] / "policies/examples/bin-packing.yaml"
    ).read_text()
    compiled = compile_policy(document)
    results: dict[str, float] = {}
    print("== backtest: one recorded pod judged now (bin-packing, default profile)")
    for size in SIZES:
        nodes, pods = generate_cluster(size, size * 2, seed=11)
        state = ClusterState.from_objects(nodes, pods, generate_cluster_objects(pods)).freeze()
        cluster = LoadedCluster(state=state, source="file", label=f"{size} nodes")
        bound = [p for p in state.pods() if p["nodeName"] and p["phase"] == "Running"][:200]
        runs = 60 if size <= 500 else 12
        started = time.perf_counter()
        excluder = PodExcluder(cluster)
        excluder.without(bound[0]["uid"])
        copy_ms = (time.perf_counter() - started) * 1e3

        def plain(i: int, bound=bound, cluster=cluster) -> object:
            return judge(
                compiled=compiled, pod=bound[i % len(bound)], cluster=cluster, stored_profile=""
            )

        def excluded(i: int, bound=bound, excluder=excluder) -> object:
            pod = bound[i % len(bound)]
            without, _ = cluster_without(excluder, pod["uid"])
            return judge(compiled=compiled, pod=pod, cluster=without, stored_profile="")

        as_is = measure(plain, runs=runs)
        without = measure(excluded, runs=runs)
        ratio = without.median / as_is.median
        print(f"  {size:5d} nodes  judged on the snapshot as is   {as_is.ms()}")
        print(f"  {size:5d} nodes  judged without itself          {without.ms()}")
        print(
            f"  {size:5d} nodes  without/as is: {ratio:.2f}x; the copy, once: {copy_ms:.0f} ms;"
            f" pods per {BACKGROUND_SECONDS:g} s cap: {BACKGROUND_SECONDS / without.median:.0f}"
        )
        results[f"backtest_{size}_median_ms"] = without.median * 1e3
        results[f"backtest_{size}_exclusion_ratio"] = ratio
    return results
