"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Timing:
    """Wall-clock samples of one operation, in seconds."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    def ms(self) -> str:
        return f"median {self.median * 1e3:8.3f} ms   p99 {self.p99 * 1e3:8.3f} ms   (n={len(self.samples)})"


def measure(fn: Callable[[int], object], *, runs: int, warmup: int = 3) -> Timing:
    """Runs fn(i) `warmup` times untimed, then `runs` times timed; GC is paused while timing."""
    for i in range(warmup):
        fn(i)
    samples = []
    gc_was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(runs):
            start = time.perf_counter()
            fn(i)
            samples.append(time.perf_counter() - start)
    finally:
        if gc_was:
            gc.enable()
    return Timing(samples)
