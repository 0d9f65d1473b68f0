"""The shadow version in the extender (issue 25): judged after filter's answer is written, on the
same pod and nodes, never changing an answer; every pod counted, differing ones listed; bounded
by a slice per evaluation and a share of the process's time (policies/extender/shadow.py)."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from policies.extender import entry
from policies.extender.runtime import runtime
from policies.extender.shadow import ShadowGovernor
from policies.publishing import active_entries_write
from tests.clocks import StepClock
from tests.prometheus_text import assert_valid_exposition, samples

from .conftest import ROOM, active_entry, args_body, demo_node_objects, go_pod, runtime_by_hand

NAMES = [n["metadata"]["name"] for n in demo_node_objects()]

# The shadow: ROOM, but never a-small-1 and never any node for pods named "big-*".
STRICT = ROOM.replace("name: room\n", "name: room\n", 1).replace(
    "filters:\n",
    "filters:\n"
    "  - name: not-a-small-1\n    expression: node.name != 'a-small-1'\n"
    "  - name: no-big\n    expression: '!pod.name.startsWith(\"big-\")'\n",
)
# A shadow whose every node errors: a division by zero on every pod.
BROKEN = ROOM.replace(
    "filters:\n",
    "filters:\n  - name: broken\n    expression: 1 / (size(pod.name) - size(pod.name)) > 0\n",
)
# A shadow that prefers another node: the most requested instead of the least.
PACKING = ROOM.replace(
    "(node.allocatable.cpu - node.requested.cpu) * 100 / node.allocatable.cpu",
    "node.requested.cpu * 100 / node.allocatable.cpu",
)


def _install(client, *, shadow: str | None) -> None:
    entry_ = active_entry(ROOM, 1)
    if shadow is not None:
        entry_["shadow"] = {
            "version": 2,
            "document": shadow,
            "contentHash": hashlib.sha256(shadow.encode()).hexdigest(),
            "schedulerNames": ["schedweb"],
        }
    active_entries_write([entry_])
    runtime().registry.refresh_from_redis()


def _answer(verb: str, body: bytes) -> tuple[int, bytes, str]:
    """As the direct path answers: the answer, then after_answer once it is written."""
    answer = entry.extender_answer_or_wait(verb, body, inline=True)
    entry.after_answer()
    return answer


def _metrics() -> dict[tuple[str, tuple], float]:
    """/metrics as {(name, sorted labels): value}, checked as a valid exposition first."""
    text = entry.metrics_text().decode()
    assert_valid_exposition(text)
    return {(name, tuple(sorted(labels.items()))): value for name, labels, value in samples(text)}


def _records(state) -> list[dict]:
    return [r for r in state.decisions.take() if r.get("role") == "shadow"]


def _counts(state) -> dict[str, int]:
    """The shadow's tallies since the last take, summed over versions (runtime's flush)."""
    counts: dict[str, int] = {}
    for tally in state.extender.shadows.tallies.take():
        assert tally["kind"] == "shadow-tally"
        for outcome, n in tally["counts"].items():
            counts[outcome] = counts.get(outcome, 0) + n
    return counts


PODS = [go_pod(f"web-{i}", cpu=f"{100 * (i % 7 + 1)}m") for i in range(12)] + [
    go_pod("big-1", cpu="100m")
]


def test_answers_are_byte_identical_with_and_without_a_shadow(extender_redis):
    for shadow in (STRICT, BROKEN, PACKING):
        _install(extender_redis, shadow=None)
        state = runtime_by_hand()
        without = [
            (_answer("filter", args_body(p)), _answer("prioritize", args_body(p))) for p in PODS
        ]
        _install(extender_redis, shadow=shadow)
        state.extender.shared.clear()
        with_shadow = [
            (_answer("filter", args_body(p)), _answer("prioritize", args_body(p))) for p in PODS
        ]
        assert with_shadow == without
        assert sum(_counts(state).values()) == len(PODS)  # every pod judged by the shadow


def test_a_shadow_that_rejects_nodes_is_recorded_with_both_breakdowns(extender_redis):
    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    _answer("filter", args_body(go_pod("web-1")))
    _answer("filter", args_body(go_pod("big-1")))
    first, second = _records(state)
    assert (first["outcome"], second["outcome"]) == ("nodes", "rejected")
    difference = first["shadow"]["difference"]
    assert (difference["rejects"], difference["admits"], difference["noFeasible"]) == (
        ["a-small-1"],
        [],
        False,
    )
    assert first["shadow"]["activeVersion"] == 1 and first["version"] == 2
    # both versions' breakdowns, in the decisions' own form
    shadow_nodes = {n["n"]: n for n in first["nodes"]}
    active_nodes = {n["n"]: n for n in first["shadow"]["active"]["nodes"]}
    assert shadow_nodes["a-small-1"]["ok"] is False
    assert shadow_nodes["a-small-1"]["rule"] == "not-a-small-1"
    assert active_nodes["a-small-1"]["ok"] is True
    assert second["shadow"]["difference"]["rejectsCount"] == len(NAMES)
    assert second["shadow"]["difference"]["noFeasible"] is True


def test_a_shadow_judging_alike_is_counted_not_listed(extender_redis):
    _install(extender_redis, shadow=ROOM.replace("name: room", "name: room # same"))
    state = runtime_by_hand()
    state.decisions.take()
    state.extender.shadows.tallies.take()
    _answer("filter", args_body(go_pod("web-1")))
    _answer("filter", args_body(go_pod("web-2")))
    assert _records(state) == []
    (tally,) = state.extender.shadows.tallies.take()
    assert (tally["policy"], tally["version"], tally["activeVersion"]) == ("room", 2, 1)
    assert tally["counts"] == {"same": 2}
    assert state.extender.shadows.tallies.take() == []  # taken once


def test_differing_pods_past_the_record_rate_are_counted_not_listed(extender_redis):
    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    state.extender.shadows.tallies.take()
    allowed = iter([True, False, True])  # the rate's answers for three differing pods
    state.extender.shadows._listed = lambda: next(allowed)
    for name in ("web-1", "web-2", "web-3"):
        _answer("filter", args_body(go_pod(name)))
    assert [r["pod"]["name"] for r in _records(state)] == ["web-1", "web-3"]
    assert _counts(state) == {"nodes": 3}  # every pod counted, listed or not


def test_a_different_preferred_node_is_a_moved_pod(extender_redis):
    _install(extender_redis, shadow=PACKING)
    state = runtime_by_hand()
    state.decisions.take()
    _answer("filter", args_body(go_pod("web-1")))
    (record,) = _records(state)
    difference = record["shadow"]["difference"]
    assert record["outcome"] == "moved" and difference["preferred"] is True
    assert difference["activeTop"] != difference["shadowTop"]
    assert sorted(record["shadow"]["active"]["winners"]) == difference["activeTop"]


def test_a_shadow_that_errors_on_every_pod_changes_no_answer_and_is_counted(extender_redis):
    _install(extender_redis, shadow=BROKEN)
    state = runtime_by_hand()
    state.decisions.take()
    answers = [_answer("filter", args_body(p)) for p in PODS]
    assert all(orjson.loads(a[1])["Error"] == "" for a in answers)
    assert all(a[2] == "room/v1" for a in answers)
    records = _records(state)
    assert [r["outcome"] for r in records] == ["error"] * len(PODS)
    metrics = _metrics()
    assert metrics[("schedweb_extender_shadow_judged_total", (("outcome", "error"),))] == len(PODS)
    assert metrics[("schedweb_extender_shadow_errors_total", ())] == len(PODS)
    assert metrics[("schedweb_extender_shadow_duration_seconds_count", ())] == len(PODS)


def test_a_shadow_past_its_slice_is_stopped_and_recorded_as_an_error(extender_redis):
    # The slice's clock moves a second at each look: the first look past 0.5 s stops it.
    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    shadows = state.extender.shadows
    shadows._clock, shadows.slice_seconds = StepClock(1.0), 0.5
    answer = _answer("filter", args_body(go_pod("web-1")))
    assert orjson.loads(answer[1])["NodeNames"] == NAMES  # the active version's answer
    (record,) = _records(state)
    assert record["outcome"] == "error"
    assert record["shadow"]["error"] == "the shadow's evaluation ran past its slice of 500 ms"


def test_past_its_share_of_time_shadow_work_is_shed_and_counted_as_skipped(
    extender_redis,
):
    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    state.extender.shadows.governor = ShadowGovernor(share=0.0, burst=0.025)
    answers = [_answer("filter", args_body(p)) for p in PODS[:3]]
    assert all(a[0] == 200 for a in answers)
    assert _records(state) == []  # counted only
    assert _counts(state) == {"skipped": 3}
    metrics = _metrics()
    assert metrics[("schedweb_extender_shadow_skipped_total", ())] == 3


def test_a_job_no_after_answer_came_for_is_skipped_not_lost(extender_redis):
    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    entry.extender_answer_or_wait("filter", args_body(go_pod("web-1")), inline=True)
    _answer("filter", args_body(go_pod("web-2")))
    assert [(r["pod"]["name"], r["outcome"]) for r in _records(state)] == [("web-2", "nodes")]
    assert _counts(state) == {"skipped": 1, "nodes": 1}


@pytest.mark.parametrize(
    ("elapsed", "spent", "allowed"),
    [
        # burst 0.02 s, share 0.25: after spending 0.05 s the bucket is at -0.03 s
        (0.0, 0.05, False),
        (0.1, 0.05, False),  # -0.03 + 0.1 * 0.25 = -0.005: still empty
        (0.2, 0.05, True),  # -0.03 + 0.2 * 0.25 = +0.02 (capped at the burst)
    ],
)
def test_the_governor_refills_its_share_of_time(elapsed, spent, allowed):
    now = [0.0]
    governor = ShadowGovernor(share=0.25, burst=0.02, clock=lambda: now[0])
    assert governor.allow()
    governor.spend(spent)
    now[0] += elapsed
    assert governor.allow() is allowed


def test_every_extender_process_serves_the_shadow_beside_its_active_version(extender_redis):
    _install(extender_redis, shadow=STRICT)
    served = runtime().registry.by_scheduler["schedweb"]
    assert (served.label, served.shadow.label) == ("room/v1", "room/v2")
    assert runtime().health()["shadows"] == {"schedweb": "room/v2"}


@pytest.mark.django_db
def test_shadow_records_are_stored_beside_decisions_bounded_and_kept_out_of_their_lists(
    extender_redis,
):
    from policies import selectors, services
    from policies.models import Decision, ShadowTally

    _install(extender_redis, shadow=STRICT)
    state = runtime_by_hand()
    state.decisions.take()
    for pod in (go_pod("web-1"), go_pod("big-1"), go_pod("web-2")):
        _answer("filter", args_body(pod))
        _answer("prioritize", args_body(pod))
    batch = state.decisions.take()
    batch.append({"kind": "decision", "role": "shadow", "outcome": "made-up", "shadow": {}})
    tallies = state.extender.shadows.tallies.take()
    made_up = {**tallies[0], "counts": {"same": 1, "made-up": 5}}
    stored = services.decisions_store(batch=[*batch, *tallies, made_up])
    shadows = Decision.objects.filter(role="shadow").order_by("pk")
    assert stored == len(batch) - 1  # the malformed record is skipped, not its batch
    (tally,) = ShadowTally.objects.all()  # the malformed tally too
    assert (tally.policy_name, tally.policy_version, tally.active_version) == ("room", 2, 1)
    assert (tally.nodes, tally.rejected, tally.same) == (2, 1, 0)
    assert [(d.pod_name, d.shadow_outcome) for d in shadows] == [
        ("web-1", "nodes"),
        ("big-1", "rejected"),
        ("web-2", "nodes"),
    ]
    first = shadows[0]
    assert (first.policy_name, first.policy_version, first.verb) == ("room", 2, "shadow")
    assert first.nodes["shadow"]["activeVersion"] == 1
    assert first.nodes["shadow"]["difference"]["rejects"] == ["a-small-1"]
    assert len(first.nodes["nodes"]) == len(first.nodes["shadow"]["active"]["nodes"]) == len(NAMES)
    assert not selectors.decision_list().filter(role="shadow").exists()
    # pruned with the decisions
    Decision.objects.update(created_at=first.created_at.replace(year=2000))
    ShadowTally.objects.update(created_at=first.created_at.replace(year=2000))
    services.decisions_prune(older_than_days=7)
    assert not Decision.objects.exists() and not ShadowTally.objects.exists()


def test_a_filter_answered_without_scores_is_compared_by_preferred_node_too(extender_redis):
    # full Node objects (nodeCacheCapable false): filter evaluates without scores
    _install(extender_redis, shadow=PACKING)
    state = runtime_by_hand()
    state.decisions.take()
    _answer("filter", args_body(go_pod("web-1"), full=True))
    (record,) = _records(state)
    assert record["outcome"] == "moved"
    assert record["shadow"]["difference"]["activeTop"] != []


# Quadratic in the pod's labels: within its estimate for the 64 labels declared, far over the
# cost budget for a pod with 2000 (the exact path counts cost: 2000 x 2000 steps).
COSTLY = ROOM.replace(
    "filters:\n",
    "filters:\n  - name: costly\n"
    "    expression: 'pod.labels.all(k, pod.labels.exists(j, j == k + \"x\") || true)'\n",
)


def test_a_shadow_over_the_cel_budget_on_every_pod_changes_no_answer_and_stays_in_its_slice(
    extender_redis, settings
):
    from tests.clocks import cpu_bound

    settings.SCHEDWEB_CEL_COST_LIMIT = 300_000  # the estimate for 64 labels: 287 107
    labels = {f"l{i}": "v" for i in range(2000)}
    pods = [go_pod(f"many-{i}", labels=labels) for i in range(4)]
    _install(extender_redis, shadow=None)
    state = runtime_by_hand()
    without = [_answer("filter", args_body(p)) for p in pods]
    _install(extender_redis, shadow=COSTLY)
    state.extender.shared.clear()
    state.decisions.take()
    # The share is not what this test is about: a governor whose clock gains a second per
    # reading always has a slice to give, whatever the machine's speed (with wall time, a fast
    # answer after a 25 ms slice left the bucket empty and the pod was skipped).
    ticks = iter(range(1_000_000))
    state.extender.shadows.governor = ShadowGovernor(
        share=settings.SCHEDWEB_SHADOW_SHARE, burst=0.025, clock=lambda: float(next(ticks))
    )
    # Each shadow evaluation stops at its slice (25 ms of CPU) or the cost budget, whichever
    # first: the four pods' answers and shadow work stay far below what the shadow alone would
    # take unbounded (the budget on each of the 36 nodes, seconds per pod).
    with cpu_bound(2.0):
        with_shadow = [_answer("filter", args_body(p)) for p in pods]
    assert with_shadow == without
    records = _records(state)
    assert [r["outcome"] for r in records] == ["error"] * len(pods)
    assert all(r["shadow"].get("error") or r["shadow"]["difference"]["errors"] for r in records)
