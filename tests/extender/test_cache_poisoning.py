"""No caller's request changes another's answer (issue 27): the extender's caches (the converted
pod, the evaluation filter shares with prioritize, prioritize's reuse of filter's parse) are
keyed by the pod's content, not by the uid and resourceVersion a caller claims.

The attack replayed: a client sends a pending pod's uid, resourceVersion and name with other
labels first; then kube-scheduler asks about the real pod. Before, the filter
`pod.labels.allow == "yes"` then passed 4 of 4 nodes for a pod without the label (and the
reverse: an honest pod with the label was rejected)."""

from __future__ import annotations

import copy

import orjson
import pytest

from policies.extender.runtime import runtime
from tests.asgiclient import extender_post

from .conftest import args_body, go_pod

pytestmark = pytest.mark.django_db

NAMES = ["cp-1", "a-small-1", "worker-medium-a-1", "a-spot-1"]

# Fail: a pod without the label is an evaluation error on every node, which rejects the node.
ALLOW = """
name: allow-label
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: allowed
    expression: pod.labels.allow == "yes"
"""

# A ranking the pod's labels reverse: with `flip` the shortest name scores lowest.
RANK = """
name: rank
schedulerNames: [schedweb]
failurePolicy: Ignore
scores:
  - name: name-length
    expression: '"flip" in pod.labels ? size(node.name) : 20 - size(node.name)'
    weight: 1
    normalize: minmax
"""


def _pair(labels: dict[str, str]) -> tuple[dict, dict]:
    """The honest pod with `labels` and a forgery: same uid, resourceVersion and name, other
    labels."""
    honest = go_pod("victim", labels=labels)
    forged = copy.deepcopy(honest)
    forged["metadata"]["labels"] = {"allow": "yes"} if "allow" not in labels else {"app": "web"}
    return honest, forged


def _filter(pod: dict, names=NAMES, *, full: bool = False) -> dict:
    response = extender_post("filter", args_body(pod, names, full=full))
    assert response.status_code == 200
    return orjson.loads(response.content)


def _passed(result: dict) -> list[str]:
    if result["NodeNames"] is not None:
        return result["NodeNames"]
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]


def _prioritize(pod: dict, names=NAMES) -> list[dict]:
    response = extender_post("prioritize", args_body(pod, names))
    assert response.status_code == 200
    return orjson.loads(response.content)


@pytest.mark.parametrize("full", [False, True], ids=["node-names", "node-objects"])
def test_a_forged_pod_with_the_label_does_not_admit_the_real_pod_without_it(publish, full):
    publish(ALLOW)
    honest, forged = _pair({"app": "web"})
    assert _passed(_filter(forged, full=full)) == NAMES  # the forgery passes, as it should
    result = _filter(honest, full=full)
    assert _passed(result) == []  # the real pod, without the label: rejected on every node
    rejected = {**result["FailedNodes"], **result["FailedAndUnresolvableNodes"]}
    assert sorted(rejected) == sorted(NAMES)


@pytest.mark.parametrize("full", [False, True], ids=["node-names", "node-objects"])
def test_a_forged_pod_without_the_label_does_not_reject_the_real_pod_with_it(publish, full):
    publish(ALLOW)
    honest, forged = _pair({"allow": "yes"})
    assert _passed(_filter(forged, full=full)) == []
    assert _passed(_filter(honest, full=full)) == NAMES


def test_a_forged_filter_does_not_decide_the_real_pods_prioritize(publish):
    publish(RANK)
    honest, forged = _pair({"app": "web"})
    forged["metadata"]["labels"]["flip"] = "1"
    cold = _prioritize(honest)  # evaluated afresh: nothing cached for the real pod yet
    runtime().extender.shared.clear()
    _filter(forged)  # shares its evaluation with a prioritize of the same pod content
    assert _prioritize(honest) == cold
    assert _prioritize(forged) != cold  # the forgery's own ranking is the reverse
    assert cold[0] == {"Host": "cp-1", "Score": 10}


def test_the_honest_verdict_holds_whatever_the_order_of_calls(publish):
    publish(ALLOW)
    honest, forged = _pair({"app": "web"})
    for pod, expected in [
        (honest, []),
        (forged, NAMES),
        (honest, []),
        (forged, NAMES),
        (honest, []),
    ]:
        assert _passed(_filter(pod)) == expected


def test_a_pod_without_uid_is_cached_by_its_content(publish):
    publish(RANK)
    pod = go_pod("anonymous")
    pod["metadata"]["uid"] = ""
    shared = runtime().extender.shared
    passed = _passed(_filter(pod))
    hits = shared.hits
    _prioritize(pod, passed)
    assert shared.hits == hits + 1
