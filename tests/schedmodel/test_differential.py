"""The scheduler model agrees with the stock kube-scheduler (issues 16 and 23, "Done when").

A seeded corpus of 1000 pods over 60 nodes (taints and tolerations of every shape, node affinity,
nodeSelector and matchFields, resource pressure with an extended resource, pod-level resources,
sidecars, overhead, topology spread with minDomains, matchLabelKeys and the inclusion policies,
pod (anti-)affinity with several terms, namespaces and namespaceSelectors, host ports with hostIP
and protocol, images with and without tags, cordoned and NotReady nodes), placed one pod at a
time by kube-scheduler v1.35.8 with schedweb's extender at weights 1 and 5; about half the pods
are judged from the manifest as a person wrote it, through the model's admission defaults
(tests/schedmodel/differential.py does the work and explains the checks). Every check must
agree for every pod: the feasible set, the outcome, the tie group, the reason counts and the
whole FailedScheduling message.
"""

from __future__ import annotations

import random

import pytest

from tests.harness.binaries import BinariesMissing, binaries_find
from tests.harness.controlplane import ControlPlane

from .differential import GPU, NAMESPACE, SERVICES, corpus_pod, run_corpus, setup_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODES = 60
PODS_PER_WEIGHT = 500


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
    # every pod: the extender's filter got exactly the model's in-tree-feasible nodes, the
    # outcome is the model's, a bound pod is in its tie group, an unschedulable pod's event
    # counts the model's reasons and is its whole message
    assert report.feasible_agree == report.feasible_checked
    assert report.outcome_agree == report.pods
    assert report.pick_agree == report.bound
    assert report.reasons_agree == report.failed
    assert report.message_agree == report.failed
    assert report.written >= PODS_PER_WEIGHT // 3


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
    assert len(set(selectors)) == 5 and len(selectors) >= 40, len(selectors)
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


def _all_pods() -> list[dict]:
    owners = {app: "uid" for app in ("web", "api", "db", "cache", "batch", "ml")}
    pods = []
    for weight in (1, 5):
        rng = random.Random(1600 + weight)
        pods += [corpus_pod(rng, f"w{weight}-{i:04d}", owners) for i in range(PODS_PER_WEIGHT)]
    return pods


def test_the_corpus_covers_every_field_the_default_plugins_read():
    pods = _all_pods()

    def count(check) -> int:
        return sum(1 for p in pods if check(p["spec"]))

    def spread(key):
        return lambda s: any(key in c for c in s.get("topologySpreadConstraints") or [])

    def terms(s):
        aff = s.get("affinity") or {}
        return [
            t
            for kind in ("podAffinity", "podAntiAffinity")
            for t in (aff.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
            or []
        ]

    def ports(s):
        return [p for c in s["containers"] for p in c.get("ports") or []]

    def tolerations(s):
        return {(bool(t.get("key")), t.get("operator"), t.get("effect", ""),
                 "tolerationSeconds" in t) for t in s.get("tolerations") or []}  # fmt: skip

    covered = {
        "pod-level resources": count(lambda s: "resources" in s),
        "sidecars": count(
            lambda s: any(c.get("restartPolicy") == "Always" for c in s.get("initContainers") or [])
        ),
        "init containers": count(
            lambda s: any("restartPolicy" not in c for c in s.get("initContainers") or [])
        ),
        "overhead (RuntimeClass)": count(lambda s: "runtimeClassName" in s),
        "extended resources": count(
            lambda s: any(GPU in c["resources"].get("requests", {}) for c in s["containers"])
        ),
        "limits without requests": count(
            lambda s: any("requests" not in c.get("resources", {}) for c in s["containers"])
        ),
        "minDomains": count(spread("minDomains")),
        "matchLabelKeys (spread)": count(spread("matchLabelKeys")),
        "nodeAffinityPolicy": count(spread("nodeAffinityPolicy")),
        "nodeTaintsPolicy": count(spread("nodeTaintsPolicy")),
        "ScheduleAnyway": count(
            lambda s: any(
                c["whenUnsatisfiable"] == "ScheduleAnyway"
                for c in s.get("topologySpreadConstraints") or []
            )
        ),
        "several affinity terms": count(lambda s: len(terms(s)) >= 2),
        "match/mismatchLabelKeys": count(
            lambda s: any("matchLabelKeys" in t or "mismatchLabelKeys" in t for t in terms(s))
        ),
        "namespaceSelector": count(lambda s: any("namespaceSelector" in t for t in terms(s))),
        "matchFields": count(lambda s: "matchFields" in str(s.get("affinity"))),
        "hostIP": count(lambda s: any("hostIP" in p for p in ports(s))),
        "UDP": count(lambda s: any(p.get("protocol") == "UDP" for p in ports(s))),
        "untagged image": count(
            lambda s: any(":" not in c["image"].rsplit("/", 1)[-1] for c in s["containers"])
        ),
    }
    assert all(n >= 10 for n in covered.values()), covered
    shapes = set().union(*(tolerations(p["spec"]) for p in pods))
    assert {
        (False, "Exists", "", False),  # tolerates everything
        (True, "Exists", "", False),  # a key, every effect
        (True, "Exists", "NoSchedule", False),
        (True, "Exists", "PreferNoSchedule", False),
        (True, "Exists", "NoExecute", True),  # with tolerationSeconds
        (True, "Equal", "", False),  # a value, every effect
    } <= shapes, shapes
    assert sum(p["metadata"]["namespace"] != NAMESPACE for p in pods) >= 200
    assert 300 <= sum(p["x-mode"] == "written" for p in pods) <= 700
