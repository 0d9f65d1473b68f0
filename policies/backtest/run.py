"""The backtest itself: which pods, each judged now, and how it compares with what happened.

The pods: the latest decision per pod uid among the newest recorded for the document's
schedulerNames (at most `last`, DEFAULT_LAST unless asked, MAX_LAST at most), then the pending
pods of those schedulerNames the decisions do not already cover (at most MAX_PENDING).

What happened is read from the decision record: the nodes the extender let through (of those
kube-scheduler sent it), the node the pod was bound to when the record was resolved, whether it
rejected every node, and rule errors. What the document does now is kube-scheduler's pick from
the model over the current snapshot. The cluster has changed since: a pod that is bound now is
judged on the snapshot without itself (policies/cluster/exclude.py), so its own requests and
labels do not count against it; every other change (pods that came and went, nodes added,
cordoned or relabelled) is part of "now" and can move a pod without any change of the rules.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from policies import selectors
from policies.cluster.exclude import PodExcluder
from policies.cluster.loaded import LoadedCluster
from policies.cluster.manifest import pod_view_from_object
from policies.cluster.sources import cluster_default
from policies.engine.cel.deadline import EvaluationTimeout, deadline, deadline_check
from policies.engine.inputs import PodView
from policies.engine.policy import CompiledPolicy
from policies.errors import InputError
from policies.evaluation import (
    placement_from_cycle,
    pods_pending,
    policy_compile,
    profile_from_text,
)
from policies.schedmodel.existing import existing_for, existing_register
from policies.schedmodel.pipeline import cycle_run

DEFAULT_LAST = 200  # about an hour of sampled decisions on a busy schedulerName; fast inline
# The largest N: 2000 records x up to 500 nodes is the most a run reads from the database, and
# 2000 pods x a 5000-node cycle is minutes of one worker's CPU, the task's time limit.
MAX_LAST = 2000
MAX_PENDING = 500  # pending pods judged (the rest are counted as left out)
SCAN_FACTOR = 4  # records read per pod wanted: filter and prioritize of one pod are two records

# Row classes. Recorded pods: what the document does now against what happened.
SAME, MOVED, UNSCHEDULABLE, SCHEDULABLE, ERROR, SKIPPED = (
    "same",
    "moved",
    "newly-unschedulable",
    "newly-schedulable",
    "error",
    "skipped",
)
# Pending pods: where they would go now.
SCHEDULES, STILL_UNSCHEDULABLE = "would-schedule", "still-unschedulable"
CLASSES = (UNSCHEDULABLE, MOVED, ERROR, SCHEDULABLE, SCHEDULES, SAME, STILL_UNSCHEDULABLE, SKIPPED)
DIFFERS = frozenset({MOVED, UNSCHEDULABLE, SCHEDULABLE, ERROR, SCHEDULES})


@dataclass(frozen=True)
class Recorded:
    """What happened to one pod, from its latest decision record."""

    decision: int
    uid: str
    namespace: str
    name: str
    at: str  # ISO time of the record
    policy: str
    version: int
    verb: str
    feasible: tuple[str, ...]  # nodes the extender let through (of those it was sent)
    nodes: int  # nodes in the record
    bound: str  # where the pod was bound, "" when not known (yet)
    errors: int  # rule errors in the record
    manifest: str  # the judged pod as JSON, "" when it was too large to keep

    @property
    def schedulable(self) -> bool:
        return bool(self.bound or self.feasible)

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "at": self.at,
            "policy": self.policy,
            "version": self.version,
            "verb": self.verb,
            "feasible": len(self.feasible),
            "nodes": self.nodes,
            "bound": self.bound or None,
            "rejectedEverywhere": not self.schedulable,
            "errors": self.errors,
        }


def _recorded(row: Any) -> Recorded:
    data = row.nodes if isinstance(row.nodes, dict) else {}
    entries = [n for n in data.get("nodes") or [] if isinstance(n, dict) and n.get("n")]
    return Recorded(
        decision=row.pk,
        uid=row.pod_uid,
        namespace=row.pod_namespace,
        name=row.pod_name,
        at=row.created_at.isoformat(),
        policy=row.policy_name,
        version=row.policy_version,
        verb=row.verb,
        feasible=tuple(str(n["n"]) for n in entries if n.get("ok")),
        nodes=len(entries),
        bound=row.chosen_node,
        errors=sum(len(n["errors"]) for n in entries if isinstance(n.get("errors"), list)),
        manifest=row.pod_manifest,
    )


def _manifest(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text) if text else None
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _scheduler_name(obj: dict[str, Any] | None) -> str | None:
    spec = obj.get("spec") if obj else None
    name = spec.get("schedulerName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else None


def decisions_latest(*, scheduler_names: list[str], last: int) -> tuple[list[Recorded], int]:
    """The latest record of each of the last `last` pods decided for `scheduler_names` (newest
    first), and how many records were read (at most SCAN_FACTOR x `last`). A record whose pod
    names another schedulerName is left out; one without its pod (too large to keep) is kept,
    to be reported as skipped."""
    names = set(scheduler_names)
    policies = selectors.policy_names_serving(scheduler_names=scheduler_names)
    if not policies:
        return [], 0
    seen: set[str] = set()
    found: list[Recorded] = []
    read = 0
    rows = selectors.decisions_recent(policy_names=policies)[: SCAN_FACTOR * last]
    for row in rows.iterator(chunk_size=100):
        read += 1
        if row.pod_uid in seen:
            continue  # an older record of a pod already taken: the latest wins
        scheduler = _scheduler_name(_manifest(row.pod_manifest))
        if scheduler is not None and scheduler not in names:
            continue
        seen.add(row.pod_uid)
        found.append(_recorded(row))
        if len(found) >= last:
            break
    return found, read


def _pod(recorded: Recorded) -> PodView:
    """The recorded pod as the engine's view, with its uid (the manifest has none)."""
    obj = _manifest(recorded.manifest)
    if obj is None:
        raise InputError("the record holds no pod manifest (it was larger than 64 KiB)")
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return pod_view_from_object({**obj, "metadata": {**metadata, "uid": recorded.uid}})


@dataclass(frozen=True)
class Now:
    """What the document does to one pod now: kube-scheduler's pick from the model."""

    pick: tuple[str, ...]
    feasible: int
    nodes: int
    applies: bool
    errors: int
    reasons: dict[str, int]
    failed_scheduling: str | None
    excluded_self: bool  # judged on the snapshot without the pod itself

    def to_dict(self) -> dict[str, Any]:
        return {
            "pick": list(self.pick),
            "feasible": self.feasible,
            "nodes": self.nodes,
            "applies": self.applies,
            "rejectedEverywhere": not self.pick,
            "errors": self.errors,
            "reasons": self.reasons,
            "failedScheduling": self.failed_scheduling,
            "excludedSelf": self.excluded_self,
        }


def judge(
    *,
    compiled: CompiledPolicy,
    pod: PodView,
    cluster: LoadedCluster,
    stored_profile: str,
    excluded_self: bool = False,
) -> Now:
    """kube-scheduler's cycle for `pod` with `compiled` served by its extender, under the
    installation's profile for the pod's schedulerName."""
    cycle = cycle_run(
        pod=pod,
        nodes=cluster.nodes(),
        state=cluster.state,
        policy=compiled,
        profile=profile_from_text(stored_profile, pod["schedulerName"]),
    )
    placement = placement_from_cycle(cycle)
    ev = cycle.evaluation
    errors = sum(len(v) for v in ev.errors.values()) if ev is not None else 0
    if ev is not None and ev.stopped:
        errors += 1  # the CEL budget ran out: some verdicts are failurePolicy's, not the rules'
    return Now(
        pick=tuple(placement.pick),
        feasible=len(placement.feasible()),
        nodes=len(placement.nodes),
        applies=placement.applies,
        errors=errors,
        reasons=placement.reasons(),
        failed_scheduling=None if placement.pick else placement.failed_scheduling,
        excluded_self=excluded_self,
    )


def classify(recorded: Recorded | None, now: Now) -> str:
    """A row's class. A recorded pod: `error` when the document has rule errors on it now;
    else by whether it was and is schedulable; both: `moved` when the pick no longer holds the
    node it was bound to (when that is unknown: none of the nodes the extender let through).
    A pending pod: `would-schedule` or `still-unschedulable`."""
    if now.errors:
        return ERROR
    if recorded is None:
        return SCHEDULES if now.pick else STILL_UNSCHEDULABLE
    if recorded.schedulable and not now.pick:
        return UNSCHEDULABLE
    if not recorded.schedulable:
        return SCHEDULABLE if now.pick else SAME
    if recorded.bound:
        return SAME if recorded.bound in now.pick else MOVED
    return SAME if set(now.pick) & set(recorded.feasible) else MOVED


@dataclass
class Backtest:
    """A backtest's rows and counts (to_dict: the REST body, the job's stored result)."""

    policy: str
    scheduler_names: list[str]
    last: int
    cluster: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    records_read: int = 0
    pending_left_out: int = 0
    not_judged: int = 0  # pods the time cap left unjudged
    stopped: str = ""

    def counts(self) -> dict[str, int]:
        counts = {c: 0 for c in CLASSES}
        for row in self.rows:
            counts[row["class"]] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        recorded = sum(1 for r in self.rows if r["source"] == "recorded")
        return {
            "policy": self.policy,
            "schedulerNames": self.scheduler_names,
            "last": self.last,
            "cluster": self.cluster,
            "summary": {
                "recorded": recorded,
                "pending": len(self.rows) - recorded,
                "differ": sum(counts[c] for c in DIFFERS),
                "counts": counts,
                "recordsRead": self.records_read,
                "pendingLeftOut": self.pending_left_out,
                "notJudged": self.not_judged,
                "stopped": self.stopped or None,
            },
            "empty": self.empty_reason(),
            # differing pods first, by class, then by namespace and name
            "rows": sorted(
                self.rows, key=lambda r: (CLASSES.index(r["class"]), r["pod"], r["uid"])
            ),
        }

    def empty_reason(self) -> str | None:
        if self.rows or self.not_judged:
            return None
        names = ", ".join(self.scheduler_names) or "(none)"
        return (
            f"no decisions are recorded for schedulerNames {names} and no pod of them is "
            "pending: there is nothing to compare yet"
        )


@dataclass(frozen=True)
class Plan:
    """The pods a backtest will judge, gathered before any is judged (the job's total)."""

    recorded: list[Recorded]
    pending: list[PodView]
    records_read: int
    pending_left_out: int

    @property
    def total(self) -> int:
        return len(self.recorded) + len(self.pending)


def last_check(last: Any) -> int:
    """`last` as the number of decisions to read; InputError (field `last`) when out of range."""
    if last is None or last == "":
        return DEFAULT_LAST
    digits = isinstance(last, str) and last.isascii() and last.isdigit() and len(last) < 10
    if type(last) is not int and not digits:
        raise InputError(
            "the backtest cannot run",
            details=[{"path": "last", "message": f"a whole number from 1 to {MAX_LAST}"}],
        )
    value = int(last)
    if not 1 <= value <= MAX_LAST:
        raise InputError(
            "the backtest cannot run",
            details=[{"path": "last", "message": f"from 1 to {MAX_LAST}, got {value}"}],
        )
    return value


def backtest_plan(*, document: str, cluster: LoadedCluster, last: int) -> Plan:
    """The recorded and pending pods `document`'s schedulerNames have (PolicyInvalid for an
    invalid document)."""
    names = list(policy_compile(document).spec.scheduler_names)
    recorded, read = decisions_latest(scheduler_names=names, last=last)
    taken = {r.uid for r in recorded}
    pending = [
        p
        for p in pods_pending(cluster=cluster)
        if p["schedulerName"] in names and p["uid"] not in taken
    ]
    return Plan(recorded, pending[:MAX_PENDING], read, max(0, len(pending) - MAX_PENDING))


def backtest_run(
    *,
    document: str,
    cluster: LoadedCluster,
    plan: Plan,
    last: int,
    seconds: float,
    clock: Callable[[], float] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Backtest:
    """Judges every pod of `plan` with `document` over `cluster`; past `seconds` (on `clock`)
    the rest are counted in `not_judged` and `stopped` says why. `progress(done)` is called
    after each pod."""
    compiled = policy_compile(document)
    result = Backtest(
        policy=compiled.name,
        scheduler_names=list(compiled.spec.scheduler_names),
        last=last,
        cluster={
            "source": cluster.source,
            "label": cluster.describe(),
            "version": cluster.version,
            "stale": cluster.stale,
        },
        records_read=plan.records_read,
        pending_left_out=plan.pending_left_out,
    )
    stored = selectors.scheduler_profile_text()  # read once; parsed once per schedulerName
    excluder = PodExcluder(cluster)
    pods: Iterable[tuple[Recorded | None, PodView | None]] = [
        *((r, None) for r in plan.recorded),
        *((None, p) for p in plan.pending),
    ]
    try:
        with deadline(seconds, clock=clock or time.monotonic):
            for done, (recorded, pending) in enumerate(pods, start=1):
                deadline_check()  # between pods too: a cheap pod never looks at the clock
                result.rows.append(_row(compiled, recorded, pending, excluder, stored))
                if progress is not None:
                    progress(done)
    except EvaluationTimeout:
        result.not_judged = plan.total - len(result.rows)
        result.stopped = (
            f"the backtest ran past its time cap of {seconds:g} s; "
            f"{result.not_judged} pods were not judged"
        )
    return result


def backtest_now(*, document: str, last: int, seconds: float) -> Backtest:
    """A whole backtest in this process over the configured cluster (`policy backtest`)."""
    cluster = cluster_default()
    plan = backtest_plan(document=document, cluster=cluster, last=last)
    return backtest_run(document=document, cluster=cluster, plan=plan, last=last, seconds=seconds)


def cluster_without(excluder: PodExcluder, uid: str) -> tuple[LoadedCluster, bool]:
    """The cluster without the bound pod `uid` (PodExcluder), with the model's per-snapshot
    index of bound pods derived from the full snapshot's instead of rebuilt: rebuilt, it made
    each pod 20x dearer (bench/backtest.py)."""
    cluster, excluded = excluder.without(uid)
    if excluded:
        base = excluder.cluster.state
        existing_register(cluster.state, existing_for(base).without(base.pod(uid)))
    return cluster, excluded


def _row(
    compiled: CompiledPolicy,
    recorded: Recorded | None,
    pending: PodView | None,
    excluder: PodExcluder,
    stored: str,
) -> dict[str, Any]:
    if recorded is not None:
        ref, uid = f"{recorded.namespace}/{recorded.name}", recorded.uid
    else:
        assert pending is not None
        ref, uid = f"{pending['namespace']}/{pending['name']}", pending["uid"]
    row: dict[str, Any] = {
        "pod": ref,
        "uid": uid,
        "source": "recorded" if recorded is not None else "pending",
        "recorded": recorded.to_dict() if recorded is not None else None,
        "now": None,
        "problem": None,
    }
    try:
        pod = _pod(recorded) if recorded is not None else pending
    except InputError as exc:
        return {**row, "class": SKIPPED, "problem": str(exc)}
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a record read as JSON
        return {**row, "class": SKIPPED, "problem": f"the recorded pod cannot be read: {exc}"}
    assert pod is not None
    cluster, excluded = cluster_without(excluder, uid)
    now = judge(
        compiled=compiled, pod=pod, cluster=cluster, stored_profile=stored, excluded_self=excluded
    )
    return {**row, "class": classify(recorded, now), "now": now.to_dict()}
