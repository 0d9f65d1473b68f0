"""A bound pod's share of its node's NonZeroRequested is memoized by what it reads of the spec
(policies/schedmodel/requests.py): the memo must give what the computation gives for every spec,
however the specs that share a signature differ elsewhere, and stay bounded."""

from __future__ import annotations

import random
from typing import Any

from policies.schedmodel import requests
from policies.schedmodel.requests import _node_nonzero_share, node_nonzero_share

QUANTITIES = ["100m", "0.5", "2", "128Mi", "1Gi", "1e3", "250m", "3k", "not-a-quantity", "1.5Gi"]


def _container(rng: random.Random, *, init: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": f"c{rng.randrange(100)}", "image": f"img:{rng.random()}"}
    requests_ = {name: rng.choice(QUANTITIES) for name in ("cpu", "memory") if rng.random() < 0.7}
    if rng.random() < 0.8:
        container["resources"] = {"requests": requests_, "limits": {"cpu": rng.choice(QUANTITIES)}}
    if init and rng.random() < 0.4:
        container["restartPolicy"] = "Always"  # a sidecar: its requests add to the sum
    return container


def _spec(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [_container(rng) for _ in range(rng.randrange(0, 3))],
        "nodeName": f"n{rng.randrange(5)}",
    }
    if rng.random() < 0.5:
        spec["initContainers"] = [_container(rng, init=True) for _ in range(rng.randrange(1, 3))]
    if rng.random() < 0.3:
        spec["resources"] = {"requests": {"cpu": rng.choice(QUANTITIES)}}
    if rng.random() < 0.2:
        spec["overhead"] = {"memory": rng.choice(QUANTITIES)}
    return spec


def test_the_memo_gives_what_the_computation_gives_for_every_spec():
    rng = random.Random(28)
    requests._shares.clear()
    specs = [_spec(rng) for _ in range(3000)]
    for spec in specs:  # a memo keyed by too little would hand one spec another's answer
        assert node_nonzero_share(spec) == _node_nonzero_share(spec), spec
    assert 0 < len(requests._shares) < len(specs)  # specs that ask alike share an entry


def test_fields_the_share_does_not_read_share_an_entry_and_order_of_init_containers_counts():
    requests._shares.clear()
    a = {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    b = {"containers": [{"name": "b", "image": "y", "resources": {"requests": {"cpu": "1"}}}]}
    assert node_nonzero_share(a) == node_nonzero_share(b) == (1000, 200 * 1024 * 1024)
    assert len(requests._shares) == 1
    # a sidecar before a big init container lifts the init peak; after it, it does not
    sidecar = {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}}
    big = {"resources": {"requests": {"memory": "2Gi"}}}
    first = {"containers": [], "initContainers": [sidecar, big]}
    last = {"containers": [], "initContainers": [big, sidecar]}
    assert node_nonzero_share(first) == _node_nonzero_share(first)
    assert node_nonzero_share(last) == _node_nonzero_share(last)
    assert node_nonzero_share(first) != node_nonzero_share(last)


def test_specs_that_cannot_be_keyed_are_computed_and_the_memo_stays_bounded(monkeypatch):
    odd = {"containers": [{"resources": {"requests": {"cpu": ["1"]}}}], "overhead": [1]}
    assert node_nonzero_share(odd) == _node_nonzero_share(odd)
    assert node_nonzero_share({"containers": ["not a container"]}) == (100, 200 * 1024 * 1024)
    monkeypatch.setattr(requests, "SHARE_CACHE", 10)
    requests._shares.clear()
    for milli in range(1, 26):
        spec = {"containers": [{"resources": {"requests": {"cpu": f"{milli}m"}}}]}
        assert node_nonzero_share(spec) == (milli, 200 * 1024 * 1024)
        assert len(requests._shares) <= 10


def test_only_short_quantity_strings_are_cached():
    requests._quantity_cached.cache_clear()
    assert requests._quantity("128Mi") == 128 * 1024 * 1024
    long = "1" + "0" * 40  # a valid quantity longer than QUANTITY_CACHED_CHARS
    assert requests._quantity(long) == 10**40
    assert requests._quantity("nope") == 0
    assert requests._quantity_cached.cache_info().currsize == 2  # "128Mi" and "nope"
