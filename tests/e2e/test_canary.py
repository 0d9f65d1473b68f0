"""A canary end to end (issue 25, item 3), against a stock kube-scheduler over mutual TLS, the
extender listening with two worker processes (the stack's web_workers), each answering any call.

Canary 25% over CANARY_PODS pods (400): the placement tells which version judged each call.
A (stable) passes every node but rank 7 and prefers the node of the pod's slot (ranks 0-3), B
(canary) passes ranks 4-7 only and prefers rank 7; their scores give rank 4 (A's 30) and
rank 6 (B's 50) so that a pod judged by one version on filter and the other on prioritize lands
on rank 4 (B then A) or rank 6 (A then B): the gaps, 300 and 500 points at weight 10, are above
the at most about 200 by which kube-scheduler's own plugins differ between these identical nodes.
So a pod on its slot's node was judged by A on every call, on rank 7 by B on every call, and
anywhere else by both. Which version should judge a pod is sha256(uid) mod 10000 < 2500, the uid
the API server assigned.

A canary that rejects every pod, guard minPods GUARD_PODS: the guard rolls it back by itself,
the audit entry says so with its figures, and every pod it rejected is placed afterwards by the
stable version (on its slot's node). Promote and abort: served by every extender process when
the call returns.
"""

from __future__ import annotations

import time
import uuid

import pytest

from policies.rollout.split import Split
from tests.harness import resources

from .conftest import wait_nodes_known, wait_until
from .test_never_behind import scheduler  # noqa: F401 (the fixture: weight 10, every node)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CANARY_PODS = 400
GUARD_PODS = 10
NODES = [f"cn-{rank}" for rank in range(8)]
STACK_ENV = {"SCHEDWEB_PUBLISH_CONFIRM_SECONDS": "20"}
STABLE = """\
name: canaried
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: not-rank-7
    expression: 'node.labels["rank"] != "7"'
scores:
  - name: slot
    expression: >-
      node.labels["rank"] == pod.labels["slot"] ? 100 : node.labels["rank"] == "4" ? 30 : 0
"""
CANARY = """\
name: canaried
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: upper-half
    expression: 'int(node.labels["rank"]) >= 4'
scores:
  - name: seven
    expression: 'node.labels["rank"] == "7" ? 100 : node.labels["rank"] == "6" ? 50 : 0'
"""
REJECT_ALL = """\
name: canaried
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: nothing
    expression: 'pod.name == ""'
"""


@pytest.fixture(scope="module")
def nodes(plane, stack):
    for rank, name in enumerate(NODES):
        resources.node_create(
            api=plane.api,
            manifest=resources.node_manifest(
                name=name,
                cpu="64",
                memory="256Gi",
                pods=500,
                labels={"e2e": "canary", "rank": str(rank)},
            ),
        )
    wait_nodes_known(stack, NODES)


def _pod(i: int, prefix: str = "cp") -> dict:
    return resources.pod_manifest(
        name=f"{prefix}-{i:03d}",
        scheduler_name="schedweb",
        labels={"canary-e2e": prefix, "slot": str(i % 4)},
        node_selector={"e2e": "canary"},
        cpu="10m",
        memory="16Mi",
    )


def _delete_all(api, prefix: str, names) -> None:
    for name in names:
        resources.pod_delete(api=api, name=name)

    def gone() -> bool:
        return not api.get(f"/api/v1/namespaces/default/pods?labelSelector=canary-e2e={prefix}")[
            "items"
        ]

    wait_until(gone, timeout=120, what="the pods deleted")


def _status(stack) -> dict:
    status, body = stack.request("GET", "/api/v1/policies/canaried/canary")
    assert status == 200, body
    return body


@pytest.mark.usefixtures("scheduler", "nodes")
def test_a_canary_of_25_percent_judges_about_a_quarter_each_by_one_version_on_every_call(
    plane, stack
):
    api = plane.api
    stable = stack.publish(STABLE, "A")
    version = stack.publish(CANARY, "B for a quarter", canary={"percent": 25})
    assert stack.served["servedByAll"], stack.served["summary"]
    stack.wait_workers(
        lambda health: health.get("canaries") == {"schedweb": f"canaried/v{version}"},
        what="the canary served",
        timeout=60,
    )
    split = Split(percent=25)
    placed, mixed, wrong, uids = {}, [], [], []
    for i in range(CANARY_PODS):
        manifest = _pod(i)
        name = manifest["metadata"]["name"]
        uid = resources.pod_create(api=api, manifest=manifest)["metadata"]["uid"]
        uids.append(uid)
        node = resources.pod_wait_bound(api=api, name=name)
        rank = int(node.rsplit("-", 1)[1])
        by = "canary" if rank == 7 else "stable" if rank == i % 4 else "both"
        placed[name] = by
        if by == "both":
            mixed.append(f"{name} on {node}")
        elif (by == "canary") != split.canary(uid, "default", manifest["metadata"]["labels"]):
            wrong.append(f"{name} ({uid}) judged by the {by} version")
    assert mixed == [], mixed[:20]  # no pod judged by both versions across its calls
    assert wrong == [], wrong[:20]  # each by the version its uid gives
    share = sum(1 for by in placed.values() if by == "canary") / CANARY_PODS
    # The uids are kube-apiserver's, random: the share of 400 of them is a draw (0.25 +- 0.022;
    # 0.1925 was seen once). So the share is checked exactly against the split on these uids,
    # and the 20-30% on fixed uids: every block of 400 of 4000 falls within it.
    assert share == sum(split.canary(uid, "default", {}) for uid in uids) / CANARY_PODS
    fixed = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"schedweb-canary-{i}")) for i in range(4000)]
    for start in range(0, len(fixed), CANARY_PODS):
        block = fixed[start : start + CANARY_PODS]
        block_share = sum(split.canary(uid, "default", {}) for uid in block) / CANARY_PODS
        assert 0.20 <= block_share <= 0.30, (start, block_share)
    # the status counts both arms over every extender process
    arms = _status(stack)["canary"]["arms"]
    assert arms["canary"]["judged"] >= sum(1 for by in placed.values() if by == "canary")
    assert arms["canary"]["rejectedRate"] == 0.0 and arms["stable"]["rejectedRate"] == 0.0
    _delete_all(api, "cp", placed)

    # promote: every process judges every pod with B when the call returns
    started = time.monotonic()
    status, body = stack.request("POST", "/api/v1/policies/canaried/canary/promote", {})
    elapsed = time.monotonic() - started
    assert status == 200 and body["served"]["servedByAll"], body
    print(f"promote served by every extender process in {elapsed:.2f} s")
    stack.wait_workers(
        lambda health: (
            health.get("policies") == {"schedweb": f"canaried/v{version}"}
            and health.get("canaries") == {}
        ),
        what="the promoted canary served",
        timeout=60,
    )
    # abort: back to stable everywhere when the call returns
    stack.publish(STABLE, "A again")
    again = stack.publish(CANARY, "B again", canary={"percent": 25})
    started = time.monotonic()
    status, body = stack.request("POST", "/api/v1/policies/canaried/canary/abort", {})
    elapsed = time.monotonic() - started
    assert status == 200 and body["served"]["servedByAll"], body
    print(f"abort served by every extender process in {elapsed:.2f} s")
    stack.wait_workers(lambda h: h.get("canaries") == {}, what="no canary", timeout=60)
    assert again > stable


@pytest.mark.usefixtures("scheduler", "nodes")
def test_a_canary_that_rejects_every_pod_is_rolled_back_by_its_guard(plane, stack):
    api = plane.api
    stack.publish(STABLE, "A")
    version = stack.publish(
        REJECT_ALL,
        "a broken canary",
        canary={"percent": 50, "guard": {"rejectedRate": 5, "minPods": GUARD_PODS}},
    )
    assert stack.served["servedByAll"], stack.served["summary"]
    names = []
    for i in range(60):
        manifest = _pod(i, "gp")
        resources.pod_create(api=api, manifest=manifest)
        names.append(manifest["metadata"]["name"])

    def rolled_back() -> dict | None:
        return _status(stack)["lastGuardRollback"]

    rollback = wait_until(rolled_back, timeout=120, what="the guard's rollback")
    assert (rollback["version"], rollback["by"], rollback["why"]) == (version, "guard", "guard")
    assert rollback["reason"] == "rejected" and rollback["canary"]["rejectedRate"] == 100.0
    # it acted on the pod that crossed the threshold: kube-scheduler filters one pod at a time,
    # and each answer's counts reach Redis before the next (the direct path's after-answer)
    assert GUARD_PODS <= rollback["canary"]["judged"] <= GUARD_PODS + stack.web_workers, rollback
    assert _status(stack)["canary"] is None
    stack.wait_workers(lambda h: h.get("canaries") == {}, what="no canary", timeout=60)
    # every pod, those the canary rejected included, is placed by the stable version
    wrong = {}
    for i, name in enumerate(names):
        node = resources.pod_wait_bound(api=api, name=name, timeout=400)
        if node != f"cn-{i % 4}":
            wrong[name] = node
    assert wrong == {}, wrong
    _delete_all(api, "gp", names)
