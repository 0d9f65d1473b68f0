"""The score pipeline of DESIGN.md section 4 as small pure functions.

raw value -> normalized 0..100 -> times weight; total = weighted mean (0..100);
the extender reports round(total / 10) as an integer 0..10, which kube-scheduler multiplies by the
extender's weight and by 10 (MaxNodeScore / MaxExtenderPriority, extender-protocol.md section 3.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_SCORE = 100.0
MAX_EXTENDER_SCORE = 10


def normalize_none(raw: float) -> float:
    """Clamp to 0..100: `none` takes the expression's value as the score itself."""
    if raw <= 0:
        return 0.0
    if raw >= MAX_SCORE:
        return MAX_SCORE
    return float(raw)


def normalize_minmax(raws: Sequence[float | None]) -> list[float]:
    """Scale over the candidates: (v - min) * 100 / (max - min); None (no value) scores 0.

    When every candidate has the same value they are equally good and all get 100.
    """
    present = [v for v in raws if v is not None]
    if not present:
        return [0.0] * len(raws)
    low, high = min(present), max(present)
    if high == low:
        return [0.0 if v is None else MAX_SCORE for v in raws]
    span = high - low
    return [0.0 if v is None else (v - low) * MAX_SCORE / span for v in raws]


def weighted_total(normalized: Sequence[float], weights: Sequence[int]) -> float:
    """Weighted mean of the normalized scores: sum(n_i * w_i) / sum(w_i); 0 when all weights are 0."""
    weight_sum = sum(weights)
    if weight_sum == 0:
        return 0.0
    total = sum(n * w for n, w in zip(normalized, weights)) / weight_sum
    # Round away float noise (45.00000000001) so that the extender score is stable.
    return round(total, 6)


def extender_score(total: float) -> int:
    """round(total / 10), halves rounded up, as an integer 0..10 (protocol: integers only)."""
    score = math.floor(total / 10 + 0.5)
    return max(0, min(MAX_EXTENDER_SCORE, score))
