"""The preview models kube-scheduler on the demo cluster: the issue's cases, pinned."""

from __future__ import annotations

import json
from pathlib import Path

from policies.cluster.manifest import pod_view_from_source
from policies.cluster.sources import cluster_load
from policies.evaluation import policy_compile, preview_run
from policies.extender.metrics import Metrics
from policies.extender.service import Extender, ServedPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
POD = {
    "metadata": {"name": "abc"},
    "spec": {"schedulerName": "schedweb", "containers": [{"name": "c", "image": "x"}]},
}
TAINT = "node(s) had untolerated taint(s)"


def _preview(name: str, pod=POD):
    document = (EXAMPLES / name).read_text()
    return preview_run(
        document=document, pod=pod_view_from_source(pod), cluster=cluster_load("demo")
    )


def _node(cycle, name):
    return next(o for o in cycle.outcomes if o.node == name)


def test_the_control_plane_node_the_policy_alone_picks_is_rejected_by_its_taint():
    preview = _preview("seed-003-name-length.yaml")
    assert preview.evaluation.winners() == ["cp-1"]  # the policy on its own
    cp = _node(preview.cycle, "cp-1")
    assert (cp.plugin, cp.reasons) == ("TaintToleration", (TAINT,))
    assert "cp-1" not in preview.cycle.pick and preview.cycle.pick


def test_cordoned_and_not_ready_nodes_are_rejected_with_the_schedulers_reasons():
    cycle = _preview("seed-003-name-length.yaml").cycle
    cordoned = _node(cycle, "worker-medium-b-3")
    assert (cordoned.plugin, cordoned.reasons) == (
        "NodeUnschedulable",
        ("node(s) were unschedulable",),
    )
    # the NotReady node carries node.kubernetes.io/not-ready NoSchedule + NoExecute
    not_ready = _node(cycle, "c-small-3")
    assert (not_ready.plugin, not_ready.reasons) == ("TaintToleration", (TAINT,))
    assert cycle.rejection_counts()["node(s) were unschedulable"] == 1


def test_an_8_cpu_2_gpu_pod_gets_only_nodes_with_room_for_it():
    pod = {
        "metadata": {"name": "trainer"},
        "spec": {
            "schedulerName": "schedweb",
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "2"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }
    cycle = _preview("bin-packing.yaml", pod).cycle
    demo = {n["name"]: n for n in cluster_load("demo").nodes()}
    for name in cycle.pick:
        node = demo[name]
        assert node["allocatable"]["cpu"] - node["requested"]["cpu"] >= 8000
        assert node["allocatable"]["nvidia_com_gpu"] - node["requested"]["nvidia_com_gpu"] >= 2


def test_ties_are_shown_as_ties():
    cycle = _preview("seed-003-name-length.yaml").cycle
    best = max(o.total for o in cycle.outcomes if o.total is not None)
    assert cycle.pick == [o.node for o in cycle.outcomes if o.total == best]
    assert cycle.to_dict()["tie"] == (len(cycle.pick) > 1)


def test_the_previews_extender_scores_equal_the_extenders_for_the_same_candidates():
    document = (EXAMPLES / "bin-packing.yaml").read_text()
    compiled = policy_compile(document)
    cluster = cluster_load("demo")
    pod = {**POD, "spec": {**POD["spec"], "schedulerName": compiled.spec.scheduler_names[0]}}
    preview = preview_run(document=document, pod=pod_view_from_source(pod), cluster=cluster)
    candidates = [o.node for o in preview.cycle.outcomes if o.candidate]
    served = ServedPolicy(compiled.name, 1, compiled)
    extender = Extender(
        policies=lambda: {name: served for name in compiled.spec.scheduler_names},
        snapshot=lambda: cluster,
        metrics=Metrics(),
    )
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": candidates}).encode()
    answer = json.loads(extender.prioritize(body).body)
    returned = {h["Host"]: h["Score"] for h in answer}
    assert returned == {o.node: o.extender_score for o in preview.cycle.outcomes if o.candidate}
