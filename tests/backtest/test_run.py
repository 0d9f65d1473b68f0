"""The backtest service: recorded decisions and pending pods judged by a document now."""

from __future__ import annotations

import pytest

from policies.backtest import run
from policies.cluster.sources import cluster_load
from policies.errors import InputError
from tests.backtest.conftest import BIN_PACKING, pending_schedweb, record, with_filter
from tests.clocks import StepClock


def backtest(document: str, last: int = run.DEFAULT_LAST, **kwargs) -> dict:
    cluster = cluster_load("demo")
    plan = run.backtest_plan(document=document, cluster=cluster, last=last)
    return run.backtest_run(
        document=document, cluster=cluster, plan=plan, last=last, seconds=60, **kwargs
    ).to_dict()


def rows_by_uid(result: dict) -> dict[str, dict]:
    return {r["uid"]: r for r in result["rows"]}


def test_the_published_version_itself_changes_nothing_for_the_recorded_pods(recorded):
    result = backtest(BIN_PACKING)
    rows = rows_by_uid(result)
    assert {uid: rows[uid]["class"] for uid in recorded} == dict.fromkeys(recorded, run.SAME)
    for uid, node in recorded.items():
        assert rows[uid]["recorded"]["bound"] == node
        assert node in rows[uid]["now"]["pick"]
    assert result["summary"]["recorded"] == len(recorded)


def test_a_draft_that_rejects_the_node_pods_were_bound_to_lists_them_as_moved(recorded):
    # the node most of the recorded pods were bound to
    busiest = max(set(recorded.values()), key=list(recorded.values()).count)
    moved = {uid for uid, node in recorded.items() if node == busiest}
    result = backtest(with_filter(BIN_PACKING, f'node.name != "{busiest}"'))
    rows = rows_by_uid(result)
    assert {uid for uid in recorded if rows[uid]["class"] == run.MOVED} == moved
    assert {uid for uid in recorded if rows[uid]["class"] == run.SAME} == set(recorded) - moved
    for uid in moved:
        assert busiest not in rows[uid]["now"]["pick"] and rows[uid]["now"]["pick"]
    assert result["summary"]["counts"][run.MOVED] == len(moved)
    # differing pods come first
    assert [r["class"] for r in result["rows"][: len(moved)]] == [run.MOVED] * len(moved)


def test_a_draft_that_rejects_every_node_makes_every_recorded_pod_newly_unschedulable(recorded):
    result = backtest(with_filter(BIN_PACKING, "false"))
    rows = rows_by_uid(result)
    assert {rows[uid]["class"] for uid in recorded} == {run.UNSCHEDULABLE}
    assert all(rows[uid]["now"]["rejectedEverywhere"] for uid in recorded)
    assert all(rows[uid]["now"]["failedScheduling"] for uid in recorded)
    counts = result["summary"]["counts"]
    assert counts[run.UNSCHEDULABLE] == len(recorded)
    # and no pending pod would schedule
    assert counts[run.SCHEDULES] == 0
    assert counts[run.STILL_UNSCHEDULABLE] == len(pending_schedweb())
    assert result["summary"]["differ"] == len(recorded)


def test_a_pod_the_recorded_version_rejected_everywhere_is_newly_schedulable(published):
    # v1 let web.yaml through: record a decision in which it rejected every node instead
    from policies.models import Decision

    record("web.yaml", "uid-rejected", bound=False)
    decision = Decision.objects.get(pod_uid="uid-rejected")
    decision.nodes = {
        **decision.nodes,
        "nodes": [{**n, "ok": False} for n in decision.nodes["nodes"]],
    }
    decision.save(update_fields=["nodes"])
    row = rows_by_uid(backtest(BIN_PACKING))["uid-rejected"]
    assert row["recorded"]["rejectedEverywhere"] is True
    assert row["class"] == run.SCHEDULABLE and row["now"]["pick"]


def test_pending_pods_of_the_schedulernames_are_judged_too(published):
    result = backtest(BIN_PACKING)
    pending = {r["pod"]: r for r in result["rows"] if r["source"] == "pending"}
    assert sorted(pending) == sorted(f"{p['namespace']}/{p['name']}" for p in pending_schedweb())
    for row in pending.values():
        assert row["class"] == (run.SCHEDULES if row["now"]["pick"] else run.STILL_UNSCHEDULABLE)
    # the gpu training pods fit nowhere in the demo cluster; the small ones do
    assert pending["default/abc"]["class"] == run.SCHEDULES
    assert result["summary"]["pending"] == len(pending)


def test_a_pod_with_several_records_is_judged_once_from_its_latest(published):
    record("web.yaml", "uid-same", at=1_700_000_000)
    record("batch.yaml", "uid-same", at=1_700_000_100)  # the same uid, later: it wins
    result = backtest(BIN_PACKING)
    rows = [r for r in result["rows"] if r["uid"] == "uid-same"]
    assert len(rows) == 1 and rows[0]["pod"].startswith("batch/")


def test_last_bounds_how_many_pods_are_read_newest_first(recorded):
    result = backtest(BIN_PACKING, last=2)
    uids = [r["uid"] for r in result["rows"] if r["source"] == "recorded"]
    assert sorted(uids) == ["uid-2", "uid-3"]  # the two newest records
    assert result["last"] == 2


@pytest.mark.parametrize("last", [0, -1, run.MAX_LAST + 1, "ten", 2.5, True])
def test_a_last_out_of_range_is_refused_with_its_field_path(last):
    with pytest.raises(InputError) as caught:
        run.last_check(last)
    assert caught.value.details[0]["path"] == "last"


def test_last_defaults_to_200_and_accepts_the_maximum():
    assert run.last_check(None) == run.DEFAULT_LAST == 200
    assert run.last_check(str(run.MAX_LAST)) == run.MAX_LAST


def test_a_policy_without_decisions_and_pending_pods_gives_an_empty_result_that_says_so(db):
    result = backtest(BIN_PACKING.replace("[schedweb]", "[nobody-uses-this]"))
    assert result["rows"] == [] and result["summary"]["differ"] == 0
    assert result["empty"].startswith("no decisions are recorded for schedulerNames nobody-uses")


def test_decisions_of_other_schedulernames_are_left_out(recorded):
    other = BIN_PACKING.replace("[schedweb]", "[other]").replace("bin-packing", "other-one")
    result = backtest(other)
    assert all(r["source"] == "pending" for r in result["rows"])
    assert result["rows"] == []  # no pending pod of schedulerName other either


def test_a_record_without_its_pod_is_reported_as_skipped(recorded):
    from policies.models import Decision

    Decision.objects.filter(pod_uid="uid-0").update(pod_manifest="")
    row = rows_by_uid(backtest(BIN_PACKING))["uid-0"]
    assert row["class"] == run.SKIPPED and "no pod manifest" in row["problem"]


def test_a_bound_pod_is_judged_without_itself(published):
    # a pod that is bound in the snapshot now: its record is judged on the snapshot without it
    cluster = cluster_load("demo")
    bound = next(
        p
        for p in cluster.state.pods()
        if p["nodeName"] and p["phase"] == "Running" and p["requests"].get("cpu")
    )
    import json

    from policies.models import Decision

    record("web.yaml", bound["uid"])
    manifest = json.loads(Decision.objects.get(pod_uid=bound["uid"]).pod_manifest)
    assert manifest["spec"]["schedulerName"] == "schedweb"
    row = rows_by_uid(backtest(BIN_PACKING))[bound["uid"]]
    assert row["now"]["excludedSelf"] is True
    others = [r for r in backtest(BIN_PACKING)["rows"] if r["uid"] != bound["uid"]]
    assert not any(r["now"] and r["now"]["excludedSelf"] for r in others)


def test_the_time_cap_stops_the_run_and_counts_the_pods_not_judged(recorded):
    # the clock moves a second each time it is read: a 5 s cap ends after a few pods
    result = backtest(BIN_PACKING, clock=StepClock(1.0))
    summary = result["summary"]
    assert summary["notJudged"] > 0
    assert len(result["rows"]) + summary["notJudged"] == len(recorded) + len(pending_schedweb())
    assert "time cap" in summary["stopped"]


def test_an_invalid_document_raises_policy_invalid(db):
    from policies.engine.document import PolicyInvalid

    with pytest.raises(PolicyInvalid):
        backtest(with_filter(BIN_PACKING, "node.name +"))


@pytest.mark.parametrize(
    "manifest",
    [
        "[1, 2]",  # JSON, not an object
        "{not json",
        '{"kind": "Pod", "metadata": "x", "spec": {"schedulerName": "schedweb"}}',
        '{"kind": "Pod", "metadata": {}, "spec": {"schedulerName": "schedweb", "containers": 7}}',
        '{"kind": "Service", "spec": {"schedulerName": "schedweb"}}',
    ],
)
def test_a_hostile_recorded_pod_is_skipped_not_a_crash(recorded, manifest):
    from policies.models import Decision

    Decision.objects.filter(pod_uid="uid-0").update(pod_manifest=manifest)
    rows = rows_by_uid(backtest(BIN_PACKING))
    assert rows["uid-0"]["class"] == run.SKIPPED and rows["uid-0"]["problem"]
    assert rows["uid-1"]["class"] == run.SAME  # the others are judged as ever


def test_a_record_with_garbage_nodes_is_still_judged(recorded):
    from policies.models import Decision

    Decision.objects.filter(pod_uid="uid-0").update(
        nodes={"nodes": [7, {"n": "x", "ok": True, "errors": 3}, {"ok": True}], "scores": "no"}
    )
    row = rows_by_uid(backtest(BIN_PACKING))["uid-0"]
    assert row["recorded"]["feasible"] == 1 and row["recorded"]["errors"] == 0
    assert row["class"] in (run.SAME, run.MOVED)


@pytest.mark.parametrize("last", ["²", "1e3", " 5", "99999999999999999999"])
def test_a_last_that_only_looks_like_a_number_is_refused(last):
    with pytest.raises(InputError) as caught:
        run.last_check(last)
    assert caught.value.details[0]["path"] == "last"
