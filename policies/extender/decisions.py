"""Sampled extender decisions on their way to the Decision table: a token bucket that says
whether to record the next one, the buffer the runtime's thread drains, and the batch queued
for the Celery task (policies/tasks/decisions.py)."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from policies.background import DECISIONS_RECORD, task_queue

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
