"""Compact pod views (policies/cluster/compact.py) and the line-per-pod storage format: a lean
state answers every question the extender asks exactly as the full one does, shares what pods
repeat, and stays bounded whatever it is fed."""

from __future__ import annotations

import orjson
import pytest

from policies.cluster import compact
from policies.cluster.compact import BOUND_OBJECT, Compactor, share_tree
from policies.cluster.convert import pod_view
from policies.cluster.demo import generate_cluster, generate_cluster_objects
from policies.cluster.state import ClusterSnapshot, ClusterState
from tests.builders import make_node, make_pod

TOLERATE = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
SELECTORS = [("", {}), ("web", {"tier": "web"}), ("", {"app": "app-1"}), ("ml", {})]


@pytest.fixture(scope="module")
def stored() -> tuple[ClusterState, bytes]:
    nodes, pods = generate_cluster(30, 600, seed=28)
    state = ClusterState.from_objects(nodes, pods, generate_cluster_objects(pods))
    return state, state.to_bytes()


def _without_object(view) -> dict:
    return {k: v for k, v in view.items() if k != "object"}


def test_a_lean_state_cuts_the_objects_of_pods_bound_to_a_node_only(stored):
    state, data = stored
    lean = ClusterState.from_bytes(data, lean=True)
    assert lean.pod_count() == state.pod_count() > 0
    cut = kept = 0
    for pod in state.pods():
        mine = lean.pod(pod["uid"])
        assert _without_object(mine) == _without_object(pod)
        if pod["nodeName"]:
            assert mine["object"] is BOUND_OBJECT
            cut += 1
        else:  # not bound: bind and the requeue sweep evaluate policies on its object
            assert mine["object"] == pod["object"]
            kept += 1
    assert cut and kept
    assert lean.pods_seen == state.pods_seen > 0  # noted before the objects went
    assert BOUND_OBJECT == {"apiVersion": "v1", "kind": "Pod", "metadata": {}}


@pytest.mark.parametrize("lean", [True, False])
def test_a_compacted_state_answers_every_count_as_the_state_it_was_stored_from(stored, lean):
    state, data = stored
    loaded = ClusterState.from_bytes(data, lean=lean)
    assert loaded.nodes() == state.nodes()  # usage rebuilt from the compacted pods
    assert loaded.namespaces() == state.namespaces()
    for namespace, selector in SELECTORS:
        assert [p["uid"] for p in loaded.pods_matching(namespace, selector)] == [
            p["uid"] for p in state.pods_matching(namespace, selector)
        ]
        for node in state.nodes()[:5]:
            assert loaded.count_pods_on_node(
                node["name"], namespace, selector
            ) == state.count_pods_on_node(node["name"], namespace, selector)
        for zone in ("zone-a", "zone-b"):
            key = "topology.kubernetes.io/zone"
            assert loaded.count_pods_in_domain(
                key, zone, namespace, selector
            ) == state.count_pods_in_domain(key, zone, namespace, selector)


def test_pods_share_their_equal_parts():
    state = ClusterState.from_objects(
        [make_node("n1")],
        [
            make_pod(f"p{i}", cpu="100m", memory="64Mi", node_name="n1", tolerations=[TOLERATE])
            for i in range(3)
        ],
    )
    a, b, c = state.pods()
    assert a["requests"] is b["requests"] is c["requests"]
    assert a["tolerations"] is b["tolerations"]
    assert a["requests"] == {"cpu": 100, "memory": 64 * 2**20}
    assert a["requests"]["nvidia_com_gpu"] == 0  # still a ResourceMap


def test_a_loaded_view_and_its_object_hold_one_copy_of_what_they_share(stored):
    """A stored snapshot parses each pod's labels and names twice (view and object)."""
    _, data = stored
    full = ClusterState.from_bytes(data)
    lean = ClusterState.from_bytes(data, lean=True)
    for pod in full.pods():
        meta = pod["object"]["metadata"]
        assert pod["labels"] is meta["labels"] and pod["uid"] is meta["uid"]
        assert pod["name"] is meta["name"] and pod["namespace"] is meta["namespace"]
    pending = [p for p in lean.pods() if not p["nodeName"]]
    assert pending
    for pod in pending:  # kept whole: shared the same way
        assert pod["labels"] is pod["object"]["metadata"]["labels"]
    a, b = full.nodes()[:2]
    assert a["labels"] is a["object"]["metadata"]["labels"]
    images = a["object"]["status"]["images"]
    assert images == b["object"]["status"]["images"] and images is b["object"]["status"]["images"]


def test_shared_trees_keep_equal_values_of_other_types_apart():
    table: dict = {}
    values = [{"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {"a": [1]}, {"a": {"b": None}}]
    shared = [share_tree(v, table) for v in values]
    again = [share_tree(v, table) for v in orjson.loads(orjson.dumps(values))]
    for value, one, other in zip(values, shared, again, strict=True):
        assert one == value and other is one
        assert type(one["a"]) is type(value["a"])
    assert len({id(v) for v in shared}) == len(values)


def test_a_lean_state_cuts_a_pods_object_once_an_event_binds_it():
    state = ClusterState(lean=True)
    state.apply_node(make_node("n1", cpu="4"))
    pending = make_pod("web-1", cpu="250m", labels={"app": "web"})
    assert state.apply_pod(pending)["object"] == pending
    bound = state.apply_pod(make_pod("web-1", cpu="250m", labels={"app": "web"}, node_name="n1"))
    assert bound["object"] is BOUND_OBJECT and bound["uid"] == "uid-default-web-1"
    assert state.node("n1")["requested"]["cpu"] == 250 and state.node("n1")["podCount"] == 1
    assert state.count_pods("default", {"app": "web"}) == 1
    assert state.pod("uid-default-web-1")["labels"] == {"app": "web"}


def test_the_sharing_table_stays_bounded_whatever_it_is_fed(monkeypatch):
    monkeypatch.setattr(compact, "SHARE_MAX", 50)
    compactor = Compactor(lean=True)
    for i in range(500):  # every pod asks for something no other does
        compactor.pod(pod_view(make_pod(f"p{i}", cpu=f"{i + 1}m", node_name="n1")))
        assert len(compactor._shared) <= 50


@pytest.mark.parametrize(
    "spec",
    [
        {"tolerations": [{"key": ["not", "a", "string"], "operator": "Exists"}]},
        {"nodeName": 5},
        {"tolerations": [{"key": {"a": 1}}]},
    ],
)
def test_malformed_parts_a_view_accepted_are_kept_as_they_are(spec):
    obj = make_pod("odd", cpu="100m")
    obj["spec"].update(spec)
    view = pod_view(obj)
    out = Compactor(lean=True).pod(view)
    assert out == {**view, "object": out["object"]}
    assert out["tolerations"] == view["tolerations"]


def test_a_stored_snapshot_is_a_header_and_one_line_per_pod(stored):
    state, data = stored
    lines = data.split(b"\n")
    assert len(lines) == 1 + state.pod_count()
    header = orjson.loads(lines[0])
    assert header["format"] == 2 and "pods" not in header
    assert len(header["nodes"]) == state.node_count()
    assert {orjson.loads(line)["uid"] for line in lines[1:]} == {p["uid"] for p in state.pods()}


def test_a_snapshot_stored_in_the_first_format_still_loads(stored):
    """A reader upgraded before its watcher reads what the old watcher wrote."""
    state, _ = stored
    old = orjson.dumps(
        {
            "format": 1,
            "version": 7,
            "labelKeys": [],
            "nodes": state.nodes(),
            "pods": state.pods(),
            "objects": [],
        }
    )
    loaded = ClusterSnapshot.from_bytes(old)
    assert loaded.version == 7 and loaded.pod_count() == state.pod_count()
    assert loaded.nodes() == state.nodes()


@pytest.mark.parametrize(
    "tail",
    [b"\nnot json", b'\n{"uid": "x"}', b"\n[1, 2]", b'\n{"requests": 5, "limits": {}}'],
)
def test_a_damaged_pod_line_is_refused_as_not_a_snapshot(tail):
    data = ClusterState.from_objects([make_node("n1")], [make_pod("a", cpu="1")]).to_bytes()
    with pytest.raises(ValueError, match="not a schedweb cluster snapshot"):
        ClusterState.from_bytes(data + tail)
