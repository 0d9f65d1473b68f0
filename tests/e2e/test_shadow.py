"""A shadow version end to end (issue 25), against a stock kube-scheduler over mutual TLS.

Active A and shadow B on one schedulerName, SHADOW_PODS pods (300): the shadow report's per-pod
differences equal an offline evaluation of B (and A) on the requests the extender received, for
every pod (none skipped: each pod judged differently offline is listed with the same difference,
no other pod is, and the others are counted as judged alike), and no placement differs from the
same pods scheduled again, on the same cluster, without the shadow. The requests are known from
what the product stores: each shadow record names its pod and how many candidate nodes the
extender was sent (and their names); kube-scheduler sends every one of this test's nodes (all fit), so
the offline evaluation judges each pod, as kube-apiserver stores it, on those nodes. A and B
read only labels, so the evaluation does not depend on when it is made.

A decides each pod deterministically: its top node scores 100 and the next 50 (an extender
score of 10 and 5, times the weight 10, times 10: a gap of 500 points, where kube-scheduler's
own score plugins differ by at most about 200 between these identical nodes), so the same pods
land on the same nodes in both runs unless the shadow changed an answer.
"""

from __future__ import annotations

import pytest

from policies.cluster.manifest import pod_view_from_object
from policies.cluster.state import ClusterState
from policies.evaluation import policy_compile
from tests.harness import resources

from .conftest import make_nodes, wait_nodes_known, wait_until
from .test_never_behind import scheduler  # noqa: F401 (the fixture: weight 10, every node)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SHADOW_PODS = 300
NODES = [f"sh-{rank}" for rank in range(8)]
KINDS = ("web", "batch", "doomed", "odd", "broken", "plain")
STACK_ENV = {
    # generous bounds so that only the evidence ends a wait (see test_never_behind.py)
    "SCHEDWEB_PUBLISH_CONFIRM_SECONDS": "20",
    # every differing pod listed, with both node breakdowns: the test compares them all (the
    # defaults list a sample; the counts are exact either way)
    "SCHEDWEB_SHADOW_RECORDS_PER_SECOND": "100000",
    "SCHEDWEB_SHADOW_DETAILS_PER_SECOND": "100000",
    # every pod judged however starved of CPU the shadow lane is on a loaded machine
    "SCHEDWEB_SHADOW_QUEUE": "1000",
    "SCHEDWEB_SHADOW_SHARE": "0.5",
}
ACTIVE = """\
name: shadowed
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: batch-not-on-its-slot
    expression: '!(pod.labels["kind"] == "batch" && node.labels["rank"] == pod.labels["slot"])'
scores:
  - name: slot
    expression: >-
      node.labels["rank"] == pod.labels["slot"] ? 100 :
      (int(node.labels["rank"]) - int(pod.labels["slot"]) + 8) % 8 == 1 ? 50 : 0
"""
# B: no batch filter (admits), doomed pods nowhere (no feasible node), web pods never on sh-0
# (rejects), odd pods prefer three ranks on (moved), broken pods fail on every node (errors);
# plain pods get the same answer.
SHADOW = """\
name: shadowed
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: no-doomed
    expression: 'pod.labels["kind"] != "doomed"'
  - name: web-not-on-rank-0
    expression: '!(pod.labels["kind"] == "web" && node.labels["rank"] == "0")'
  - name: broken
    expression: 'pod.labels["kind"] != "broken" || 1 / (size(pod.name) - size(pod.name)) == 1'
scores:
  - name: slot
    expression: >-
      (int(node.labels["rank"]) - int(pod.labels["slot"]) + 8) % 8
      == (pod.labels["kind"] == "odd" ? 3 : 0) ? 100 : 0
"""


@pytest.fixture(scope="module")
def nodes(plane, stack):
    for rank, name in enumerate(NODES):
        make_nodes(plane.api, [name], labels={"e2e": "shadow", "rank": str(rank)})
    wait_nodes_known(stack, NODES)
    return [resources.node_get(api=plane.api, name=name) for name in NODES]


def _pod(i: int) -> dict:
    return resources.pod_manifest(
        name=f"sp-{i:03d}",
        scheduler_name="schedweb",
        labels={"kind": KINDS[i % len(KINDS)], "slot": str(i % len(NODES))},
        node_selector={"e2e": "shadow"},
        cpu="50m",
        memory="32Mi",
    )


def _run(api, count: int) -> dict[str, str]:
    """Creates the pods one after another (each bound before the next), then deletes them:
    {pod: node}. The same sequence on the same cluster gives the same placements."""
    placed = {}
    for i in range(count):
        manifest = _pod(i)
        resources.pod_create(api=api, manifest=manifest)
        placed[manifest["metadata"]["name"]] = resources.pod_wait_bound(
            api=api, name=manifest["metadata"]["name"]
        )
    return placed


def _delete_all(api, names) -> None:
    for name in names:
        resources.pod_delete(api=api, name=name)

    def gone() -> bool:
        listed = api.get("/api/v1/namespaces/default/pods?labelSelector=kind")
        return not listed.get("items")

    wait_until(gone, timeout=120, what="the pods deleted")


def _report(stack, outcome: str) -> list[dict]:
    records, offset = [], 0
    while True:
        status, body = stack.request(
            "GET",
            f"/api/v1/policies/shadowed/shadow?window=day&outcome={outcome}&limit=100"
            f"&offset={offset}",
        )
        assert status == 200, body
        records += body["results"]
        if not body["next"]:
            return records
        offset += 100


def _expected(pod: dict, node_views: list, active, shadow) -> dict:
    """The offline evaluation of A and B on one request, and how they differ, in the report's
    terms (written here from the evaluations, not with the product's comparison)."""
    view = pod_view_from_object(pod)
    a = active.evaluate(view, node_views)
    b = shadow.evaluate(view, node_views)
    rejects = [n for n, x, y in zip(a.node_names, a.passed, b.passed) if x and not y]
    admits = [n for n, x, y in zip(a.node_names, a.passed, b.passed) if y and not x]
    errors = sum(1 for e in b.errors.values() if e)
    a_top, b_top = sorted(a.winners()), sorted(b.winners())
    no_feasible = any(a.passed) and not any(b.passed)
    preferred = a_top != b_top and bool(a_top or b_top)
    outcome = (
        "error"
        if errors
        else "rejected"
        if no_feasible
        else "moved"
        if preferred
        else "nodes"
        if rejects or admits
        else "same"
    )
    return {
        "outcome": outcome,
        "rejects": sorted(rejects),
        "admits": sorted(admits),
        "noFeasible": no_feasible,
        "preferred": preferred,
        "activeTop": a_top,
        "shadowTop": b_top,
    }


@pytest.mark.usefixtures("scheduler")
def test_the_shadow_report_equals_an_offline_evaluation_and_changes_no_placement(
    plane, stack, nodes
):
    api = plane.api
    stack.publish(ACTIVE, "A")
    assert stack.served["servedByAll"], stack.served["summary"]
    version = stack.publish(SHADOW, "B beside A", shadow=True)
    assert stack.served["servedByAll"], stack.served["summary"]
    stack.wait_workers(
        lambda health: health.get("shadows") == {"schedweb": f"shadowed/v{version}"},
        what="the shadow served",
        timeout=60,
    )

    with_shadow = _run(api, SHADOW_PODS)
    pods = {
        name: resources.pod_get(api=api, name=name) for name in with_shadow
    }  # as kube-apiserver stores them: what kube-scheduler sent the extender

    def all_recorded() -> dict | None:
        status, body = stack.request("GET", "/api/v1/policies/shadowed/shadow?window=day&limit=1")
        assert status == 200, body
        return body["summary"] if body["summary"]["judged"] >= SHADOW_PODS else None

    summary = wait_until(all_recorded, timeout=120, what="every pod's shadow record stored")
    assert summary["skipped"] == 0, summary

    records: dict[str, list[dict]] = {}
    for outcome in ("nodes", "moved", "rejected", "error"):
        for record in _report(stack, outcome):
            records.setdefault(record["pod"]["name"], []).append(record)

    node_views = ClusterState.from_objects(nodes, []).nodes()
    active, shadow = policy_compile(ACTIVE), policy_compile(SHADOW)
    expected = {name: _expected(pods[name], node_views, active, shadow) for name in with_shadow}
    alike = {name for name, e in expected.items() if e["outcome"] == "same"}
    # 100% of the pods: each one judged differently offline is listed, no other one is, and
    # every other judgement is counted as alike
    assert set(records) == set(with_shadow) - alike
    listed = sum(len(judged) for judged in records.values())
    assert summary["judged"] == summary["same"] + listed, summary
    assert summary["same"] >= len(alike) > 0, summary
    mismatches = []
    for name, judged in sorted(records.items()):
        for record in judged:
            difference = record["difference"] or {}
            got = {
                "outcome": record["outcome"],
                "rejects": sorted(difference.get("rejects", [])),
                "admits": sorted(difference.get("admits", [])),
                "noFeasible": difference.get("noFeasible"),
                "preferred": difference.get("preferred"),
                "activeTop": difference.get("activeTop"),
                "shadowTop": difference.get("shadowTop"),
            }
            if record["candidates"] != len(NODES):
                mismatches.append(f"{name}: {record['candidates']} candidates")
            if got != expected[name]:
                mismatches.append(f"{name}: report {got}, offline {expected[name]}")
            assert record["breakdowns"], record
            shadow_nodes = [n["n"] for n in record["nodes"]["shadow"]["nodes"]]
            assert sorted(shadow_nodes) == NODES, (name, shadow_nodes)
    assert mismatches == [], mismatches[:20]
    # every kind of difference happened, so the comparison above compared something
    outcomes = {r["outcome"] for judged in records.values() for r in judged}
    assert outcomes == {"nodes", "moved", "rejected", "error"}, outcomes

    # kube-scheduler's pick under A, from the model (added to the records seconds after, by
    # the worker, a bounded number at a time), is where kube-scheduler placed the pod
    def picked() -> list[dict] | None:
        found = [
            r
            for outcome in ("nodes", "moved", "rejected")
            for r in _report(stack, outcome)
            if r["pick"] and "active" in r["pick"]
        ]
        return found if len(found) >= 10 else None

    wrong_picks = [
        f"{r['pod']['name']}: model {r['pick']['active']}, placed on {with_shadow[r['pod']['name']]}"
        for r in wait_until(picked, timeout=120, what="the model's picks of 10 records")
        if r["pick"]["active"] != [with_shadow[r["pod"]["name"]]]
    ]
    assert wrong_picks == [], wrong_picks

    # the same pods on the same cluster without the shadow: the same nodes
    _delete_all(api, with_shadow)
    status, body = stack.request("POST", "/api/v1/policies/shadowed/shadow/discard", {})
    assert status == 200 and body["served"]["servedByAll"], body
    stack.wait_workers(lambda health: health.get("shadows") == {}, what="no shadow", timeout=60)
    without_shadow = _run(api, SHADOW_PODS)
    moved = {
        n: (with_shadow[n], without_shadow[n])
        for n in with_shadow
        if with_shadow[n] != without_shadow[n]
    }
    assert moved == {}, moved
    _delete_all(api, without_shadow)


@pytest.mark.usefixtures("scheduler", "nodes")
def test_promote_and_discard_are_served_by_every_extender_process_when_they_return(plane, stack):
    stack.publish(ACTIVE, "A")  # a shadow is judged beside an active version (any test order)
    version = stack.publish(SHADOW, "B2 beside A", shadow=True)
    assert stack.served["servedByAll"], stack.served["summary"]
    status, body = stack.request(
        "POST", "/api/v1/policies/shadowed/shadow/promote", {"message": "B2 is right"}
    )
    assert status == 200, body
    assert body["served"]["servedByAll"] and body["served"]["processes"] >= stack.web_workers
    # every listener worker answers with the promoted version and no shadow (the answer's
    # confirmation is the evidence; this reads each worker's /readyz)
    stack.wait_workers(
        lambda health: (
            health.get("policies") == {"schedweb": f"shadowed/v{version}"}
            and health.get("shadows") == {}
        ),
        what="the promoted version served",
        timeout=60,
    )
    # a pod placed now is judged by the promoted version
    resources.pod_create(api=plane.api, manifest=_pod(1))  # batch, slot 1: B2 prefers sh-1
    assert resources.pod_wait_bound(api=plane.api, name="sp-001") == "sh-1"
    resources.pod_delete(api=plane.api, name="sp-001")
    stack.publish(ACTIVE, "A again")
    stack.publish(SHADOW, "B again", shadow=True)
    status, body = stack.request("POST", "/api/v1/policies/shadowed/shadow/discard", {})
    assert status == 200 and body["served"]["servedByAll"], body
    stack.wait_workers(lambda h: h.get("shadows") == {}, what="no shadow", timeout=60)
