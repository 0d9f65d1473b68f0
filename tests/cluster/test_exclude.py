"""A snapshot without one pod (the backtest judges a bound pod as it was judged: not yet there)."""

from __future__ import annotations

from policies.cluster.exclude import PodExcluder
from policies.cluster.sources import cluster_load


def running_pods(cluster, count: int) -> list[dict]:
    pods = [
        p
        for p in cluster.state.pods()
        if p["nodeName"] and p["phase"] == "Running" and p["requests"].get("cpu")
    ]
    return pods[:count]


def test_the_pod_is_taken_out_of_its_nodes_usage_and_the_snapshot_is_left_alone():
    cluster = cluster_load("demo")
    pod = running_pods(cluster, 1)[0]
    node = pod["nodeName"]
    before = cluster.state.node(node)["requested"]["cpu"]
    without, excluded = PodExcluder(cluster).without(pod["uid"])
    assert excluded is True
    # its node: the pod's CPU request no longer counted (requested - request)
    assert without.state.node(node)["requested"]["cpu"] == before - pod["requests"]["cpu"]
    assert without.state.pod(pod["uid"]) is None
    assert without.state.pod_count() == cluster.state.pod_count() - 1
    # the shared snapshot still holds it
    assert cluster.state.pod(pod["uid"]) is not None
    assert cluster.state.node(node)["requested"]["cpu"] == before


def test_each_call_takes_out_only_its_own_pod():
    cluster = cluster_load("demo")
    first, second = running_pods(cluster, 2)
    excluder = PodExcluder(cluster)
    excluder.without(first["uid"])
    without, _ = excluder.without(second["uid"])
    assert without.state.pod(first["uid"]) is not None  # put back after the first call
    assert without.state.pod(second["uid"]) is None
    assert without.state.pod_count() == cluster.state.pod_count() - 1


def test_a_pod_that_is_not_bound_or_not_there_leaves_the_cluster_as_is():
    cluster = cluster_load("demo")
    pending = next(p for p in cluster.state.pods() if not p["nodeName"])
    excluder = PodExcluder(cluster)
    assert excluder.without(pending["uid"]) == (cluster, False)
    assert excluder.without("no-such-uid") == (cluster, False)
    assert excluder.without("") == (cluster, False)
