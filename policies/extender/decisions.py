"""Sampled extender decisions on their way to the Decision table: a token bucket that says
whether to record the next one, the record built from an evaluation's columns, the buffer the
runtime's thread drains, and the batch queued for the Celery task (policies/tasks/decisions.py)."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from policies.background import DECISIONS_RECORD, task_queue

if TYPE_CHECKING:
    from policies.engine.inputs import PodView

    from .service import ServedPolicy

log = logging.getLogger(__name__)


class Rate:
    """At most `per_second` yes a second (a token bucket)."""

    def __init__(self, *, per_second: float) -> None:
        self._per_second = per_second
        self._allowance = per_second
        self._last = time.monotonic()

    def wanted(self) -> bool:
        """Whether to do the next one: asked BEFORE building a record, which costs about a
        millisecond for 500 nodes."""
        now = time.monotonic()
        self._allowance = min(
            self._per_second, self._allowance + (now - self._last) * self._per_second
        )
        self._last = now
        if self._allowance >= 1:
            self._allowance -= 1
            return True
        return False


class DecisionBuffer(Rate):
    """Sampled decisions waiting to be written by a Celery task, at most `per_second` a second
    (`wanted`); shadow records (issue 25) by their own rates (policies/extender/shadow.py)."""

    def __init__(self, *, per_second: float, capacity: int = 2000) -> None:
        super().__init__(per_second=per_second)
        self._items: deque[dict[str, Any]] = deque(maxlen=capacity)

    def append(self, decision: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        self._items.append(decision)

    def take(self) -> list[dict[str, Any]]:
        """The records so far, oldest first; deferred ones are built here, off the request path."""
        items = []
        while self._items:
            item = self._items.popleft()
            if callable(item):
                try:
                    item = item()
                except Exception:  # a record is a sample: never let one stop the others
                    log.exception("could not build a sampled decision record")
                    continue
            items.append(item)
        return items


def decisions_queue(batch: list[dict[str, Any]]) -> None:
    """Queues `batch` for the task as JSON encoded here by orjson: four records of 500 nodes
    take it 0.3 ms, kombu's JSON 4.3 ms, on the thread whose GIL kube-scheduler's answers wait
    for. A batch orjson does not encode (an integer past 64 bits) goes to kombu as it is.
    Raises what the broker raises."""
    try:
        payload: list[dict[str, Any]] | str = orjson.dumps(batch).decode()
    except TypeError:
        payload = batch
    task_queue(DECISIONS_RECORD, payload)


MAX_DECISION_POD_BYTES = 64 * 1024  # a larger pod is recorded without its manifest


def pod_manifest(pod: PodView) -> str:
    """The judged pod as JSON (name, namespace, labels, annotations, spec) for the decision
    record, so the playground can open it once the pod is gone; "" when it is too large."""
    obj = pod.get("object") or {}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod["name"],
            "namespace": pod["namespace"],
            "labels": dict(pod["labels"]),
            "annotations": (obj.get("metadata") or {}).get("annotations") or {},
        },
        "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k != "nodeName"},
    }
    try:
        text = json.dumps(manifest, separators=(",", ":"))
    except (TypeError, ValueError):
        return ""
    return text if len(text) <= MAX_DECISION_POD_BYTES else ""


def decision_record(
    pod: PodView,
    served: ServedPolicy,
    verb: str,
    evaluation,
    at: float | None = None,
    catch_up: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A compact record of one decision, built from the columns (no per-node objects)."""
    nodes = []
    scored = evaluation.scored
    for i, name in enumerate(evaluation.node_names):
        entry: dict[str, Any] = {"n": name, "ok": evaluation.passed[i]}
        if not evaluation.passed[i]:
            entry["rule"] = evaluation.failed_rule[i]
            entry["msg"] = evaluation.messages[i]
        elif scored:
            entry["raw"] = [col[i] for col in evaluation.raw]
            entry["norm"] = [round(col[i], 3) for col in evaluation.normalized]
            entry["total"] = round(evaluation.total[i], 3)
            entry["ext"] = evaluation.extender[i]
        errors = evaluation.errors.get(i)
        if errors:
            entry["errors"] = [e.to_dict() for e in errors]
        nodes.append(entry)
    return {
        "kind": "decision",
        "at": time.time() if at is None else at,
        "pod": {"namespace": pod["namespace"], "name": pod["name"], "uid": pod["uid"]},
        "podManifest": pod_manifest(pod),
        "policy": served.name,
        "version": served.version,
        **({"arm": served.arm} if served.arm else {}),  # during a canary: who judged
        "verb": verb,
        "scores": evaluation.score_names if scored else [],
        "weights": evaluation.weights if scored else [],
        "nodes": nodes,
        # the evaluation's own winners: totals above are rounded, and would show false ties
        "winners": evaluation.winners(),
        # the request waited for the snapshot to catch up: how long, for what, how it ended
        **({"catchUp": catch_up} if catch_up else {}),
    }
