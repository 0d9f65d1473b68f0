"""Clocks a test controls, and CPU bounds that do not depend on what else the machine runs.

A test never bets on the machine's speed (issue 22): a deadline is exercised with a clock the
test moves itself, and a "this stays bounded" check counts this thread's CPU time (not wall
time, which a loaded 2-core machine stretches) against a bound far above the work's own cost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StepClock:
    """A monotonic clock that moves `step` seconds each time it is read: "N seconds have
    passed" means "the code looked at the clock N / step times", whatever the machine's speed.
    `looks` counts the reads."""

    def __init__(self, step: float = 1.0) -> None:
        self.step = step
        self.now = 0.0
        self.looks = 0

    def __call__(self) -> float:
        self.looks += 1
        self.now += self.step
        return self.now


@contextmanager
def cpu_bound(seconds: float) -> Iterator[None]:
    """Fails when the block uses more than `seconds` of this thread's CPU time.

    For hostile-input tests whose claim is "bounded, not minutes or hours": the bound is set at
    least eight times the block's cost on the development machine (the largest, 0.24 s, a
    5000-deep JSON document), and CPU time is what the block itself used, so a CPU hog beside
    it does not move it."""
    started = time.thread_time()
    yield
    used = time.thread_time() - started
    assert used < seconds, f"the block used {used:.2f} s of CPU, over its bound of {seconds} s"
