"""The canary's guard (issue 25, item 3): whether the canary is worse than the stable
version past the publisher's threshold, from the two arms' counts over the same window (the
canary's life: both arms count from its publish, every extender process adding to the same
Redis hash, policies/extender/canary.py).

Counted per filter answer (a scheduling attempt of a pod): judged; rejected on every node (the
policy applied and no candidate passed); evaluation errors (a CEL error on some node). Rates are
per judged pod, in percent. The canary trips when it has judged at least `minPods` and
    rate_canary - rate_stable > threshold
for rejections (`rejectedRate`) or errors (`errorRate`); with no stable pod judged yet, the
stable rate is 0 (a canary that rejects every pod trips at its minPods-th pod).

`verdict` is pure; `trip_claim` and `totals_read` take the caller's Redis client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

# Redis: the counts of every process, and the first trip's figures (policies/extender/canary.py)
KEY = "schedweb:canary:{policy}:v{version}"
TRIPPED = KEY + ":tripped"
TTL_SECONDS = 31 * 86400

ARMS = ("canary", "stable")
COUNTS = ("judged", "rejected", "errors")
FIELDS = tuple(f"{arm}:{count}" for arm in ARMS for count in COUNTS)


def rates(totals: Mapping[str, int]) -> dict[str, dict[str, float | int]]:
    """{arm: {judged, rejected, errors, rejectedRate, errorRate}} from the hash's fields."""
    out: dict[str, dict[str, float | int]] = {}
    for arm in ARMS:
        judged = int(totals.get(f"{arm}:judged", 0))
        rejected = int(totals.get(f"{arm}:rejected", 0))
        errors = int(totals.get(f"{arm}:errors", 0))
        out[arm] = {
            "judged": judged,
            "rejected": rejected,
            "errors": errors,
            "rejectedRate": round(rejected * 100 / judged, 2) if judged else 0.0,
            "errorRate": round(errors * 100 / judged, 2) if judged else 0.0,
        }
    return out


def verdict(totals: Mapping[str, int], guard: Mapping[str, Any]) -> dict[str, Any] | None:
    """None while the canary holds; else why it trips: {reason, canary, stable, threshold}."""
    by_arm = rates(totals)
    canary, stable = by_arm["canary"], by_arm["stable"]
    if canary["judged"] < int(guard.get("minPods", 1)):
        return None
    for rate, reason in (("rejectedRate", "rejected"), ("errorRate", "errors")):
        threshold = float(guard.get(rate, 100.0))
        if canary[rate] - stable[rate] > threshold:
            return {
                "reason": reason,
                "canary": canary,
                "stable": stable,
                "threshold": {rate: threshold, "minPods": int(guard.get("minPods", 1))},
            }
    return None


def trip_claim(client, policy: str, version: int, why: dict[str, Any]) -> bool:
    """Whether this process is the first to report the trip (SET NX): it queues the rollback."""
    key = TRIPPED.format(policy=policy, version=version)
    return bool(client.set(key, orjson.dumps(why), nx=True, ex=TTL_SECONDS))


def totals_read(client, policy: str, version: int) -> dict[str, int]:
    """The canary's counts over every process, as the guard reads them."""
    raw = client.hgetall(KEY.format(policy=policy, version=version)) or {}
    return {
        (k.decode() if isinstance(k, bytes) else k): int(v)
        for k, v in raw.items()
        if (k.decode() if isinstance(k, bytes) else k) in FIELDS
    }
