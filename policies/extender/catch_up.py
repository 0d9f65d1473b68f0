"""Bounded waits for the snapshot to catch up with kube-scheduler (issue 24).

kube-scheduler and schedweb's watcher follow the same API server; a request can name a node the
extender's snapshot does not hold yet (an autoscaler added it to make room for pods that are
waiting: exactly when it matters), or hold only as created, before its kubelet wrote its status
(no allocatable pods: kube-scheduler's NodeResourcesFit places nothing there, so the question
itself says the snapshot is behind), or be about a pod the snapshot has not seen (created right
after another was deleted: the deletion, earlier in the same watch, is not applied either; a
pod whose resourceVersion the pods watch has already passed is not waited for).
Answering at once judged new nodes by failurePolicy and counted deleted pods. Instead such a
request waits, for at most SCHEDWEB_EXTENDER_CATCH_UP_MS, until the thread that applies watch
events (pushed, milliseconds behind) has moved the snapshot on, then is judged again; past the
bound, failurePolicy applies as before. The decision record says it waited, for what and how long.

The bounds, against a client that names nodes no one will ever create:
- the request's own deadline, on the loop's clock; the wait is a future on the event loop, woken
  by the applying thread (`moved`), so kube-scheduler's other calls and /healthz are answered
  meanwhile, and nothing waits on the database, a task or Redis;
- at most MAX_WAITING requests of a process wait at once (the others are answered at once);
- a wait that ended with the snapshot unmoved (the watcher is silent, or the thing never comes)
  is not repeated, for those names or that pod, until the snapshot moves (a request lacking
  something else still waits); a static source (demo, a file) or a stale snapshot (the watcher
  or Redis is down) is never waited for.
Only the pod's own absence and the names the request gives count: a client learns nothing of
other clients' requests and cannot make one wait for its data.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from policies.cluster.state import resource_version

MAX_WAITING = 32  # requests of one process waiting at once
MAX_SILENT = 10_000  # names and pods remembered as not worth waiting for again (then: all)
_REPORTED_NODES = 20  # names kept in a decision record

# What a policy reads that other pods change: usage and counts on nodes, the cluster helpers.
# A gang's hold counts the group's members in the snapshot, the pod itself included.
_READS_PODS = re.compile(r"\b(?:requested|podCount|cluster)\b")


def policy_reads_pods(spec: Any) -> bool:
    """Whether the policy's answer depends on the cluster's pods as the snapshot holds them (the
    pod's own entry included): then a request about a pod the snapshot lacks waits for it. A
    word match over every expression: a false positive only makes such a request wait."""
    if spec.gang is not None:
        return True
    texts: list[str] = []
    for rule in (*spec.match_conditions, *spec.variables, *spec.filters, *spec.scores):
        texts.append(rule.expression)
        texts.append(getattr(rule, "message", "") or "")
    return any(_READS_PODS.search(text) for text in texts)


@dataclass(frozen=True, slots=True)
class Behind:
    """What a request needs that the snapshot did not hold at `version`."""

    nodes: tuple[str, ...]  # names missing, or held without a status
    pod: str  # the pod's uid when the snapshot lacks it and the policy reads pods, else ""
    version: int


def behind_of(
    *,
    state: Any,
    unknown: Iterable[str],
    names: list[str] | None,
    pod: Any,
    reads_pods: bool,
    version: int,
) -> Behind | None:
    """What the request waits for, or None: the names the snapshot lacks (`unknown`) or holds
    without a status (among `names`), and the request's pod (a PodView) when `reads_pods` and
    the snapshot neither holds it nor has seen a pod write as recent as its resourceVersion
    (then it was deleted since, or never existed: nothing will come)."""
    nodes = list(unknown)
    incomplete = state.incomplete_nodes() if state is not None else ()
    if incomplete and names:
        nodes += [name for name in names if name in incomplete]
    lacked = ""
    uid = pod["uid"] if reads_pods and state is not None else ""
    if uid and state.pod(uid) is None and not 0 < resource_version(pod) <= state.pods_seen:
        lacked = uid
    if not nodes and not lacked:
        return None
    return Behind(tuple(nodes), lacked, version)


class Attempt:
    """One request's catching up: when it started, until when it may wait, what it waited for
    and how it ended (for the decision record)."""

    __slots__ = ("behind", "deadline", "outcome", "started", "waited")

    def __init__(self, *, started: float, deadline: float) -> None:
        self.started = started
        self.deadline = deadline
        self.waited = 0.0  # seconds spent waiting so far
        self.behind: Behind | None = None  # what it waits (or waited) for
        self.outcome = ""  # "" (not waited), caught-up, timed-out

    def record(self) -> dict[str, Any] | None:
        """The decision record's `catchUp` entry, None when the request did not wait."""
        if not self.outcome or self.behind is None:
            return None
        return {
            "waitedMs": round(self.waited * 1000, 1),
            "outcome": self.outcome,
            "nodes": list(self.behind.nodes[:_REPORTED_NODES]),
            "pod": bool(self.behind.pod),
            "fromVersion": self.behind.version,
        }


class CatchUp:
    """One process's bounded waits, woken by the thread that applies snapshot changes."""

    def __init__(
        self,
        *,
        seconds: float,
        live: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        max_waiting: int = MAX_WAITING,
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.seconds = seconds
        self._live = live  # False for a static source (demo, file): nothing will catch up
        self._clock = clock
        self.max_waiting = max_waiting
        self._observe = observe or (lambda outcome, seconds: None)
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future, int]] = []
        self.version = 0  # the last version the applying thread reported
        # Waits that ended with the snapshot unmoved at this version, and what they lacked.
        self._silent_at: int | None = None
        self._silent: set[str] = set()
        self.waiting = 0

    def attempt(self) -> Attempt | None:
        """A new request's attempt, or None when waits are off (SCHEDWEB_EXTENDER_CATCH_UP_MS=0,
        or a static source)."""
        if self.seconds <= 0 or not self._live():
            return None
        now = self._clock()
        return Attempt(started=now, deadline=now + self.seconds)

    def may_wait(self, attempt: Attempt | None, snapshot: Any, behind: Behind) -> bool:
        """Whether a request lacking `behind` waits rather than being answered now."""
        if attempt is None or snapshot is None or snapshot.stale:
            return False
        if attempt.outcome == "timed-out" or self._clock() >= attempt.deadline:
            return False
        if self._silent_at == snapshot.version and (
            len(self._silent) >= MAX_SILENT or _keys(behind) <= self._silent
        ):
            return False  # a wait for just this saw nothing move: wait once something does
        if self.waiting >= self.max_waiting:
            self._observe("refused", 0.0)
            return False
        return True

    async def wait(self, attempt: Attempt, behind: Behind) -> None:
        """Waits (on the event loop) until the snapshot moves past `behind.version` or the
        attempt's deadline passes; then the caller judges the request again."""
        attempt.behind = behind
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.waiting += 1
        started = self._clock()
        with self._lock:
            moved = self.version > behind.version
            if not moved:
                self._waiters.append((loop, future, behind.version))
        try:
            if not moved:
                remaining = attempt.deadline - started
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(future, timeout=max(0.0, remaining))
        finally:
            self.waiting -= 1
            with self._lock:
                self._waiters = [w for w in self._waiters if w[1] is not future]
            attempt.waited += self._clock() - started
        if self.version > behind.version:
            attempt.outcome = "caught-up"
            return
        attempt.outcome = "timed-out"
        with self._lock:
            if self._silent_at != behind.version:
                self._silent_at, self._silent = behind.version, set()
            if len(self._silent) < MAX_SILENT:
                self._silent |= _keys(behind)

    def finished(self, attempt: Attempt | None, behind: Behind | None) -> None:
        """The request is answered: `behind` is what it still lacked (None: nothing). Counts
        the outcome of a request that waited."""
        if attempt is None or not attempt.outcome:
            return
        if behind is not None and attempt.outcome == "caught-up":
            attempt.outcome = "timed-out"  # moved, but not to what it needs, by the deadline
        self._observe(attempt.outcome, attempt.waited)

    def moved(self, version: int) -> None:
        """From the applying thread: the snapshot is now at `version`; wakes the waits behind
        it (each on its own loop)."""
        with self._lock:
            self.version = version
            if self._silent_at is not None and version != self._silent_at:
                self._silent_at, self._silent = None, set()
            if not self._waiters:
                return
            woken = [w for w in self._waiters if w[2] < version]
            self._waiters = [w for w in self._waiters if w[2] >= version]
        for loop, future, _ in woken:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its request is gone
                loop.call_soon_threadsafe(_resolve, future)


def _keys(behind: Behind) -> set[str]:
    return {*(f"node:{n}" for n in behind.nodes), *((f"pod:{behind.pod}",) if behind.pod else ())}


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
