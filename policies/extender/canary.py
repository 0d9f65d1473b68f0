"""The canary's counts in an extender process and its guard (issue 25, item 3).

Every filter answer during a canary counts for the arm that judged the pod (judged, rejected
on every node, evaluation errors). The counts go to one Redis hash per canary,
    schedweb:canary:<policy>:v<canary version>    fields canary:judged ... stable:errors
by HINCRBY, shared by every process and replica; each flush reads the totals back in the same
round trip and applies the guard (policies/rollout/guard.py). Flushed right after each answer
on the direct path (entry.after_answer: kube-scheduler's next filter sees the result) and on
every wake of the runtime's thread (at most BLOCK_SECONDS, 0.5 s, for the other paths), so the
guard acts on the totals of every process within one flush of the crossing: a canary that
rejects every pod trips at its minPods-th pod plus the pods answered meanwhile by other
processes' unflushed counts.

When it trips, this process stops judging with the canary at once (`tripped`: the registry
leaves it out, policies/extender/runtime.py), every other process does on its next flush (the
same totals, the same verdict), and the first one to SET NX the trip queues the worker's
rollback (schedweb.canary_guard: the canary's activation ends, audited with the guard as
actor); the pods it rejected are requeued as every rejected pod is (policies/requeue.py) and
judged by the stable version.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from policies.rollout.guard import FIELDS, KEY, TTL_SECONDS, verdict


class CanaryCounts:
    """Counts not yet flushed, by (policy, canary version) and field; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], dict[str, int]] = {}
        # (policy, canary version) -> its guard, from the served entries that counted
        self._guards: dict[tuple[str, int], dict[str, Any]] = {}
        self.tripped: set[tuple[str, int]] = set()

    def count(self, served: Any, *, rejected: bool, errors: bool) -> None:
        """One filter answer by `served` (the canary or its stable version)."""
        canary = served if served.arm == "canary" else served.canary
        if canary is None:
            return
        key = (served.name, canary.version)
        with self._lock:
            pending = self._pending.setdefault(key, defaultdict(int))
            pending[f"{served.arm}:judged"] += 1
            pending[f"{served.arm}:rejected"] += int(rejected)
            pending[f"{served.arm}:errors"] += int(errors)
            self._guards[key] = canary.guard

    def __bool__(self) -> bool:
        return bool(self._pending)

    def flush(self, client) -> list[tuple[str, int, dict[str, Any]]]:
        """Adds the pending counts to Redis and reads the totals back (one pipeline); returns
        the canaries that trip now: (policy, version, why). Counts are kept when Redis fails."""
        with self._lock:
            pending, self._pending = self._pending, {}
            guards = dict(self._guards)
        if not pending:
            return []
        try:
            pipe = client.pipeline(transaction=False)
            for (policy, version), counts in pending.items():
                key = KEY.format(policy=policy, version=version)
                for field in FIELDS:  # an increment of 0 reads the total
                    pipe.hincrby(key, field, counts.get(field, 0))
                pipe.expire(key, TTL_SECONDS)
            replies = pipe.execute()
        except Exception:
            with self._lock:
                for key, counts in pending.items():
                    mine = self._pending.setdefault(key, defaultdict(int))
                    for field, value in counts.items():
                        mine[field] += value
            raise
        trips = []
        step = len(FIELDS) + 1
        for i, (policy, version) in enumerate(pending):
            totals = dict(zip(FIELDS, replies[i * step : i * step + len(FIELDS)], strict=True))
            why = verdict(totals, guards.get((policy, version)) or {})
            if why is not None and (policy, version) not in self.tripped:
                self.tripped.add((policy, version))
                trips.append((policy, version, why))
        return trips
