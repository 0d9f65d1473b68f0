"""The shadow version judged beside the active one (issue 25), after the answer is written.

Where: in the shadow lane of the listener's offload pool when it has one, a process in the idle
scheduling class (the listener hands it the filter body, `run(forward)`; the lane judges it with
`Extender.shadow`, both versions on its own snapshot), else here, on the listener's loop. On the
loop, the evaluation (0.17 ms of CPU at 500 nodes, more on a loaded core) held kube-scheduler's
next call up: its throughput with a shadow was 0.85-0.90 of the run without (bench/shadow.py);
in the answering worker at nice 10, 0.83. A job the lane cannot take (its queue full) is counted
skipped.

filter leaves a job (the pod, the candidate node views, the active version's evaluation) and
`Extender.after_answer` runs it once filter's answer is on the wire, under the serve lock (the
snapshot changes in place between requests, never during one): the shadow is evaluated on the
same pod and nodes (filters and scores), compared with the active evaluation (`compare`),
counted on /metrics and recorded for the report (policies/rollout/). Nothing of it is read by any
answer: an exception or a timeout in the shadow is a recorded shadow error, never an answer's.

Bounded, so that kube-scheduler's next call waits at most one slice for it:
- each evaluation runs under `deadline(slice)`, SCHEDWEB_SHADOW_SLICE_MS of this thread's CPU
  time (not wall time, which a loaded machine stretches without the shadow doing more work):
  past it the evaluation stops (the engine looks at the clock before each node and every
  CHECK_EVERY cost units) and the pod is recorded as a shadow error "past its slice";
- a share of the process's time (`ShadowGovernor`): a bucket of CPU seconds refilled at
  SCHEDWEB_SHADOW_SHARE seconds per second of wall time, holding at most one slice. While it is
  empty, shadow work is shed: the pod is counted `skipped` and recorded as not judged (the report
  shows it). Over any window T the shadow thus costs this process at most SHARE * T + one slice
  of CPU, whatever the shadow's rules or the pods' rate.
A job that a newer filter replaces before any answer was written (the ASGI path and the offload
pool do not call after_answer) is counted skipped too.

Recorded like decisions, by counts and samples (as Gatekeeper's audit keeps a total per
constraint and lists at most a limit of violations): every judgement is counted in
`ShadowTallies` (per shadow version, active version and outcome), written once a second by the
runtime; a pod judged differently is listed as a record of its own at most `listed()` a second
(SCHEDWEB_SHADOW_RECORDS_PER_SECOND), and at most `details()` a second of those keep both node
breakdowns. A pod judged alike, or skipped, is counted only. Building a record with breakdowns
costs about 2.5 ms at 500 nodes, and a record per pod put a row per scheduled pod into the
decisions store: with 20 breakdowns a second and a record per pod, kube-scheduler's throughput
with a shadow was 0.77-0.84 of the run without (bench/shadow.py, 1000 pods, 500 nodes); with
these rates 0.89-0.90; a shadow served but never judged, 0.98.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from policies.engine.cel.deadline import EvaluationTimeout, deadline
from policies.engine.inputs import NodeView, PodView
from policies.engine.results import Evaluation

# Names listed per kind of difference in a record (the counts are exact beyond it).
MAX_LISTED = 500
# Outcomes, most telling first: a pod gets the first that holds.
OUTCOMES = ("error", "rejected", "moved", "nodes", "same")


@dataclass(slots=True)
class ShadowJob:
    """What filter leaves for after its answer: enough to judge the same request again."""

    active: Any  # ServedPolicy that answered
    shadow: Any  # its shadow ServedPolicy
    pod: PodView
    nodes: list[NodeView]
    state: Any
    evaluation: Evaluation  # the active version's, as answered
    at: float  # Unix time of the answer
    body: bytes | None = None  # the filter body answered, for a worker to judge (`forward`)


@dataclass(frozen=True, slots=True)
class Difference:
    """How the shadow's evaluation of one pod differs from the active one's.

    `rejects`: nodes the active version let through and the shadow would reject; `admits`:
    the other way round; `no_feasible`: the active version left the pod a node and the shadow
    none; `preferred`: the policies' top-scored nodes differ (each side's `winners`, both
    sorted; empty when a side did not score); `errors`: nodes on which a shadow rule failed."""

    rejects: tuple[str, ...]
    admits: tuple[str, ...]
    no_feasible: bool
    preferred: bool
    active_top: tuple[str, ...]
    shadow_top: tuple[str, ...]
    errors: int

    @property
    def outcome(self) -> str:
        if self.errors:
            return "error"
        if self.no_feasible:
            return "rejected"
        if self.preferred:
            return "moved"
        if self.rejects or self.admits:
            return "nodes"
        return "same"

    def kinds(self) -> list[str]:
        """Every kind of difference found (a pod may have several), for the counters."""
        found = []
        if self.rejects:
            found.append("rejects")
        if self.admits:
            found.append("admits")
        if self.no_feasible:
            found.append("no_feasible")
        if self.preferred:
            found.append("preferred")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "rejects": list(self.rejects[:MAX_LISTED]),
            "rejectsCount": len(self.rejects),
            "admits": list(self.admits[:MAX_LISTED]),
            "admitsCount": len(self.admits),
            "noFeasible": self.no_feasible,
            "preferred": self.preferred,
            "activeTop": list(self.active_top[:MAX_LISTED]),
            "shadowTop": list(self.shadow_top[:MAX_LISTED]),
            "errors": self.errors,
        }


def compare(active: Evaluation, shadow: Evaluation) -> Difference:
    """The shadow's evaluation against the active one's over the same nodes, in that order."""
    if active.node_names != shadow.node_names:
        raise ValueError("the two evaluations are over different nodes")
    rejects = admits = ()
    if active.passed != shadow.passed:  # compared in C first: the usual case is equal verdicts
        rejects = tuple(
            name
            for name, a, s in zip(active.node_names, active.passed, shadow.passed)
            if a and not s
        )
        admits = tuple(
            name
            for name, a, s in zip(active.node_names, active.passed, shadow.passed)
            if s and not a
        )
    active_top = tuple(sorted(active.winners()))
    shadow_top = tuple(sorted(shadow.winners()))
    scored = active.applies and active.scored and shadow.applies and shadow.scored
    return Difference(
        rejects=rejects,
        admits=admits,
        no_feasible=any(active.passed) and not any(shadow.passed),
        preferred=scored and bool(active_top or shadow_top) and active_top != shadow_top,
        active_top=active_top,
        shadow_top=shadow_top,
        errors=sum(1 for errors in shadow.errors.values() if errors),
    )


class ShadowGovernor:
    """The share of this process's time the shadow may take: a bucket of CPU seconds refilled
    at `share` per second of `clock` time, holding at most `burst`; `allow()` while it is not
    empty, `spend(seconds)` after each evaluation (it may go below zero: the next ones wait)."""

    def __init__(
        self,
        *,
        share: float,
        burst: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = share
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._last = clock()

    def allow(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.share)
        self._last = now
        return self.share > 0 and self._tokens > 0

    def spend(self, seconds: float) -> None:
        self._tokens -= seconds


class LanePace:
    """Holds the shadow lane's whole CPU time (its process's: parsing, both evaluations, the
    snapshot's catch-up, records; policies/extender/offload.py) to `share` of one core. After
    each body `wait()` sleeps while the process has spent more than `share` CPU seconds per
    second of wall time, less a `burst` it may run ahead. Asleep, the lane reads no body: they
    wait in the listener's queue (SCHEDWEB_SHADOW_QUEUE) and past it are skipped, counted. In
    the idle scheduling class the lane still took 0.6-0.9 ms of CPU per pod on a busy 2-core
    machine, and kube-scheduler lost 10-20% of its throughput (bench shadow). `cpu`, `clock`
    and `sleep`: the process's (tests give their own)."""

    def __init__(
        self,
        *,
        share: float,
        burst: float = 0.1,
        cpu: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._share = share
        self._burst = burst
        self._cpu = cpu
        self._clock = clock
        self._sleep = sleep
        self._tokens = burst
        self._last = clock()
        self._last_cpu = cpu()

    def wait(self) -> float:
        """Sleeps off the CPU spent past the share, if any; returns the seconds slept."""
        now, cpu = self._clock(), self._cpu()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._share)
        self._tokens -= cpu - self._last_cpu
        self._last, self._last_cpu = now, cpu
        if self._tokens >= 0 or self._share <= 0:  # no share: the governor judges nothing
            return 0.0
        delay = -self._tokens / self._share
        self._sleep(delay)
        return delay


def shadow_judge(
    job: ShadowJob,
    *,
    slice_seconds: float,
    cpu: Callable[[], float] = time.thread_time,
    clock: Callable[[], float] | None = None,
) -> tuple[Evaluation | None, Difference | None, str, float]:
    """Evaluates the shadow on the job's pod and nodes within the slice: (its evaluation, the
    difference, an error in words, CPU seconds spent). `clock` is the slice's (tests)."""
    started = cpu()
    evaluation = difference = None
    error = ""
    try:
        with deadline(slice_seconds, clock=clock):
            if job.evaluation.applies and not job.evaluation.scored:
                # filter answered without scores (full Node objects, a pod too large to
                # cache): the active version's preferred node needs them, within the slice
                job.evaluation = job.active.compiled.evaluate(
                    job.pod, job.nodes, job.state, memo=True
                )
            evaluation = job.shadow.compiled.evaluate(job.pod, job.nodes, job.state, memo=True)
        difference = compare(job.evaluation, evaluation)
    except EvaluationTimeout:
        error = f"the shadow's evaluation ran past its slice of {slice_seconds * 1000:g} ms"
        evaluation = None
    except Exception as exc:  # the shadow's failure is recorded; it never reaches an answer
        error = f"the shadow's evaluation failed: {type(exc).__name__}: {str(exc)[:200]}"
        evaluation = None
    return evaluation, difference, error, max(0.0, cpu() - started)


def shadow_record(
    job: ShadowJob,
    *,
    outcome: str,
    decision: Callable[..., dict[str, Any]],
    evaluation: Evaluation | None = None,
    difference: Difference | None = None,
    error: str = "",
    seconds: float = 0.0,
    details: bool = False,
) -> dict[str, Any]:
    """The record of one shadow judgement for the decisions store (services.decisions_store):
    the pod, both versions, the outcome and the difference; with `details`, both versions' node
    breakdowns (`decision`: decisions.decision_record, the decisions' own compact form)."""
    pod = job.pod
    record: dict[str, Any] = {
        "kind": "decision",
        "role": "shadow",
        "outcome": outcome,
        "at": job.at,
        "pod": {"namespace": pod["namespace"], "name": pod["name"], "uid": pod["uid"]},
        "policy": job.shadow.name,
        "version": job.shadow.version,
        "verb": "shadow",
        "nodes": [],
        "shadow": {
            "activeVersion": job.active.version,
            "candidates": len(job.nodes),
            "evalMs": round(seconds * 1000, 3),
            **({"error": error[:300]} if error else {}),
            **({"difference": difference.to_dict()} if difference is not None else {}),
        },
    }
    if details and evaluation is not None:
        shadow_side = decision(pod, job.shadow, "shadow", evaluation, job.at)
        active_side = decision(pod, job.active, "filter", job.evaluation, job.at)
        record.update(
            {k: shadow_side[k] for k in ("nodes", "scores", "weights", "winners", "podManifest")}
        )
        record["shadow"]["active"] = {
            k: active_side[k] for k in ("nodes", "scores", "weights", "winners")
        }
    return record


class ShadowTallies:
    """Every shadow judgement counted by (policy, shadow version, active version) and outcome,
    exact whatever is listed: `count` from the request path, `take` from the runtime's thread
    (a lock between the two: neither loses a count)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int, int], Counter[str]] = {}

    def count(self, job: ShadowJob, outcome: str) -> None:
        key = (job.shadow.name, job.shadow.version, job.active.version)
        with self._lock:
            counts = self._counts.get(key)
            if counts is None:
                counts = self._counts[key] = Counter()
            counts[outcome] += 1

    def take(self, at: float | None = None) -> list[dict[str, Any]]:
        """The counts since the last take, as records for the decisions store (one per key)."""
        with self._lock:
            taken, self._counts = self._counts, {}
        at = time.time() if at is None else at
        return [
            {
                "kind": "shadow-tally",
                "at": at,
                "policy": policy,
                "version": version,
                "activeVersion": active,
                "counts": dict(counts),
            }
            for (policy, version, active), counts in taken.items()
        ]


class Shadows:
    """One Extender's shadow work: `leave(job)` from filter, `run()` from after_answer (the
    caller holding the serve lock: the job's node views are the snapshot's). `governor`,
    `slice_seconds`: the bounds (default: the settings); `details()`: whether the next record
    of a differing pod may keep both node breakdowns (a rate); `listed()`: whether the next
    differing pod is listed as a record (a rate; every pod is counted in `tallies`);
    `decision`: the decisions' record builder (decisions.decision_record)."""

    def __init__(
        self,
        *,
        metrics: Any,
        record: Callable[[Any], None],
        decision: Callable[..., dict[str, Any]],
        governor: ShadowGovernor | None = None,
        slice_seconds: float | None = None,
        details: Callable[[], bool] | None = None,
        listed: Callable[[], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if slice_seconds is None or governor is None:
            from django.conf import settings

            slice_seconds = slice_seconds or settings.SCHEDWEB_SHADOW_SLICE_MS / 1000
            governor = governor or ShadowGovernor(
                share=settings.SCHEDWEB_SHADOW_SHARE, burst=slice_seconds
            )
        self.job: ShadowJob | None = None
        self.governor = governor
        self.slice_seconds = slice_seconds
        self._metrics = metrics
        self._record = record
        self._decision = decision
        self._details = details or (lambda: True)
        self._listed = listed or (lambda: True)
        self.tallies = ShadowTallies()
        self._clock = clock or time.thread_time  # the slice's clock; tests give their own

    def leave(self, job: ShadowJob) -> None:
        """The job for the next run(); one left unjudged (no run came) is skipped."""
        if self.job is not None:
            self._skipped(self.job)
        self.job = job

    def run(self, forward: Callable[[bytes], bool] | None = None) -> None:
        """Judges the job left, if any: shed when the share of time is spent, stopped past its
        slice; counted either way, and a differing pod listed within the rate (the record built
        later, off this path)."""
        job, self.job = self.job, None
        if job is None:
            return
        if forward is not None:
            # judged in the offload pool's shadow lane, off this loop (never here, busy or
            # not): `forward` queues the body for it, False when its queue is full
            if job.body is None or not forward(job.body):
                self._skipped(job)
            return
        self.judge(job)

    def judge(self, job: ShadowJob) -> None:
        """Judges `job` in this process, within the share and the slice (run, or a worker
        of the offload pool for a forwarded body)."""
        if not self.governor.allow():
            self._skipped(job)
            return
        evaluation, difference, error, seconds = shadow_judge(
            job, slice_seconds=self.slice_seconds, clock=self._clock
        )
        self.governor.spend(seconds)
        outcome = "error" if error or difference is None else difference.outcome
        self._metrics.shadow(outcome, difference.kinds() if difference else [], seconds)
        self.tallies.count(job, outcome)
        if outcome == "same" or not self._listed():
            return
        self._record(
            partial(
                shadow_record,
                job,
                outcome=outcome,
                decision=self._decision,
                evaluation=evaluation,
                difference=difference,
                error=error,
                seconds=seconds,
                details=self._details(),
            )
        )

    def _skipped(self, job: ShadowJob) -> None:
        self._metrics.shadow_skipped()
        self.tallies.count(job, "skipped")
