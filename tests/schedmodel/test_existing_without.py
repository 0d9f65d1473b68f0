"""Existing.without: the model's index of bound pods for a snapshot without one pod, derived
from the full snapshot's, equals the one built from scratch over that snapshot."""

from __future__ import annotations

import pytest

from policies.cluster.exclude import PodExcluder
from policies.cluster.sources import cluster_load
from policies.schedmodel.existing import Existing


def _uids(pods) -> list[str]:
    return sorted(p["uid"] for p in pods)


def _same(derived: Existing, built: Existing) -> None:
    nodes = set(derived.by_node) | set(built.by_node)
    for node in nodes:
        assert _uids(derived.by_node.get(node, ())) == _uids(built.by_node.get(node, ())), node
        assert derived.nonzero.get(node, (0, 0)) == built.nonzero.get(node, (0, 0)), node
        assert sorted(derived.ports.get(node, ())) == sorted(built.ports.get(node, ())), node
    for ns in set(derived.by_namespace) | set(built.by_namespace):
        assert _uids(derived.by_namespace.get(ns, ())) == _uids(built.by_namespace.get(ns, ()))
    assert _uids(derived.with_affinity) == _uids(built.with_affinity)
    assert _uids(derived.with_anti) == _uids(built.with_anti)
    assert derived.images == built.images and derived.namespaces == built.namespaces


@pytest.mark.parametrize("index", range(0, 60, 7))
def test_the_derived_index_equals_the_one_built_without_the_pod(index):
    cluster = cluster_load("demo")
    bound = [p for p in cluster.state.pods() if p["nodeName"] and p["phase"] == "Running"]
    pod = bound[index % len(bound)]
    without, excluded = PodExcluder(cluster).without(pod["uid"])
    assert excluded
    derived = Existing(cluster.state).without(pod)
    _same(derived, Existing(without.state))
    # and the full snapshot's own index is left as it was
    assert pod["uid"] in _uids(Existing(cluster.state).by_node[pod["nodeName"]])
    assert pod["uid"] not in _uids(derived.by_node[pod["nodeName"]])
