"""The scheduler model agrees with the stock kube-scheduler (issue 16, "Done when").

A seeded corpus over 56 nodes (taints and tolerations, node affinity and nodeSelector, resource
pressure with an extended resource, topology spread, pod (anti-)affinity, host ports, cordoned
and NotReady nodes), placed one pod at a time by kube-scheduler v1.35.8 with schedweb's extender
at weights 1 and 5 (tests/schedmodel/differential.py does the work and explains the checks).
"""

from __future__ import annotations

import random

import pytest

from tests.harness.binaries import BinariesMissing, binaries_find
from tests.harness.controlplane import ControlPlane

from .differential import NAMESPACE, SERVICES, corpus_pod, run_corpus, setup_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODES = 56
PODS_PER_WEIGHT = 160


@pytest.fixture(scope="module")
def corpus_cluster(tmp_path_factory):
    """A control plane of its own: the session's shared one holds other tests' nodes, which
    kube-scheduler would consider too."""
    try:
        bin_dir = binaries_find()
    except BinariesMissing as err:
        pytest.fail(str(err), pytrace=False)
    with ControlPlane(tmp_path_factory.mktemp("differential-plane"), bin_dir=bin_dir) as plane:
        nodes, owners = setup_cluster(plane, seed=16, nodes=NODES)
        yield plane, nodes, owners


@pytest.mark.parametrize("weight", [1, 5])
def test_kube_scheduler_filters_binds_and_explains_as_the_model_predicts(corpus_cluster, weight):
    plane, nodes, owners = corpus_cluster
    report = run_corpus(
        plane,
        weight=weight,
        seed=1600 + weight,
        pods=PODS_PER_WEIGHT,
        node_objects=nodes,
        owners=owners,
        prefix=f"w{weight}",
    )
    print(report.figures(), report.rejected_by)
    for d in report.disagreements:
        print(f"  {d.pod} {d.check}: kube-scheduler {d.scheduler} / model {d.model}")
    assert report.pods == PODS_PER_WEIGHT
    assert report.failed > 0 and report.bound > 0
    # the corpus exercises every filter plugin kube-scheduler runs for these pods
    assert set(report.rejected_by) >= {
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    }, report.rejected_by
    # (a) every pod: the extender's filter got exactly the model's in-tree-feasible nodes
    assert report.feasible_agree == report.feasible_checked
    # (b) the bound node is in the model's tie group for at least 99% of the bound pods
    assert report.pick_agree >= 0.99 * report.bound
    # (c) unschedulable pods: the event's per-reason node counts are the model's
    assert report.reasons_agree == report.failed


def test_the_corpus_covers_namespace_selectors_and_service_selected_pods():
    # what the two runs above place (same seeds, same names): terms with a namespaceSelector
    # of every shape, pods outside the main namespace, and pods with no controller that a
    # Service selects (system-default spreading from the Service alone)
    owners = {app: "uid" for app in ("web", "api", "db", "cache", "batch", "ml")}
    pods = []
    for weight in (1, 5):
        rng = random.Random(1600 + weight)
        pods += [corpus_pod(rng, f"w{weight}-{i:04d}", owners) for i in range(PODS_PER_WEIGHT)]
    selectors = []
    for pod in pods:
        for section in (pod["spec"].get("affinity") or {}).values():
            for mode in section.values():
                if isinstance(mode, list):
                    for t in mode:
                        t = t.get("podAffinityTerm", t)
                        if "namespaceSelector" in t:
                            selectors.append(str(t["namespaceSelector"]))
    assert len(set(selectors)) == 4 and len(selectors) >= 40, len(selectors)
    assert sum(p["metadata"]["namespace"] != NAMESPACE for p in pods) >= 40
    service_apps = {sel["app"] for _, sel in SERVICES if len(sel) == 1}
    bare = [
        p
        for p in pods
        if p["metadata"]["labels"]["app"] in service_apps
        and "ownerReferences" not in p["metadata"]
        and not p["spec"].get("topologySpreadConstraints")
    ]
    assert len(bare) >= 40
