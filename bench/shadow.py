"""Shadow benchmark (issue 25): kube-scheduler's throughput with a shadow version configured,
against the same run without one, in one run on this machine.

One control plane with SCHEDWEB_BENCH_SHADOW_NODES nodes (default 500), one schedweb stack (the
extender over mutual TLS, as `make run`), two policies of the same text (bench/engine.py's
2-filter + 3-score policy) for two schedulerNames: `bench-plain` without a shadow, and
`bench-shadowed` with a shadow (the same policy preferring zone-b: it differs on most pods, so
each judged pod builds a record with both breakdowns, the costlier case). The two
kube-schedulers (same binaries, same client QPS) run alternately, SCHEDWEB_BENCH_ROUNDS rounds
(default 6) of SCHEDWEB_BENCH_SHADOW_PODS pods (default 2000) each, every run on the same empty
nodes (its pods deleted after it), on a quiet machine (what the run before left to do, done:
the shadow's queued bodies are its work, after the answers, and are bounded by
SCHEDWEB_SHADOW_QUEUE) and in an order that turns each round, after a warm-up of
WARM_PODS pods each (the shadow lane's start is not measured); the median of the
rounds' ratios with/without is printed (target at least 0.9), with the shadow's counters from the
listener's /metrics (judged, skipped, evaluation time) so that a ratio bought by shedding all
shadow work shows as such.

Needs the Kubernetes test binaries (scripts/k8s-binaries.sh) and redis-server.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from .engine import POLICY
from .throughput import _pods_delete, _rounds, _throughput, nodes_create

NODES = int(os.environ.get("SCHEDWEB_BENCH_SHADOW_NODES", "500"))
PODS = int(os.environ.get("SCHEDWEB_BENCH_SHADOW_PODS", "2000"))
# even: each configuration runs first as often as second (the order turns each round)
ROUNDS = int(os.environ.get("SCHEDWEB_BENCH_ROUNDS", "6"))
WARM_PODS = 200  # scheduled by each configuration once before the measured rounds
TARGET_RATIO = 0.9  # issue 25: with a shadow / without, median of the rounds


def _shadow_counters(text: str) -> dict[str, float]:
    """The shadow's totals from a /metrics exposition."""
    from tests.prometheus_text import samples

    totals: dict[str, float] = {}
    for name, _labels, value in samples(text):
        if name == "schedweb_extender_shadow_judged_total":
            totals["judged"] = totals.get("judged", 0.0) + value
        elif name == "schedweb_extender_shadow_skipped_total":
            totals["skipped"] = value
        elif name in (
            "schedweb_extender_shadow_duration_seconds_sum",
            "schedweb_extender_shadow_duration_seconds_count",
        ):
            totals[name.rsplit("_", 1)[1]] = value
    return totals


def _snapshot_without_pods(stack):
    """A check that the cluster snapshot in Redis (what the extender follows) holds no pods:
    each run starts from the same empty nodes (bench/extender.py, _rounds)."""
    import redis as redis_client

    from policies.cluster.reader import SnapshotReader

    reader = SnapshotReader(
        stack.env["SCHEDWEB_CLUSTER_NAME"], client=redis_client.Redis.from_url(stack.redis.url)
    )

    def empty() -> bool:
        reader.refresh()
        return reader.current is not None and reader.current.state.pod_count() == 0

    return empty


def run() -> dict[str, float]:
    import yaml

    from tests.e2e.stack import RedisServer, SchedwebStack
    from tests.harness.binaries import BinariesMissing, binaries_find
    from tests.harness.controlplane import ControlPlane

    try:
        binaries_find()
    except BinariesMissing as exc:
        print(f"== shadow: skipped ({exc})")
        return {}
    print(
        f"== shadow: kube-scheduler throughput, {PODS} pods over {NODES} nodes, without and with"
        " a shadow version (pods created first)"
    )
    workdir = Path(tempfile.mkdtemp(prefix="schedweb-bench-shadow-"))
    with ControlPlane(workdir / "plane") as plane:
        nodes_create(plane, NODES)
        redis = RedisServer(workdir / "redis").start()
        from django.conf import settings

        stack = SchedwebStack(
            workdir / "stack",
            kubeconfig=plane.kubeconfig,
            redis=redis,
            tls="mtls",
            web_workers=settings.SCHEDWEB_EXTENDER_WORKERS,
            # the shadow's bounds and record rates as set where the bench runs, else defaults
            extra_env={k: v for k, v in os.environ.items() if k.startswith("SCHEDWEB_SHADOW_")},
        )
        try:
            stack.start()
            base = yaml.safe_load(POLICY)
            for name, scheduler in (
                ("bench-plain", "bench-plain"),
                ("bench-shadowed", "bench-shadowed"),
            ):
                policy = dict(base, name=name, schedulerNames=[scheduler])
                version = stack.publish(yaml.safe_dump(policy, sort_keys=False), "bench")
                stack.wait_serving(name, version)
            shadow = dict(base, name="bench-shadowed", schedulerNames=["bench-shadowed"])
            shadow["scores"] = [
                *base["scores"][:2],
                {
                    "name": "zone-b",
                    "expression": 'node.labels["topology.kubernetes.io/zone"] == "zone-b" ? 100 : 0',
                },
            ]
            stack.publish(yaml.safe_dump(shadow, sort_keys=False), "bench shadow", shadow=True)
            stack.wait_workers(
                lambda health: "bench-shadowed" in health.get("shadows", {}),
                what="the shadow served",
            )
            client = {"qps": 1000, "burst": 1000}  # as bench/extender.py: not capped by the client
            configs = {}
            for scheduler in ("bench-plain", "bench-shadowed"):
                config = yaml.safe_load(
                    stack.scheduler_config(
                        "--scheduler-name", scheduler, "--no-preempt", "--second-scheduler"
                    )
                )
                config["clientConnection"].update(client)
                configs[scheduler] = yaml.safe_dump(config)
            runs = {
                "without": (configs["bench-plain"], "bench-plain", "without a shadow"),
                "shadow": (configs["bench-shadowed"], "bench-shadowed", "with a shadow"),
            }
            empty = _snapshot_without_pods(stack)
            for config, scheduler, label in runs.values():
                # not measured: the shadow lane's start (a process, Django, the snapshot) and
                # each process's first use of everything land here, not in round 1
                _throughput(plane, config, scheduler, f"{label}, warm-up", 0, pods=WARM_PODS)
                _pods_delete(plane, f"{scheduler}-0", empty)
            time.sleep(1.5)  # the extender's workers write their counts every second
            before = _shadow_counters(stack.extender_request("GET", "/metrics")[1])
            rounds = _rounds(
                plane,
                runs,
                pods=PODS,
                first_run=1,
                listeners={},
                extender=stack.extender.pid,
                fresh=empty,
                quiet=True,
                count=ROUNDS,
            )
            time.sleep(1.5)
            after = _shadow_counters(stack.extender_request("GET", "/metrics")[1])
        finally:
            stack.stop()
            redis.stop()
    ratio = statistics.median(r["shadow"][0] / r["without"][0] for r in rounds)
    judged = after.get("judged", 0.0) - before.get("judged", 0.0)
    skipped = after.get("skipped", 0.0) - before.get("skipped", 0.0)
    count = after.get("count", 0.0) - before.get("count", 0.0)
    seconds = after.get("sum", 0.0) - before.get("sum", 0.0)
    print(
        f"  ratio with a shadow/without, median of {len(rounds)} rounds: {ratio:.2f}"
        f" (target at least {TARGET_RATIO}: {'PASS' if ratio >= TARGET_RATIO else 'FAIL'})"
    )
    print(
        f"  the shadow judged {judged:.0f} pods, skipped {skipped:.0f}"
        f" (of {PODS * len(rounds)} scheduled with it); CPU per judgement"
        f" {seconds * 1e3 / count if count else 0:.3f} ms (mean)"
    )
    return {
        "shadow_ratio": ratio,
        "shadow_judged": judged,
        "shadow_skipped": skipped,
        "throughput_without_shadow": statistics.median(r["without"][0] for r in rounds),
        "throughput_with_shadow": statistics.median(r["shadow"][0] for r in rounds),
    }
