"""CPU time of the extender's own work per scheduled pod (one filter + one prioritize), in process.

Process CPU time, not wall time: on a shared 2-core machine wall-clock throughput is noisy, CPU
per pair is what a lever changes. `python -m bench.extender_cpu [NODES] [--profile]` prints the
median of 5 rounds of 200 pairs and, with --profile, a cProfile summary of 500 pairs (issue 13).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import orjson

from .engine import POLICY


def in_process_extender(nodes: int, *, distinct: bool = False):
    """An Extender over a generated snapshot of `nodes` nodes (4 pods a node) serving the 2+3
    policy, with decisions sampled and deferred as in the product; and pod bodies to send:
    alike (a Deployment's replicas, as in the throughput runs: the engine's per-node memo
    answers), or with `distinct`, each pod asking for a different CPU request (no memo hit:
    every node evaluated, the worst case)."""
    from django.conf import settings

    from policies.cluster.demo import generate_cluster
    from policies.cluster.loaded import LoadedCluster
    from policies.cluster.state import ClusterState
    from policies.engine.policy import compile_policy
    from policies.extender.metrics import Metrics
    from policies.extender.runtime import DecisionBuffer
    from policies.extender.service import Extender, ServedPolicy

    from .extender import _pod

    nodes_json, pods_json = generate_cluster(nodes, nodes * 4, seed=3)
    state = ClusterState.from_objects(nodes_json, pods_json).freeze()
    snapshot = LoadedCluster(state, "live", "bench", version=1)
    served = ServedPolicy("bench-2-3", 1, compile_policy(POLICY))
    decisions = DecisionBuffer(per_second=settings.SCHEDWEB_DECISIONS_PER_SECOND)
    extender = Extender(
        policies=lambda: {"schedweb": served},
        snapshot=lambda: snapshot,
        metrics=Metrics(),
        record=decisions.append,
        sample=decisions.wanted,
    )
    names = [n["name"] for n in state.nodes()]
    bodies = []
    for i in range(500):
        pod = _pod(f"p{i}", "schedweb")
        pod["metadata"] |= {"uid": f"u{i}", "resourceVersion": "1"}
        if distinct:
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{10 + i}m"
        bodies.append(orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}))
    return extender, decisions, bodies


def cpu_per_pair(
    nodes: int = 500, *, pairs: int = 200, rounds: int = 5, distinct: bool = False
) -> dict[str, float]:
    """Median over `rounds` of the CPU milliseconds per filter+prioritize pair, split by verb."""
    extender, decisions, bodies = in_process_extender(nodes, distinct=distinct)
    bodies = bodies[:pairs]
    for body in bodies[:20]:
        extender.filter(body)
        extender.prioritize(body)
    samples = []
    for _ in range(rounds):
        if distinct:  # every round's pods new to the memo too
            for served in extender._policies().values():
                served.compiled._fast._memo.clear()
                served.compiled._fast._seen.clear()
        spent_filter = spent_prioritize = 0.0
        for body in bodies:
            t0 = time.process_time()
            extender.filter(body)
            t1 = time.process_time()
            extender.prioritize(body)
            t2 = time.process_time()
            spent_filter += t1 - t0
            spent_prioritize += t2 - t1
        decisions.take()  # built off the request path in the product too
        samples.append((spent_filter + spent_prioritize, spent_filter, spent_prioritize))
    samples.sort()
    total, spent_filter, spent_prioritize = samples[len(samples) // 2]
    n = len(bodies)
    return {
        "pair_ms": total * 1e3 / n,
        "filter_ms": spent_filter * 1e3 / n,
        "prioritize_ms": spent_prioritize * 1e3 / n,
    }


def profile(nodes: int = 500, top: int = 25) -> str:
    """A cProfile summary (internal time, then cumulative) of 500 filter+prioritize pairs."""
    extender, _decisions, bodies = in_process_extender(nodes)
    for body in bodies[:20]:
        extender.filter(body)
        extender.prioritize(body)
    profiler = cProfile.Profile()
    profiler.enable()
    for body in bodies:
        extender.filter(body)
        extender.prioritize(body)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str]) -> None:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    os.environ.setdefault("SCHEDWEB_SECRET_KEY", "bench-only-key")
    import django

    django.setup()
    nodes = int(next((a for a in argv if a.isdigit()), "500"))
    for distinct in (False, True):
        cpu = cpu_per_pair(nodes, distinct=distinct)
        print(
            f"{nodes} nodes, {'every pod different' if distinct else 'pods alike'}:"
            f" CPU per filter+prioritize pair {cpu['pair_ms']:.3f} ms"
            f" (filter {cpu['filter_ms']:.3f}, prioritize {cpu['prioritize_ms']:.3f}; median of 5)"
        )
    if "--profile" in argv:
        print(profile(nodes))


if __name__ == "__main__":
    main(sys.argv[1:])
