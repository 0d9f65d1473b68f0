"""Agreement of the scheduler model with the stock kube-scheduler (issue 16), on a larger corpus
than the test's: SCHEDWEB_BENCH_DIFF_PODS pods per extender weight (default 500, weights 1 and 5,
so 1000 pods) over 100 nodes, placed one at a time (tests/schedmodel/differential.py).

Prints per weight: (a) filter sets equal, (b) bound node in the predicted tie group,
(c) FailedScheduling reasons equal, and every disagreement. Needs the Kubernetes test binaries.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

NODES = 100
PODS = int(os.environ.get("SCHEDWEB_BENCH_DIFF_PODS", "500"))


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
            print(f"  {report.figures()} in {time.monotonic() - started:.0f} s")
            for d in report.disagreements:
                print(f"    {d.pod} {d.check}: kube-scheduler {d.scheduler} / model {d.model}")
            for key, agree, total in (
                ("a", report.feasible_agree, report.feasible_checked),
                ("b", report.pick_agree, report.bound),
                ("c", report.reasons_agree, report.failed),
            ):
                results[f"weight{weight}_{key}"] = 100 * agree / total if total else 100.0
    return results
