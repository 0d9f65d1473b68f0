"""What-if edits on a copy of the demo snapshot: each edit does what it says, the snapshot
itself never changes, and a bad edit names itself."""

from __future__ import annotations

import pytest

from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.cluster.whatif import whatif_apply, whatif_parse
from policies.errors import InputError

POD = """
metadata: {name: p, namespace: default}
spec:
  schedulerName: schedweb
  containers:
    - {name: a, image: x, resources: {requests: {cpu: 100m, memory: 64Mi}}}
    - {name: b, image: x, resources: {requests: {cpu: 200m}}}
"""


@pytest.fixture(scope="module")
def demo():
    return cluster_load("demo")


def edited(demo, text: str):
    return whatif_apply(cluster=demo, pod=pod_view_from_text(POD), edits=whatif_parse(text))


def test_node_edits_change_a_copy_and_leave_the_snapshot_alone(demo):
    before = demo.state.node("a-small-1")
    cluster, _, described = edited(
        demo,
        """
- cordon: a-small-1
- label: {node: a-small-1, key: disk, value: ssd}
- taint: {node: a-small-1, key: gpu, value: "true", effect: NoSchedule}
- allocatable: {node: a-small-1, cpu: "64"}
""",
    )
    node = cluster.state.node("a-small-1")
    assert node["unschedulable"] is True
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "effect")} for t in node["taints"]
    ]
    assert node["labels"]["disk"] == "ssd"
    assert node["allocatable"]["cpu"] == 64000
    assert node["requested"] == before["requested"]  # the pods on it still count
    assert demo.state.node("a-small-1") is before and before["unschedulable"] is False
    assert described[0] == "cordon a-small-1" and "with what-if edits" in cluster.label


def test_the_copy_keeps_namespaces_services_and_controllers(demo):
    cluster, _, _ = edited(demo, "- cordon: a-small-1\n")
    assert cluster.state.namespaces() == demo.state.namespaces()
    for kind in ("Service", "ReplicaSet", "StatefulSet"):
        assert cluster.state.objects(kind) == demo.state.objects(kind)
    assert demo.state.objects("Service")  # the demo has some, so the check means something


def test_nodes_are_added_like_another_and_removed(demo):
    cluster, _, _ = edited(
        demo,
        "- addNode: {name: spare-1, like: a-small-1, labels: {zone: z}}\n- removeNode: a-small-2\n",
    )
    names = {n["name"] for n in cluster.nodes()}
    assert "spare-1" in names and "a-small-2" not in names
    spare = cluster.state.node("spare-1")
    assert spare["labels"]["kubernetes.io/hostname"] == "spare-1" and spare["labels"]["zone"] == "z"
    assert spare["podCount"] == 0
    assert cluster.state.node_count() == demo.state.node_count()


def test_uncordon_and_untaint_undo_and_pod_requests_replace_the_pods(demo):
    cluster, pod, _ = edited(
        demo,
        """
- cordon: a-small-1
- uncordon: a-small-1
- taint: {node: a-small-1, key: k, effect: NoExecute}
- untaint: {node: a-small-1, key: k}
- podRequests: {cpu: "2", memory: 1Gi}
""",
    )
    node = cluster.state.node("a-small-1")
    assert node["unschedulable"] is False and all(t["key"] != "k" for t in node["taints"])
    assert pod["requests"]["cpu"] == 2000  # only the first container requests cpu now
    assert pod["requests"]["memory"] == 2**30


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cordon: a", "expected a list of edits"),
        ("- fly: a", "whatIf[0]: unknown edit 'fly'"),
        ("- cordon: nope", "whatIf[0].cordon: no node named nope"),
        ("- label: {key: k}", "whatIf[0].label.node: required"),
        ("- taint: {node: a-small-1, key: k, effect: Maybe}", "whatIf[0].taint.effect"),
        (
            "- removeNode: a-small-1\n- cordon: a-small-1",
            "whatIf[1].cordon: node a-small-1 was removed",
        ),
        ("- addNode: {name: a-small-1, like: a-small-2}", "node a-small-1 exists already"),
        ("- allocatable: {node: a-small-1, cpu: lots}", "whatIf"),
        ("- podRequests: []", "expected resources"),
        ("- [1]", "expected one edit"),
        ("[", "not valid YAML at line"),
        ("- cordon: a-small-1\n" * 51, "at most 50 edits"),
    ],
)
def test_a_bad_edit_is_an_input_error_naming_it(demo, text, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        edited(demo, text)
