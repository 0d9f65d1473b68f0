"""The watcher against the real kube-apiserver and Redis: changes reach readers as deltas, a
410 relists without losing or duplicating objects, Redis restarts and lost locks are handled,
and a re-armed watcher continues the history. (How fast changes arrive is bench/snapshot.py's
figure, target 2 s.)"""

from __future__ import annotations

import pytest

from policies.cluster.live import LiveClient
from policies.cluster.reader import BackgroundRefresher, SnapshotReader
from policies.cluster.store import SnapshotStore
from tests.harness.resources import (
    node_cordon,
    node_create,
    node_delete,
    node_manifest,
    node_relabel,
    node_taint,
    pod_bind,
    pod_create,
    pod_delete,
    pod_manifest,
)

from .conftest import apiserver_restart, synced_reader, wait_until

pytestmark = pytest.mark.cluster


def _fresh(reader: SnapshotReader):
    reader.refresh()
    return reader.current.state


def test_node_and_pod_changes_reach_a_reader_through_redis(
    control_plane, live_redis, cluster_name, names, run_watcher
):
    api = control_plane.api
    store = SnapshotStore(cluster_name, client=live_redis)
    run_watcher(client=LiveClient(kubeconfig=control_plane.kubeconfig), store=store)
    reader = synced_reader(store)
    node, pod = names("node"), names("pod")

    def seen(check, what):
        return wait_until(lambda: check(_fresh(reader)), what=what)

    node_create(api=api, manifest=node_manifest(name=node, cpu="4", labels={"zone": "z1"}))
    seen(lambda s: s.node(node), "a new node")
    node_relabel(api=api, name=node, labels={"zone": "z2", "disk": "ssd"})
    seen(
        lambda s: (
            s.node(node)["labels"].get("zone") == "z2"
            and s.node(node)["labels"].get("disk") == "ssd"
        ),
        "new labels",
    )
    node_taint(
        api=api, name=node, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    )
    seen(
        lambda s: (
            s.node(node)["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        ),
        "a taint",
    )
    node_cordon(api=api, name=node)
    seen(lambda s: s.node(node)["unschedulable"], "a cordon")

    created = pod_create(api=api, manifest=pod_manifest(name=pod, cpu="250m", memory="64Mi"))
    uid = created["metadata"]["uid"]
    seen(
        lambda s: s.pod(uid) and s.pod(uid)["phase"] == "Pending" and not s.pod(uid)["nodeName"],
        "a pending pod",
    )
    pod_bind(api=api, name=pod, node=node)
    # bound: the node's usage follows (0 + 250m CPU, 0 + 64Mi memory, 1 pod)
    seen(
        lambda s: (
            s.pod(uid)["nodeName"] == node
            and s.node(node)["requested"]["cpu"] == 250
            and s.node(node)["requested"]["memory"] == 64 * 2**20
            and s.node(node)["podCount"] == 1
        ),
        "a binding and the node's usage",
    )
    pod_delete(api=api, name=pod)
    seen(
        lambda s: (
            s.pod(uid) is None
            and s.node(node)["requested"]["cpu"] == 0
            and s.node(node)["podCount"] == 0
        ),
        "a pod deletion",
    )
    node_delete(api=api, name=node)
    seen(lambda s: s.node(node) is None, "a node deletion")
    assert reader.full_loads == 1  # every change arrived as a delta


def test_a_watch_expiry_relists_without_losing_or_duplicating_objects(
    private_plane, live_redis, cluster_name, run_watcher
):
    api = private_plane.api
    for name in ("keep", "gone"):
        node_create(api=api, manifest=node_manifest(name=name, cpu="4"))
    old_pod = pod_create(api=api, manifest=pod_manifest(name="old", cpu="100m"))
    pod_bind(api=api, name="old", node="keep")
    store = SnapshotStore(cluster_name, client=live_redis)
    running = run_watcher(client=LiveClient(kubeconfig=private_plane.kubeconfig), store=store)
    reader = synced_reader(store)
    wait_until(
        lambda: _fresh(reader).node("gone") and _fresh(reader).pod(old_pod["metadata"]["uid"]),
        what="the first list",
    )
    running.stop()  # the watcher keeps its state and resource versions

    # Changes it does not see, then a restart: its resource versions are now too old (410).
    node_delete(api=api, name="gone")
    node_create(api=api, manifest=node_manifest(name="new", cpu="8"))
    node_relabel(api=api, name="keep", labels={"after": "restart"})
    pod_delete(api=api, name="old")
    new_pod = pod_create(api=api, manifest=pod_manifest(name="fresh", cpu="300m"))
    pod_bind(api=api, name="fresh", node="new")
    apiserver_restart(private_plane)

    rerun = run_watcher(watcher=running.watcher)  # the same watcher: it resumes its watches
    wait_until(lambda: rerun.watcher.relists >= 1, what="a relist after 410 Gone")

    def matches_the_api() -> bool:
        snapshot = _fresh(reader)
        nodes = {
            n["metadata"]["name"]: n["metadata"]["resourceVersion"]
            for n in api.get("/api/v1/nodes")["items"]
        }
        pods = {
            p["metadata"]["uid"]: p["metadata"]["resourceVersion"]
            for p in api.get("/api/v1/pods")["items"]
        }
        return (
            {n["name"]: n["object"]["metadata"]["resourceVersion"] for n in snapshot.nodes()}
            == nodes
            and {p["uid"]: p["object"]["metadata"]["resourceVersion"] for p in snapshot.pods()}
            == pods
            and len(snapshot.pods()) == len(pods)
        )

    wait_until(matches_the_api, what="the snapshot equal to a fresh list")
    snapshot = reader.current.state
    assert snapshot.node("keep")["labels"]["after"] == "restart"
    assert snapshot.node("keep")["requested"]["cpu"] == 0  # "old" (100m) is gone
    assert snapshot.node("new")["requested"]["cpu"] == 300
    assert snapshot.pod(new_pod["metadata"]["uid"])["nodeName"] == "new"
    assert reader.full_loads == 1  # the differences arrived as deltas


def test_the_watcher_recovers_by_itself_when_redis_restarts(
    control_plane, private_redis, names, run_watcher
):
    api = control_plane.api
    store = SnapshotStore("restart", client=private_redis.client())
    token = store.lock_acquire(ttl=30)
    running = run_watcher(
        client=LiveClient(kubeconfig=control_plane.kubeconfig),
        store=store,
        lock_token=token,
        heartbeat_seconds=0.5,
    )
    reader = synced_reader(store, stale_seconds=1.0)
    before, during = names("before"), names("during")
    node_create(api=api, manifest=node_manifest(name=before))
    wait_until(lambda: _fresh(reader).node(before), what="the first node")
    first_epoch = reader.epoch

    with BackgroundRefresher(reader, interval=0.05) as refresher:
        private_redis.stop()
        node_create(api=api, manifest=node_manifest(name=during))  # happens while Redis is down
        wait_until(lambda: refresher.errors, what="the reader noticing the outage")
        assert reader.current.state.node(before)  # the last snapshot is kept meanwhile
        wait_until(lambda: reader.current.stale, what="the snapshot marked stale")
        private_redis.start()  # empty: snapshot, history and lock are gone
        recovered = wait_until(
            lambda: (
                reader.current.state.node(during) and not reader.current.stale and reader.current
            ),
            what="the snapshot rewritten with the change made during the outage",
        )
    assert reader.epoch != first_epoch  # a new history: the reader reloaded it whole
    assert recovered.state.node(before)
    assert store.lock_holder() == token  # the watcher took its lock again
    assert running.watcher.result().status == "ok"
    later = names("later")
    node_create(api=api, manifest=node_manifest(name=later))
    wait_until(lambda: _fresh(reader).node(later), what="changes flowing again as deltas")


def test_a_watcher_that_loses_its_lock_stops(control_plane, live_redis, cluster_name, run_watcher):
    store = SnapshotStore(cluster_name, client=live_redis)
    token = store.lock_acquire(ttl=1.5)
    running = run_watcher(
        client=LiveClient(kubeconfig=control_plane.kubeconfig),
        store=store,
        lock_token=token,
        lock_ttl=1.5,
    )
    synced_reader(store)
    live_redis.set(store.keys.lock, "another-watcher")
    wait_until(lambda: running.result is not None, what="the watcher stopping")
    assert running.result.ended_by == "lock-lost"


def test_a_second_watcher_continues_the_history_so_readers_get_deltas(
    control_plane, live_redis, cluster_name, names, run_watcher
):
    api = control_plane.api
    store = SnapshotStore(cluster_name, client=live_redis)
    client = LiveClient(kubeconfig=control_plane.kubeconfig)
    first = run_watcher(client=client, store=store)
    reader = synced_reader(store)
    first_result = first.stop()
    node = names("between")
    node_create(api=api, manifest=node_manifest(name=node))  # while no watcher runs
    second = run_watcher(client=client, store=store)
    wait_until(lambda: _fresh(reader).node(node), what="the change made between the runs")
    assert reader.full_loads == 1
    assert second.watcher.writer.epoch == first.watcher.writer.epoch
    assert reader.version > first_result.version


def test_namespace_labels_services_and_controllers_reach_the_snapshot_under_the_printed_rbac(
    private_plane, live_redis, cluster_name, run_watcher
):
    # schedweb's account holds exactly the ClusterRole `schedulerconfig --rbac` prints: if it
    # lacked list/watch on a kind the watcher reads, the first list would fail (403)
    from policies.schedulerconfig import worker_cluster_role
    from tests.harness.controlplane import LIMITED_USER
    from tests.harness.resources import namespace_create

    api = private_plane.api
    role, binding = worker_cluster_role(queue=False, name="schedweb-test")
    binding["subjects"] = [
        {"kind": "User", "name": LIMITED_USER, "apiGroup": "rbac.authorization.k8s.io"}
    ]
    api.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    api.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    client = LiveClient(kubeconfig=private_plane.kubeconfig_for(private_plane.limited_token))
    store = SnapshotStore(cluster_name, client=live_redis)
    # RBAC caches refresh quickly but not instantly: the watcher's backoff retries the list
    running = run_watcher(client=client, store=store)
    reader = synced_reader(store)

    def seen(check, what):
        return wait_until(lambda: check(_fresh(reader)), what=what)

    namespace_create(api=api, name="shop")
    seen(lambda s: s.namespaces().get("shop", {}).get("kubernetes.io/metadata.name"), "a namespace")
    api.patch("/api/v1/namespaces/shop", {"metadata": {"labels": {"team": "storefront"}}})
    seen(lambda s: s.namespaces()["shop"].get("team") == "storefront", "a namespace label change")
    api.post(
        "/api/v1/namespaces/shop/services",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        },
    )
    seen(lambda s: s.services("shop") == ({"app": "web"},), "a new Service")
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    api.post(
        "/apis/apps/v1/namespaces/shop/replicasets",
        {
            "metadata": {"name": "web-1"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template,
            },
        },
    )
    seen(lambda s: s.controller("ReplicaSet", "shop", "web-1"), "a new ReplicaSet")
    api.delete("/api/v1/namespaces/shop/services/web")
    seen(lambda s: s.services("shop") == (), "a deleted Service")
    assert reader.full_loads == 1  # every change arrived as a delta
    assert running.stop().status == "ok"


def test_a_bound_pod_deleted_at_once_is_reported_with_its_node(
    control_plane, live_redis, cluster_name, names, run_watcher
):
    """Its decision records learn where it ran, though no snapshot ever shows it bound for
    long (the 30 s resolver would find it gone)."""
    import threading

    api = control_plane.api
    reported: list[dict] = []
    lock = threading.Lock()

    def record(items):
        with lock:
            reported.extend(items)

    store = SnapshotStore(cluster_name, client=live_redis)
    run_watcher(
        client=LiveClient(kubeconfig=control_plane.kubeconfig),
        store=store,
        on_bound_pods_deleted=record,
    )
    synced_reader(store)
    node, bound, pending = names("node"), names("bound"), names("pending")
    node_create(api=api, manifest=node_manifest(name=node, cpu="4"))
    uid = pod_create(api=api, manifest=pod_manifest(name=bound, cpu="100m"))["metadata"]["uid"]
    pod_create(api=api, manifest=pod_manifest(name=pending, cpu="100m"))
    pod_bind(api=api, name=bound, node=node)
    pod_delete(api=api, name=bound)
    pod_delete(api=api, name=pending)  # never bound: nothing to report
    wait_until(lambda: any(r["podUid"] == uid for r in reported), what="the report")
    with lock:
        assert [(r["kind"], r["podUid"], r["node"]) for r in reported] == [("chosen", uid, node)]
    node_delete(api=api, name=node)
