"""The extender is never behind (issue 24), end to end against a stock kube-scheduler over mutual
TLS: a pod created the moment a publish or rollback returns is judged by the new version, and a
pod created right after another was deleted is judged with that pod gone, as the preview judges
it. (Room made by a new node, in queue-key order: tests/e2e/test_queue_admission.py.)

The stack's extender listener runs two workers, both of which must serve a change before its call
returns (a child one forks for a large body reads the policies Redis holds before it answers). The bounds are generous settings, so that only
the evidence ends a wait: a publish waits at most 20 s for the extenders' confirmations, a
request at most 20 s for the snapshot (kube-scheduler's httpTimeout here: 30 s). How fast they
are in fact is measured by `make bench` (bench/push.py), not here.
"""

from __future__ import annotations

import pytest

from policies.cluster.loaded import LoadedCluster
from policies.cluster.manifest import pod_view_from_object
from policies.cluster.state import ClusterState
from policies.evaluation import preview_run
from tests.harness import resources

from .conftest import a_request_waits, make_nodes, wait_nodes_known, wait_until, watcher_paused

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

STACK_ENV = {
    "SCHEDWEB_PUBLISH_CONFIRM_SECONDS": "20",
    "SCHEDWEB_EXTENDER_CATCH_UP_MS": "20000",
    "SCHEDWEB_DECISIONS_PER_SECOND": "1000",  # every decision recorded: the test compares them
    "SCHEDWEB_SNAPSHOT_STALE_SECONDS": "600",  # a watcher paused by the test is not a dead one
}
PIN = """\
name: pin
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: only-{node}
    expression: node.name == "{node}"
    message: '"this version places pods on {node} only"'
"""
# At most two of these pods per node; the emptier node scores higher.
SPREAD = """\
name: spread
schedulerNames: [schedweb]
failurePolicy: Fail
filters:
  - name: two-at-most
    expression: node.podCount < 2
    message: '"holds " + string(node.podCount) + " pods"'
scores:
  - name: emptier
    expression: 100 - node.podCount * 40
"""


@pytest.fixture(scope="module")
def scheduler(plane, stack):
    config = stack.scheduler_config(
        "--scheduler-name", "schedweb", "--weight", "10", "--all-nodes", "--timeout", "30s"
    )
    process = plane.start_scheduler(config)
    yield process
    process.stop()


def _pod(name: str, group: str) -> dict:
    return resources.pod_manifest(
        name=name,
        scheduler_name="schedweb",
        labels={"e2e": group},
        node_selector={"e2e": group},  # this test's nodes only
        cpu="100m",
        memory="64Mi",
    )


def test_a_pod_created_right_after_a_publish_or_rollback_is_judged_by_the_new_version(
    plane, stack, scheduler
):
    api = plane.api
    make_nodes(api, ["pin-left", "pin-right"], labels={"e2e": "pin"})
    wait_nodes_known(stack, ["pin-left", "pin-right"])
    phases: list[tuple[str, str]] = []  # (what was done, the node its pod must land on)
    wrong: list[str] = []

    def phase(done: str, node: str) -> None:
        served = stack.served
        assert served["servedByAll"], f"{done}: {served['summary']}"
        assert served["processes"] >= stack.web_workers, served  # every listener worker
        name = f"pin-{len(phases)}"
        resources.pod_create(api=api, manifest=_pod(name, "pin"))  # no sleep, no settling
        landed = resources.pod_wait_bound(api=api, name=name)
        phases.append((done, node))
        if landed != node:
            wrong.append(f"{done}: {name} landed on {landed}, not {node}")

    left = stack.publish(PIN.format(node="pin-left"), "left")
    phase(f"publish v{left}", "pin-left")
    right = stack.publish(PIN.format(node="pin-right"), "right")
    phase(f"publish v{right}", "pin-right")
    for i in range(18):
        version, node = (left, "pin-left") if i % 2 == 0 else (right, "pin-right")
        stack.rollback("pin", version)
        phase(f"rollback to v{version}", node)
    stack.deactivate("pin")
    assert stack.served["servedByAll"]
    assert len(phases) == 20 and wrong == []


def _record_verdicts(stack, pod: str) -> list[dict]:
    """The extender's decision records of `pod` (filter: at most one node passes here)."""
    status, body = stack.request("GET", f"/api/v1/decisions?pod={pod}&policy=spread")
    assert status == 200, body
    return body["results"]


def test_pods_created_right_after_others_were_deleted_are_judged_as_the_preview_judges_them(
    plane, stack, scheduler
):
    """Six slots (three nodes, two pods each); each step deletes the oldest pod and at once
    creates a new one, which fits only where the deleted one was, while schedweb's watcher is
    paused (the snapshot holds neither change when kube-scheduler asks). The extender's answer
    for each of 20 pods equals the preview's over the cluster as it was (the deletion in, the
    new pod pending)."""
    api = plane.api
    names = ["spread-a", "spread-b", "spread-c"]
    make_nodes(api, names, labels={"e2e": "spread"})
    wait_nodes_known(stack, names)
    node_objects = [resources.node_get(api=api, name=n) for n in names]
    stack.publish(SPREAD, "spread")
    assert stack.served["servedByAll"], stack.served["summary"]
    live: dict[str, dict] = {}  # the pods that exist, as stored (bound)
    for i in range(6):
        resources.pod_create(api=api, manifest=_pod(f"s-{i}", "spread"))
        resources.pod_wait_bound(api=api, name=f"s-{i}")
        live[f"s-{i}"] = resources.pod_get(api=api, name=f"s-{i}")
    mismatches: list[str] = []
    for i in range(6, 26):
        gone = f"s-{i - 6}"
        freed = live.pop(gone)["spec"]["nodeName"]
        with watcher_paused(stack):  # the snapshot lags: the deletion and s-i not in it
            resources.pod_delete(api=api, name=gone)
            created = resources.pod_create(api=api, manifest=_pod(f"s-{i}", "spread"))
            wait_until(lambda: a_request_waits(stack), timeout=120, what=f"s-{i} waiting")
        landed = resources.pod_wait_bound(api=api, name=f"s-{i}")
        # the preview of s-i over the cluster as kube-scheduler saw it
        state = ClusterState.from_objects(node_objects, list(live.values()))
        cluster = LoadedCluster(state.freeze(), "inline", "as kube-scheduler saw it")
        preview = preview_run(document=SPREAD, pod=pod_view_from_object(created), cluster=cluster)
        evaluation = preview.evaluation
        expected = dict(zip(evaluation.node_names, evaluation.passed))
        scores = dict(zip(evaluation.node_names, evaluation.extender))
        records = wait_until(
            lambda n=f"s-{i}": _record_verdicts(stack, n),
            timeout=60,
            what=f"the extender's decision record of s-{i}",
        )
        for record in records:
            verdicts = {n["n"]: n["ok"] for n in record["nodes"]}
            if verdicts != expected:
                mismatches.append(f"s-{i}: extender {verdicts}, preview {expected}")
            for entry in record["nodes"]:
                if entry["ok"] and "ext" in entry and entry["ext"] != scores[entry["n"]]:
                    mismatches.append(f"s-{i} on {entry['n']}: score {entry['ext']}")
        if landed != freed:
            mismatches.append(f"s-{i} landed on {landed}, not on {freed} where {gone} was")
        live[f"s-{i}"] = resources.pod_get(api=api, name=f"s-{i}")
    stack.deactivate("spread")
    assert mismatches == [], mismatches
