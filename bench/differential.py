"""Agreement of the scheduler model with the stock kube-scheduler (issues 16 and 23), on a larger
corpus than the test's: SCHEDWEB_BENCH_DIFF_PODS pods per extender weight (default 1500, weights
1 and 5, so 3000 pods) over 60 nodes, placed one at a time (tests/schedmodel/differential.py),
about half of them judged from the person-written manifest through the model's admission
defaults.

Prints per weight: (a) filter sets equal, the outcome (bound or not), (b) bound node in the
predicted tie group, (c) FailedScheduling reason counts equal, the whole message equal, and every
disagreement; then the seconds per pod. Needs the Kubernetes test binaries.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

NODES = 60
PODS = int(os.environ.get("SCHEDWEB_BENCH_DIFF_PODS", "1500"))


def run() -> dict[str, float]:
    import django

    django.setup()
    from tests.harness.binaries import BinariesMissing, binaries_find
    from tests.harness.controlplane import ControlPlane
    from tests.schedmodel.differential import run_corpus, setup_cluster

    print(f"== scheduler model vs kube-scheduler: {PODS} pods per weight over {NODES} nodes")
    try:
        binaries_find()
    except BinariesMissing as exc:
        print(f"  skipped ({exc})")
        return {}
    results: dict[str, float] = {}
    with ControlPlane(Path(tempfile.mkdtemp(prefix="schedweb-bench-diff-"))) as plane:
        nodes, owners = setup_cluster(plane, seed=1016, nodes=NODES)
        for weight in (1, 5):
            started = time.monotonic()
            report = run_corpus(
                plane,
                weight=weight,
                seed=2016 + weight,
                pods=PODS,
                node_objects=nodes,
                owners=owners,
                prefix=f"b{weight}",
            )
            elapsed = time.monotonic() - started
            print(f"  {report.figures()} in {elapsed:.0f} s ({elapsed / PODS:.2f} s a pod)")
            for d in report.disagreements:
                print(f"    {d.pod} {d.check}: kube-scheduler {d.scheduler} / model {d.model}")
            for key, agree, total in (
                ("a", report.feasible_agree, report.feasible_checked),
                ("outcome", report.outcome_agree, report.pods),
                ("b", report.pick_agree, report.bound),
                ("c", report.reasons_agree, report.failed),
                ("message", report.message_agree, report.failed),
            ):
                results[f"weight{weight}_{key}"] = 100 * agree / total if total else 100.0
    return results
