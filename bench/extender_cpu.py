"""CPU time of the extender's own work per scheduled pod (one filter + one prioritize), in process.

Process CPU time, not wall time: on a shared 2-core machine wall-clock throughput is noisy, CPU
per pair is what a lever changes. `python -m bench.extender_cpu [NODES] [--profile]` prints the
median of 5 rounds of 200 pairs (issue 13), then a scheduled pod's whole work in the listener's
process as kube-scheduler causes it, beside the protocol-only extender's (`per_pod`, issue 28),
and with --profile a cProfile summary of that work over 400 pods.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time

import orjson

from policies.cluster.demo import generate_cluster

from .engine import POLICY


def in_process_extender(nodes: int, *, distinct: bool = False):
    """An Extender over a generated snapshot of `nodes` nodes (4 pods a node) serving the 2+3
    policy, with decisions sampled and deferred as in the product; and pod bodies to send:
    alike (a Deployment's replicas, as in the throughput runs: the engine's per-node memo
    answers), or with `distinct`, each pod asking for a different CPU request (no memo hit:
    every node evaluated, the worst case)."""
    from policies.cluster.state import ClusterState

    from .throughput import _pod

    nodes_json, pods_json = generate_cluster(nodes, nodes * 4, seed=3)
    state = ClusterState.from_objects(nodes_json, pods_json).freeze()
    extender, decisions = _extender_over(state)
    names = [n["name"] for n in state.nodes()]
    bodies = []
    for i in range(500):
        pod = _pod(f"p{i}", "schedweb")
        pod["metadata"] |= {"uid": f"u{i}", "resourceVersion": "1"}
        if distinct:
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{10 + i}m"
        bodies.append(orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}))
    return extender, decisions, bodies


def _extender_over(state):
    """An Extender serving the 2+3 policy over `state`, decisions sampled and deferred as in
    the product; and its decision buffer."""
    from django.conf import settings

    from policies.cluster.loaded import LoadedCluster
    from policies.engine.policy import compile_policy
    from policies.extender.decisions import DecisionBuffer
    from policies.extender.metrics import Metrics
    from policies.extender.service import Extender, ServedPolicy

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
    return extender, decisions


def per_pod(
    nodes: int = 5000,
    *,
    pods: int = 400,
    window: int = 500,
    rounds: int = 3,
    profiler: cProfile.Profile | None = None,
) -> dict[str, float]:
    """CPU milliseconds of one scheduled pod's work in the extender's listener process, as a
    throughput run causes it (issue 28): filter + prioritize over a window of `window` names
    (kube-scheduler's adaptive percentageOfNodesToScore at 5000 nodes: 50 - 5000/125 = 10%,
    500 names, the window moving on from pod to pod) and the after-answer work, then the pod's
    two watch events (created pending, then bound) applied to the lean in-place snapshot as
    the runtime's thread applies them; beside it the protocol-only extender's filter +
    prioritize (bench/passthrough.py) on the same bodies. Median of `rounds`; `profiler` is
    enabled around schedweb's part of the last round."""
    import inspect

    from policies.cluster.reader import _apply, _decode
    from policies.cluster.state import ClusterState
    from policies.cluster.store import POD

    from . import passthrough
    from .throughput import _pod

    nodes_json, pods_json = generate_cluster(nodes, nodes * 4, seed=3)
    stored = ClusterState.from_objects(nodes_json, pods_json).to_bytes()
    lean = {"lean": True} if "lean" in inspect.signature(ClusterState.from_bytes).parameters else {}
    state = ClusterState.from_bytes(stored, **lean)  # as SnapshotReader(in_place, lean) holds it
    del stored, pods_json
    extender, decisions = _extender_over(state)
    names = [n["name"] for n in state.nodes()]
    work = []
    for i in range(pods * (rounds + 1)):
        pod = _pod(f"p{i}", "schedweb")
        pod["metadata"] |= {"uid": f"u{i}", "resourceVersion": str(1_000_000 + 2 * i)}
        start = (i * window) % len(names)
        candidates = (names[start:] + names[:start])[:window]
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": candidates})
        created = dict(pod, status={"phase": "Pending", "qosClass": "Burstable"})
        bound = dict(created, spec=dict(pod["spec"], nodeName=candidates[0]))
        bound["metadata"] = dict(pod["metadata"], resourceVersion=str(1_000_001 + 2 * i))
        work.append((body, orjson.dumps(created), orjson.dumps(bound)))
    clock = time.thread_time
    ours, events, theirs = [], [], []
    for number in range(rounds + 1):
        spent_pair = spent_events = spent_pass = 0.0
        profiling = profiler is not None and number == rounds
        for body, created, bound in work[number * pods : (number + 1) * pods]:
            if profiling:
                profiler.enable()
            t0 = clock()
            extender.filter(body)
            extender.after_answer()
            extender.prioritize(body)
            extender.after_answer()
            t1 = clock()
            _apply(state, POD, _decode(POD, created))
            _apply(state, POD, _decode(POD, bound))
            t2 = clock()
            if profiling:
                profiler.disable()
            passthrough._filter(None, body)
            passthrough._prioritize(None, body)
            spent_pair += t1 - t0
            spent_events += t2 - t1
            spent_pass += clock() - t2
        decisions.take()  # built off the request path in the product too
        if number:  # the first round warms the memo and the caches
            ours.append(spent_pair * 1e3 / pods)
            events.append(spent_events * 1e3 / pods)
            theirs.append(spent_pass * 1e3 / pods)
    pair, applied, protocol = (statistics.median(x) for x in (ours, events, theirs))
    return {
        "pair_ms": pair,
        "events_ms": applied,
        "pod_ms": pair + applied,
        "passthrough_ms": protocol,
    }


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


def _summary(profiler: cProfile.Profile, top: int = 25) -> str:
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
    profiler = cProfile.Profile() if "--profile" in argv else None
    cpu = per_pod(nodes, profiler=profiler)
    print(
        f"{nodes} nodes, 500-name windows: CPU per scheduled pod {cpu['pod_ms']:.3f} ms"
        f" (filter + prioritize {cpu['pair_ms']:.3f}, its two watch events {cpu['events_ms']:.3f});"
        f" the protocol-only extender's filter + prioritize {cpu['passthrough_ms']:.3f} ms"
    )
    if profiler is not None:
        print(_summary(profiler))


if __name__ == "__main__":
    main(sys.argv[1:])
