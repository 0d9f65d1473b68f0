"""The scheduler model's view of the bound pods (`Existing`) is brought from one snapshot to the
next by the changes between them (the snapshot's Lineage, policies/cluster/state.py) instead of
being built again over every pod: whatever the changes, and however many snapshots no preview
looked at, the result equals a build over the later snapshot."""

from __future__ import annotations

import random
from typing import Any

import pytest

from policies.cluster import state as state_module
from policies.cluster.state import ClusterState
from policies.schedmodel import existing as existing_module
from policies.schedmodel.existing import Existing, existing_for
from tests.builders import make_node, make_pod

NODES = [f"n{i}" for i in range(6)]
NAMESPACES = ["a", "b", "c"]


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    node = make_node(name, labels={"rank": str(rng.randrange(3))})
    images = [
        {"names": [f"img-{rng.randrange(5)}:1"], "sizeBytes": rng.randrange(1, 900) * 2**20}
        for _ in range(rng.randrange(3))
    ]
    node["status"]["images"] = images
    return node


def _pod(rng: random.Random, number: int, *, node: str = "") -> dict[str, Any]:
    extra: dict[str, Any] = {}
    kind = rng.random()
    if kind < 0.2:
        term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "rank"}
        extra["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    elif kind < 0.35:
        extra["affinity"] = {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "rank"}}
                ]
            }
        }
    pod = make_pod(
        f"p{number:04d}",
        namespace=rng.choice(NAMESPACES),
        cpu=rng.choice(["100m", "1", None]),
        memory=rng.choice(["64Mi", None]),
        node_name=node,
        labels={"app": rng.choice(["x", "y"])},
        uid=f"uid-{number:04d}",
        **extra,
    )
    if rng.random() < 0.2:
        pod["spec"]["containers"][0]["ports"] = [
            {"containerPort": 80, "hostPort": 8000 + number % 3}
        ]
    return pod


def _shape(existing: Existing) -> dict[str, Any]:
    """Everything the plugins read, by pod identity (empty lists a reader may have added
    dropped)."""

    def ids(pods: list) -> list[int]:
        return [id(p) for p in pods]

    return {
        "by_node": {k: ids(v) for k, v in existing.by_node.items() if v},
        "by_namespace": {k: ids(v) for k, v in existing.by_namespace.items() if v},
        "with_affinity": ids(existing.with_affinity),
        "with_anti": ids(existing.with_anti),
        "ports": dict(existing.ports),
        "nonzero": existing.nonzero,
        "images": {k: v for k, v in existing.images.items() if v},
        "node_images": existing.node_images,
        "namespaces": existing.namespaces,
        "listed": existing._listed,
    }


def _change(rng: random.Random, state: ClusterState, number: int) -> None:
    pods = list(state._pods.values())
    roll = rng.random()
    if roll < 0.3 or not pods:
        state.apply_pod(_pod(rng, number, node=rng.choice(["", *NODES])))
    elif roll < 0.5:  # a pending pod bound, or a bound one moved (a new pod of the same key)
        view = rng.choice(pods)
        raw = _pod(rng, int(view["uid"].split("-")[1]), node=rng.choice(NODES))
        raw["metadata"]["namespace"] = view["namespace"]
        state.apply_pod(raw)
    elif roll < 0.6:  # terminated
        view = rng.choice(pods)
        raw = _pod(rng, int(view["uid"].split("-")[1]), node=view["nodeName"])
        raw["metadata"]["namespace"] = view["namespace"]
        raw["status"]["phase"] = rng.choice(["Succeeded", "Failed"])
        state.apply_pod(raw)
    elif roll < 0.75:
        state.delete_pod(rng.choice(pods)["uid"])
    elif roll < 0.85:
        state.apply_node(_node(rng, rng.choice(NODES)))
    elif roll < 0.9:
        state.delete_node(rng.choice(NODES))
    else:
        name = rng.choice(NAMESPACES)
        state.apply_object(
            "Namespace",
            {
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"team": str(rng.random())}},
            },
        )


@pytest.mark.parametrize("seed", range(8))
def test_a_moved_existing_equals_a_build_over_the_later_snapshot(seed, monkeypatch):
    monkeypatch.setattr(existing_module, "_LAST", [None])
    rng = random.Random(seed)
    state = ClusterState.from_objects(
        [_node(rng, n) for n in NODES],
        [_pod(rng, i, node=rng.choice(["", *NODES])) for i in range(60)],
    )
    number, moved = 60, 0
    for _round in range(40):
        for _ in range(rng.randrange(0, 12)):
            number += 1
            _change(rng, state, number)
        snapshot = state.freeze()
        if rng.random() < 0.4:
            continue  # no preview over this snapshot: the next one moves across both
        expected = _shape(Existing(snapshot))
        derived = existing_module._moved(snapshot)  # what existing_for does first
        if derived is not None:
            moved += 1
            assert _shape(derived) == expected
        found = existing_for(snapshot)
        assert _shape(found) == expected
        assert found.cluster is snapshot
    assert moved > 10  # most were moved, not built


def test_the_older_existing_is_left_as_it_was_and_a_broken_chain_builds_afresh(monkeypatch):
    monkeypatch.setattr(existing_module, "_LAST", [None])
    monkeypatch.setattr(state_module, "LINEAGE_MAX", 5)
    rng = random.Random(1)
    state = ClusterState.from_objects([_node(rng, n) for n in NODES], [])
    state.apply_pod(_pod(rng, 1, node="n1"))
    first = state.freeze()
    before = existing_for(first)
    kept = _shape(before)
    state.apply_pod(_pod(rng, 2, node="n1"))
    second = state.freeze()
    assert existing_module._moved(second) is not None
    after = existing_for(second)
    assert _shape(before) == kept  # untouched
    assert len(after.by_node["n1"]) == 2 and len(before.by_node["n1"]) == 1
    for i in range(3, 10):  # more changes than a chain holds: the next snapshot starts one
        state.apply_pod(_pod(rng, i, node="n2"))
    third = state.freeze()
    assert third.lineage().changes_since(second.lineage().history, second.version) is None
    assert existing_module._moved(third) is None
    assert _shape(existing_for(third)) == _shape(Existing(third))
    # another state's snapshot never follows this one's, whatever its version
    other = ClusterState.from_objects([_node(rng, n) for n in NODES], [])
    other.version = third.version
    assert existing_module._moved(other.freeze()) is None
