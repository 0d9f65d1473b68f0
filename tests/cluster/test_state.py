"""ClusterState: incremental accounting, indexes against brute force, snapshots, storage."""

from __future__ import annotations

import copy
import pickle
import random

import pytest

from policies.cluster.demo import generate_cluster
from policies.cluster.state import ClusterSnapshot, ClusterState
from tests.builders import make_node, make_pod

Mi = 2**20


def usage(state, name: str) -> tuple[int, int, int]:
    """(requested cpu, requested memory, podCount) of a node."""
    node = state.node(name)
    return node["requested"]["cpu"], node["requested"]["memory"], node["podCount"]


@pytest.fixture
def state() -> ClusterState:
    return ClusterState.from_objects([make_node("n1"), make_node("n2")], [])


# ---------------------------------------------------------------------------------------------
# incremental accounting


def test_a_pending_pod_uses_nothing_until_it_is_bound(state):
    state.apply_pod(make_pod("p1", cpu="250m", memory="64Mi"))
    assert usage(state, "n1") == (0, 0, 0)

    state.apply_pod(make_pod("p1", cpu="250m", memory="64Mi", node_name="n1"))
    assert usage(state, "n1") == (250, 64 * Mi, 1)


def test_usage_adds_up_over_pods(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    state.apply_pod(make_pod("p2", cpu="500m", node_name="n1"))
    state.apply_pod(make_pod("p3", cpu="1", node_name="n2"))
    # n1: 250 + 500 = 750 over 2 pods; n2: 1000 over 1
    assert usage(state, "n1")[::2] == (750, 2)
    assert usage(state, "n2")[::2] == (1000, 1)


def test_a_change_of_requests_replaces_the_old_ones(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    state.apply_pod(make_pod("p1", cpu="400m", node_name="n1"))  # same uid, resized
    assert usage(state, "n1")[::2] == (400, 1)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_terminated_pod_is_counted_nowhere(state, phase):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1", labels={"app": "a"}))
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1", labels={"app": "a"}, phase=phase))
    assert usage(state, "n1") == (0, 0, 0)
    assert state.pods_matching("default", {"app": "a"}) == ()
    assert state.pods_on_node("n1") == []
    assert state.pod("uid-default-p1")["phase"] == phase  # still listed for the UI


def test_a_deleted_pod_frees_its_node(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    assert state.delete_pod("uid-default-p1") is True
    assert usage(state, "n1")[::2] == (0, 0)
    assert state.pod("uid-default-p1") is None
    assert state.delete_pod("uid-default-p1") is False


def test_deleting_a_terminated_pod_changes_no_usage(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    state.apply_pod(make_pod("p2", cpu="100m", node_name="n1", phase="Succeeded"))
    state.delete_pod("uid-default-p2")
    assert usage(state, "n1")[::2] == (250, 1)


def test_a_pod_moving_between_nodes_moves_its_usage(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n2"))
    assert usage(state, "n1")[::2] == (0, 0)
    assert usage(state, "n2")[::2] == (250, 1)


def test_a_pod_bound_to_an_unknown_node_is_accounted_when_the_node_appears(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n3"))
    assert state.node("n3") is None
    assert [p["name"] for p in state.pods_on_node("n3")] == ["p1"]

    state.apply_node(make_node("n3"))
    assert usage(state, "n3")[::2] == (250, 1)


def test_a_node_deleted_and_added_again_keeps_its_pods_usage(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    assert state.delete_node("n1") is True
    assert state.node("n1") is None and state.node_count() == 1
    state.apply_pod(make_pod("p2", cpu="100m", node_name="n1"))  # while the node is away

    state.apply_node(make_node("n1"))
    # 250 + 100 = 350 over 2 pods
    assert usage(state, "n1")[::2] == (350, 2)
    assert state.delete_node("n1") is True and state.delete_node("n1") is False


def test_a_node_update_keeps_its_usage(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    state.apply_node(make_node("n1", cpu="8", labels={"pool": "big"}))
    assert usage(state, "n1")[::2] == (250, 1)
    assert state.node("n1")["allocatable"]["cpu"] == 8000
    assert state.node("n1")["labels"]["pool"] == "big"


def test_extended_resources_drop_from_requested_when_freed(state):
    state.apply_pod(make_pod("p1", gpus=2, node_name="n1"))
    assert state.node("n1")["requested"]["nvidia_com_gpu"] == 2
    state.delete_pod("uid-default-p1")
    assert state.node("n1")["requested"] == {"cpu": 0, "memory": 0}


def test_bulk_building_equals_applying_events_one_by_one():
    nodes, pods = generate_cluster(20, 300, seed=3)
    bulk = ClusterState.from_objects(nodes, pods)
    events = ClusterState()
    shuffled = list(pods)
    random.Random(5).shuffle(shuffled)
    for pod in shuffled[:150]:  # some pods before their nodes exist
        events.apply_pod(pod)
    for node in nodes:
        events.apply_node(node)
    for pod in shuffled[150:]:
        events.apply_pod(pod)
    for a, b in zip(bulk.nodes(), events.nodes(), strict=True):
        assert (a["name"], a["requested"], a["podCount"]) == (
            b["name"],
            b["requested"],
            b["podCount"],
        )
    assert sum(n["podCount"] for n in bulk.nodes()) == sum(
        1 for p in pods if p["spec"].get("nodeName") and p["status"]["phase"] == "Running"
    )


def test_a_duplicate_pod_in_bulk_input_is_counted_once():
    pod = make_pod("p1", cpu="250m", node_name="n1")
    state = ClusterState.from_objects([make_node("n1")], [pod, copy.deepcopy(pod)])
    assert usage(state, "n1")[::2] == (250, 1)


def test_a_pod_without_uid_is_keyed_by_namespace_and_name(state):
    state.apply_pod(make_pod("p1", namespace="web", uid="", cpu="100m", node_name="n1"))
    assert state.pod("web/p1")["name"] == "p1"
    assert state.delete_pod("web/p1") is True
    assert usage(state, "n1")[0] == 0


def test_a_bad_pod_leaves_the_state_unchanged(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    version = state.version
    with pytest.raises(ValueError, match="invalid quantity"):
        state.apply_pod(make_pod("p1", cpu="lots", node_name="n1"))
    assert (usage(state, "n1")[::2], state.version) == ((250, 1), version)


# ---------------------------------------------------------------------------------------------
# reading


def test_nodes_are_listed_by_name_and_pods_by_namespace_and_name():
    state = ClusterState.from_objects(
        [make_node("b"), make_node("c"), make_node("a")],
        [make_pod("z", namespace="a"), make_pod("y", namespace="b"), make_pod("x", namespace="b")],
    )
    assert [n["name"] for n in state.nodes()] == ["a", "b", "c"]
    assert [(p["namespace"], p["name"]) for p in state.pods()] == [
        ("a", "z"),
        ("b", "x"),
        ("b", "y"),
    ]
    state.apply_node(make_node("0"))
    assert [n["name"] for n in state.nodes()] == ["0", "a", "b", "c"]
    assert (state.node_count(), state.pod_count()) == (4, 3)


def test_every_change_moves_the_version(state):
    versions = [state.version]
    state.apply_node(make_node("n3"))
    versions.append(state.version)
    state.apply_pod(make_pod("p1", node_name="n3"))
    versions.append(state.version)
    state.delete_pod("uid-default-p1")
    versions.append(state.version)
    state.delete_node("n3")
    versions.append(state.version)
    assert versions == sorted(set(versions))


def test_views_handed_out_are_never_changed(state):
    before_nodes = state.nodes()
    before_node = state.node("n1")
    snapshot = copy.deepcopy(before_node)
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1"))
    assert before_node == snapshot
    assert before_node["requested"]["cpu"] == 0 and before_nodes[0] is before_node
    assert state.node("n1")["requested"]["cpu"] == 250


# ---------------------------------------------------------------------------------------------
# indexes against brute force


def brute_force(pods, namespace, selector):
    return sorted(
        p["uid"]
        for p in pods
        if p["phase"] not in ("Succeeded", "Failed")
        and (not namespace or p["namespace"] == namespace)
        and all(p["labels"].get(k) == v for k, v in selector.items())
    )


def selectors(rng: random.Random, pods) -> list[tuple[str, dict]]:
    """Queries drawn from the pods' own labels, plus misses and edge cases."""
    queries = [("", {}), ("web", {}), ("nowhere", {}), ("", {"app": "no-such-app"})]
    for _ in range(60):
        pod = pods[rng.randrange(len(pods))]["metadata"]
        labels = list(pod["labels"].items())
        chosen = dict(rng.sample(labels, rng.randrange(1, len(labels) + 1)))
        namespace = rng.choice(["", pod["namespace"], "default"])
        queries.append((namespace, chosen))
    queries.append(("", {"tier": "web", "version": "v1"}))
    queries.append(("", {"app": 3}))  # not a string: matches nothing
    return queries


def check_indexes(reader, rng):
    pods = reader.pods()
    raw = [p["object"] for p in pods]
    for namespace, selector in selectors(rng, raw):
        got = sorted(p["uid"] for p in reader.pods_matching(namespace, selector))
        assert got == brute_force(pods, namespace, selector), (namespace, selector)
        assert reader.count_pods(namespace, selector) == len(got)
        live = [p for p in pods if p["uid"] in set(got)]
        node = rng.choice(reader.nodes())
        assert reader.count_pods_on_node(node["name"], namespace, selector) == sum(
            1 for p in live if p["nodeName"] == node["name"]
        )
        zone = node["labels"]["topology.kubernetes.io/zone"]
        in_zone = {
            n["name"] for n in reader.nodes() if n["labels"]["topology.kubernetes.io/zone"] == zone
        }
        assert reader.count_pods_in_domain(
            "topology.kubernetes.io/zone", zone, namespace, selector
        ) == sum(1 for p in live if p["nodeName"] in in_zone)


def test_pods_matching_equals_a_brute_force_scan():
    nodes, pods = generate_cluster(30, 2000, seed=7)
    state = ClusterState.from_objects(nodes, pods)
    check_indexes(state, random.Random(1))


def test_indexes_stay_right_through_events_and_snapshots():
    nodes, pods = generate_cluster(30, 1500, seed=8)
    state = ClusterState.from_objects(nodes, pods[:1000])
    rng = random.Random(2)
    frozen = []
    for round_ in range(4):
        frozen.append((state.freeze(), [copy.deepcopy(p["uid"]) for p in state.pods()]))
        for pod in pods[1000 + round_ * 100 : 1100 + round_ * 100]:
            state.apply_pod(pod)
        for pod in rng.sample(state.pods(), 60):
            state.delete_pod(pod["uid"])
        for pod in rng.sample(state.pods(), 60):  # relabel, rebind or finish some pods
            obj = copy.deepcopy(pod["object"])
            obj["metadata"]["labels"]["app"] = rng.choice(["app-1", "app-2", "moved"])
            obj["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
            obj["status"]["phase"] = rng.choice(["Running", "Running", "Succeeded"])
            state.apply_pod(obj)
        check_indexes(state, rng)
    for snapshot, uids in frozen:  # every snapshot still answers for its own moment
        assert [p["uid"] for p in snapshot.pods()] == uids
        check_indexes(snapshot, rng)


def test_a_label_key_indexed_by_a_query_is_kept_current(state):
    state.apply_pod(make_pod("p1", labels={"app": "a"}))
    assert state.count_pods("", {"app": "a"}) == 1  # indexes the key "app"
    state.apply_pod(make_pod("p2", labels={"app": "a"}, node_name="n1"))
    state.apply_pod(make_pod("p1", labels={"app": "b"}))  # relabelled
    state.apply_pod(make_pod("p3", labels={"app": "a"}, phase="Succeeded"))
    assert [p["name"] for p in state.pods_matching("", {"app": "a"})] == ["p2"]
    assert [p["name"] for p in state.pods_matching("", {"app": "b"})] == ["p1"]
    state.delete_pod("uid-default-p2")
    assert state.pods_matching("", {"app": "a"}) == ()


def test_a_snapshot_does_not_see_later_changes(state):
    state.apply_pod(make_pod("p1", cpu="250m", node_name="n1", labels={"app": "a"}))
    snapshot = state.freeze()
    assert snapshot.count_pods("default", {"app": "a"}) == 1  # memoized in the snapshot

    state.apply_pod(make_pod("p2", cpu="500m", node_name="n1", labels={"app": "a"}))
    state.delete_pod("uid-default-p1")
    state.apply_node(make_node("n9"))
    state.delete_node("n2")

    assert usage(snapshot, "n1")[::2] == (250, 1)
    assert [n["name"] for n in snapshot.nodes()] == ["n1", "n2"]
    assert [p["name"] for p in snapshot.pods_matching("default", {"app": "a"})] == ["p1"]
    # queries first asked after the changes (nothing memoized) see the frozen moment too
    assert [p["name"] for p in snapshot.pods_matching("", {"app": "a"})] == ["p1"]
    assert [p["name"] for p in snapshot.pods_matching("default", {})] == ["p1"]
    assert [p["name"] for p in snapshot.pods_on_node("n1")] == ["p1"]
    assert snapshot.count_pods_on_node("n1", "", {"app": "a"}) == 1
    assert snapshot.pod("uid-default-p2") is None
    # ...while the state and a new snapshot see them
    assert [p["name"] for p in state.pods_matching("default", {"app": "a"})] == ["p2"]
    assert state.freeze().count_pods("default", {"app": "a"}) == 1
    assert [n["name"] for n in state.freeze().nodes()] == ["n1", "n9"]


def test_a_snapshot_has_no_mutators():
    snapshot = ClusterState().freeze()
    assert isinstance(snapshot, ClusterSnapshot)
    assert not hasattr(snapshot, "apply_pod") and not hasattr(snapshot, "freeze")


# ---------------------------------------------------------------------------------------------
# storage


def _same_cluster(a, b) -> None:
    assert a.version == b.version
    assert a.nodes() == b.nodes()
    assert a.pods() == b.pods()
    for namespace, selector in [("", {}), ("web", {"tier": "web"}), ("", {"app": "app-1"})]:
        assert sorted(p["uid"] for p in a.pods_matching(namespace, selector)) == sorted(
            p["uid"] for p in b.pods_matching(namespace, selector)
        )


@pytest.fixture(scope="module")
def generated() -> ClusterState:
    nodes, pods = generate_cluster(20, 400, seed=9)
    return ClusterState.from_objects(nodes, pods)


def test_to_bytes_round_trips_a_snapshot(generated):
    snapshot = generated.freeze()
    loaded = ClusterSnapshot.from_bytes(snapshot.to_bytes())
    assert isinstance(loaded, ClusterSnapshot)
    _same_cluster(snapshot, loaded)
    assert loaded.nodes()[0]["requested"]["nvidia_com_gpu"] == 0  # ResourceMaps again


def test_a_stored_snapshot_loads_as_a_state_that_takes_events(generated):
    loaded = ClusterState.from_bytes(generated.freeze().to_bytes())
    _same_cluster(generated, loaded)
    node = loaded.nodes()[0]["name"]
    before = loaded.node(node)["requested"]["cpu"]
    loaded.apply_pod(make_pod("extra", cpu="300m", node_name=node))
    assert loaded.node(node)["requested"]["cpu"] == before + 300


def test_a_lean_snapshot_keeps_everything_but_the_pod_objects(generated):
    snapshot = generated.freeze()
    full, lean = snapshot.to_bytes(), snapshot.to_bytes(pod_objects=False)
    loaded = ClusterSnapshot.from_bytes(lean)
    assert len(lean) < len(full) / 2
    assert loaded.nodes() == snapshot.nodes()
    pod = loaded.pods()[0]
    original = snapshot.pod(pod["uid"])
    assert {k: v for k, v in pod.items() if k != "object"} == {
        k: v for k, v in original.items() if k != "object"
    }
    assert pod["object"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: original["object"]["metadata"][k] for k in ("name", "namespace", "uid")},
    }


def test_label_keys_indexed_before_storing_are_indexed_on_load(generated):
    snapshot = generated.freeze()
    snapshot.count_pods("", {"tier": "web"})
    loaded = ClusterSnapshot.from_bytes(snapshot.to_bytes(), label_keys=["app"])
    assert loaded.indexed_labels() == {"tier", "app"}
    assert loaded.count_pods("", {"tier": "web", "app": "app-1"}) == sum(
        1
        for p in snapshot.pods()
        if p["phase"] != "Succeeded"
        and p["labels"]["tier"] == "web"
        and p["labels"]["app"] == "app-1"
    )
    loaded.index_labels(["version"])
    assert "version" in loaded.indexed_labels()


@pytest.mark.parametrize("data", [b"not json", b"[1, 2]", b'{"format": 999}'])
def test_it_refuses_bytes_that_are_not_a_snapshot(data):
    with pytest.raises(ValueError, match="not a schedweb cluster snapshot"):
        ClusterSnapshot.from_bytes(data)


@pytest.mark.parametrize("freeze", [True, False])
def test_pickle_round_trips_snapshots_and_states(generated, freeze):
    original = generated.freeze() if freeze else generated
    loaded = pickle.loads(pickle.dumps(original))
    assert type(loaded) is type(original)
    _same_cluster(original, loaded)


# ---------------------------------------------------------------------------------------------
# namespaces, services and controllers (what kube-scheduler reads besides nodes and pods)


def _ns(name: str, **labels: str) -> dict:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _svc(name: str, selector: dict | None, ns: str = "default") -> dict:
    spec = {"selector": selector} if selector is not None else {}
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_objects_are_kept_small_and_follow_changes_and_deletions():
    state = ClusterState.from_objects([], [], [_ns("shop", team="a"), _svc("web", {"app": "web"})])
    # only names, labels, selectors and the resourceVersion: nothing else of the object
    assert state.objects("Service")["Service/default/web"] == {
        "kind": "Service",
        "namespace": "default",
        "name": "web",
        "resourceVersion": "",
        "selector": {"app": "web"},
    }
    snap = state.freeze()
    state.apply_object("Namespace", _ns("shop", team="b"))
    state.apply_object("Service", _svc("db", {}))  # an empty selector selects nothing
    assert state.delete_object("Service/default/web") and not state.delete_object("Service/x/y")
    assert state.namespaces() == {"shop": {"team": "b"}}
    assert state.services("default") == ()
    # the frozen snapshot never changes (the kinds' dicts are copied on write)
    assert snap.namespaces() == {"shop": {"team": "a"}}
    assert snap.services("default") == ({"app": "web"},)


def test_a_replication_controller_without_a_selector_selects_its_templates_labels():
    rc = {
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"app": "old"}}}},
    }
    state = ClusterState.from_objects([], [], [rc])
    assert state.controller("ReplicationController", "default", "rc")["selector"] == {"app": "old"}


def test_without_namespace_objects_each_pods_namespace_gets_its_name_label():
    state = ClusterState.from_objects([], [make_pod("a", namespace="web")])
    assert state.namespaces() == {"web": {"kubernetes.io/metadata.name": "web"}}


def test_objects_survive_storage_and_pickling():
    state = ClusterState.from_objects(
        [make_node("n1")], [], [_ns("shop", team="a"), _svc("web", {"app": "web"})]
    )
    for copy_ in (
        ClusterSnapshot.from_bytes(state.to_bytes(pod_objects=False)),
        ClusterState.from_bytes(state.to_bytes()),
        pickle.loads(pickle.dumps(state)),
    ):
        assert copy_.namespaces() == {"shop": {"team": "a"}}
        assert copy_.services("default") == ({"app": "web"},)
        assert copy_.object_count() == 2


def test_the_services_index_survives_pod_changes_and_follows_service_changes():
    state = ClusterState.from_objects([make_node("n1")], [], [_svc("web", {"app": "web"})])
    first = state.services("default")
    state.apply_pod(make_pod("p", node_name="n1"))  # pods change often: no rebuild
    assert state.services("default") is first
    state.apply_object("Service", _svc("api", {"app": "api"}))  # unshared: changed in place
    assert state.services("default") == ({"app": "api"}, {"app": "web"})
    snap = state.freeze()
    state.delete_object("Service/default/api")
    assert state.services("default") == ({"app": "web"},)
    assert snap.services("default") == ({"app": "api"}, {"app": "web"})


def test_a_node_held_without_a_status_is_incomplete_until_its_status_arrives():
    """A kubelet creates its Node, then writes its status: until then kube-scheduler places
    nothing there (no allocatable pods), so an extender asked about it is behind (issue 24)."""
    bare = make_node("fresh")
    bare["status"] = {}
    state = ClusterState.from_objects([make_node("n1"), bare], [])
    assert state.incomplete_nodes() == {"fresh"}
    snapshot = state.freeze()
    state.apply_node(make_node("fresh"))  # the status arrives
    assert state.incomplete_nodes() == set()
    assert snapshot.incomplete_nodes() == {"fresh"}  # a snapshot keeps what it was
    state.apply_node(bare)
    state.delete_node("fresh")
    assert state.incomplete_nodes() == set()
    loaded = ClusterState.from_bytes(ClusterState.from_objects([bare], []).to_bytes())
    assert loaded.incomplete_nodes() == {"fresh"}
