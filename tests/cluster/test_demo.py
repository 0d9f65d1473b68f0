"""The bundled demo cluster's promises, and the large-cluster generator."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from policies.cluster.demo import demo_objects, demo_state, generate_cluster
from policies.cluster.state import ClusterState

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def demo() -> ClusterState:
    return demo_state()


def has_taint(node, key: str, effect: str = "NoSchedule") -> bool:
    return any(t["key"] == key and t["effect"] == effect for t in node["taints"])


def test_it_is_deterministic():
    assert orjson.dumps(demo_objects()) == orjson.dumps(demo_objects())


def test_it_is_plain_json():
    nodes, pods = demo_objects()
    assert orjson.loads(orjson.dumps([nodes, pods])) == [nodes, pods]


def test_it_has_about_36_nodes_in_three_zones(demo):
    assert demo.node_count() == 36
    zones = Counter(n["labels"][ZONE] for n in demo.nodes())
    assert set(zones) == {"zone-a", "zone-b", "zone-c"} and min(zones.values()) >= 10
    for node in demo.nodes():
        assert node["labels"]["kubernetes.io/hostname"] == node["name"]
        assert node["labels"]["node.kubernetes.io/instance-type"]


def test_it_mixes_node_sizes_with_allocatable_below_capacity(demo):
    sizes = {n["capacity"]["cpu"] for n in demo.nodes()}
    assert {4000, 8000, 16000, 32000} <= sizes
    for node in demo.nodes():
        for resource in ("cpu", "memory", "ephemeral_storage"):
            assert 0.75 * node["capacity"][resource] < node["allocatable"][resource]
            assert node["allocatable"][resource] < node["capacity"][resource]


def test_gpu_nodes_have_gpus_a_taint_and_a_label(demo):
    gpu_nodes = [n for n in demo.nodes() if n["allocatable"]["nvidia_com_gpu"] > 0]
    assert len(gpu_nodes) >= 3
    for node in gpu_nodes:
        assert node["allocatable"]["nvidia_com_gpu"] in (4, 8)
        assert node["capacity"]["nvidia_com_gpu"] == node["allocatable"]["nvidia_com_gpu"]
        assert has_taint(node, "nvidia.com/gpu") and node["labels"]["gpu"] == "true"
    tainted = [n for n in demo.nodes() if has_taint(n, "nvidia.com/gpu")]
    assert tainted == gpu_nodes


def test_it_has_the_special_nodes_policies_care_about(demo):
    nodes = demo.nodes()
    control_plane = [n for n in nodes if has_taint(n, "node-role.kubernetes.io/control-plane")]
    assert len(control_plane) == 1
    assert "node-role.kubernetes.io/control-plane" in control_plane[0]["labels"]
    spot = [n for n in nodes if has_taint(n, "cloud.example.com/spot")]
    assert len(spot) >= 2
    assert all(n["labels"]["cloud.example.com/spot"] == "true" for n in spot)
    assert sum(n["unschedulable"] for n in nodes) == 1
    assert sum(n["conditions"]["Ready"] != "True" for n in nodes) == 1
    assert sum("example.com/maintenance" in n["labels"] for n in nodes) == 1


def test_node_names_vary_in_length_and_the_shortest_is_unique(demo):
    lengths = Counter(len(n["name"]) for n in demo.nodes())
    assert lengths[min(lengths)] == 1
    assert len(lengths) >= 5


def test_no_node_is_overcommitted(demo):
    for node in demo.nodes():
        for resource in ("cpu", "memory", "nvidia_com_gpu"):
            assert node["requested"][resource] <= node["allocatable"][resource], node["name"]
        assert node["podCount"] <= node["allocatable"]["pods"]


def test_utilisation_varies_from_idle_to_nearly_full(demo):
    cpu_share = [n["requested"]["cpu"] / n["allocatable"]["cpu"] for n in demo.nodes()]
    assert sum(share > 0.85 for share in cpu_share) >= 2
    assert sum(share < 0.05 for share in cpu_share) >= 2
    gpu_full = [
        n for n in demo.nodes()
        if n["allocatable"]["nvidia_com_gpu"] and n["requested"]["nvidia_com_gpu"] == n["allocatable"]["nvidia_com_gpu"]
    ]  # fmt: skip
    assert gpu_full


def test_pods_are_realistic(demo):
    pods = demo.pods()
    assert 150 <= len(pods) <= 250
    assert {"default", "web", "batch", "ml", "kube-system"} <= {p["namespace"] for p in pods}
    assert {"ReplicaSet", "StatefulSet", "Job", "DaemonSet"} <= {p["ownerKind"] for p in pods}
    assert {"Guaranteed", "Burstable", "BestEffort"} <= {p["qosClass"] for p in pods}
    assert {"Succeeded", "Failed"} <= {p["phase"] for p in pods}
    assert sum("app" in p["labels"] and "tier" in p["labels"] for p in pods) > len(pods) / 2


def test_some_pods_wait_for_schedweb(demo):
    pending = [p for p in demo.pods() if not p["nodeName"]]
    assert len(pending) >= 3
    assert all(p["schedulerName"] == "schedweb" and p["phase"] == "Pending" for p in pending)


def test_a_pod_group_has_fewer_members_than_it_needs(demo):
    groups = Counter(p["labels"]["podGroup"] for p in demo.pods() if "podGroup" in p["labels"])
    assert groups
    for name, members in groups.items():
        minimum = {
            int(p["labels"]["minAvailable"])
            for p in demo.pods()
            if p["labels"].get("podGroup") == name
        }
        assert len(minimum) == 1 and members < minimum.pop()
        assert demo.count_pods("ml", {"podGroup": name}) == members


# ---------------------------------------------------------------------------------------------
# generator


def test_the_generator_is_deterministic_per_seed():
    assert orjson.dumps(generate_cluster(5, 50, 1)) == orjson.dumps(generate_cluster(5, 50, 1))
    assert orjson.dumps(generate_cluster(5, 50, 1)) != orjson.dumps(generate_cluster(5, 50, 2))


def test_the_generator_makes_the_cluster_asked_for():
    nodes, pods = generate_cluster(40, 1000, seed=4)
    assert (len(nodes), len(pods)) == (40, 1000)
    assert len({n["metadata"]["name"] for n in nodes}) == 40
    assert len({p["metadata"]["uid"] for p in pods}) == 1000
    state = ClusterState.from_objects(nodes, pods)
    phases = Counter(p["phase"] for p in state.pods())
    # ~95% bound and running, ~3% pending, ~2% succeeded
    assert phases["Running"] > 900 and phases["Pending"] > 5 and phases["Succeeded"] > 5
    assert any(p["schedulerName"] == "schedweb" for p in state.pods() if p["phase"] == "Pending")
    # the stated qosClass agrees with the rules the converter would apply
    from policies.cluster.convert import pod_view

    for pod in pods[:200]:
        status = dict(pod["status"])
        computed = pod_view({**pod, "status": {k: v for k, v in status.items() if k != "qosClass"}})
        assert computed["qosClass"] == status["qosClass"]


def test_the_cluster_modules_import_neither_django_nor_kubernetes():
    code = (
        "import sys, policies.cluster, policies.cluster.demo; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'kubernetes')))"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert result.stdout.strip() == "[]"


def test_the_playground_shows_a_namespace_selector_and_service_spreading(demo):
    # report-sync (batch) prefers zones running app=api pods of team=storefront namespaces
    # (web's api pods); abc, a bare pod, is spread because the Service `abc` selects it
    from policies.schedmodel import spread as sp
    from policies.schedmodel.existing import existing_for
    from policies.schedmodel.pipeline import cycle_run

    snap = demo.freeze()
    assert snap.namespaces()["web"]["team"] == "storefront"

    def cycle(name):
        pod = next(v for v in snap.pods() if v["name"] == name)
        return pod, cycle_run(pod=pod, nodes=snap.nodes(), state=snap, policy=None, profile=None)

    _, sync = cycle("report-sync")
    # each matching pod adds the weight (50) to its zone: zone-a 5 api pods, zone-b 5, zone-c 2
    # -> raw 250, 250, 100 -> 100 * (raw - 100) / (250 - 100): 100, 100, 0
    per_zone = Counter(
        snap.node(q["nodeName"])["labels"][ZONE]
        for q in snap.pods()
        if q["namespace"] == "web" and q["labels"].get("app") == "api" and q["nodeName"]
    )
    assert per_zone == {"zone-a": 5, "zone-b": 5, "zone-c": 2}
    scores = {
        snap.node(o.node)["labels"][ZONE]: o.scores["InterPodAffinity"]
        for o in sync.outcomes
        if o.plugin is None
    }
    assert scores == {"zone-a": 100, "zone-b": 100, "zone-c": 0}
    abc, _ = cycle("abc")
    assert sp.default_selector(abc, existing_for(snap)) == {
        "matchLabels": {"app": "abc"},
        "matchExpressions": [],
    }
