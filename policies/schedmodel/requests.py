"""A pod's resource requests as each kube-scheduler v1.35.8 plugin reads them.

k8s.io/component-helpers/resource `PodRequests(pod, opts)` over the stored Pod object:

    containers: sum_c requests_c            (each with the `non_missing` defaults it lacks)
    init:       sidecars (restartPolicy Always) add to the sum; every init container's use is
                its requests + the sidecars started before it; the result is the max of both
    pod level:  spec.resources.requests replaces cpu, memory and hugepages-* when set, unless
                `pod_level` is off (IsSupportedPodLevelResource, IsPodLevelRequestsSet)
    overhead:   spec.overhead is added

The plugins ask with different options, and their answers differ for the same pod:
- NodeResourcesFit's *score* (noderesources/resource_allocation.go calculatePodResourceRequest;
  fit.go never sets the scorer's enablePodLevelResources): pod level skipped, a container
  without a cpu (memory) request counts 100m (200 MiB);
- NodeResourcesBalancedAllocation (balanced_allocation.go, useRequested): pod level honoured,
  nothing defaulted;
- a bound pod's share of its node's NonZeroRequested (framework/types.go PodInfo.
  CalculateResource, getNonMissingContainerRequests): pod level honoured; the 100m / 200 MiB
  defaults apply when the pod sets no pod-level request, else only for a resource that neither
  the pod level nor any container requests.
Quantities sum exactly and round up once (Quantity.MilliValue for cpu, Value otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

from policies.engine.quantity import QuantityError, parse_quantity

DEFAULT_MILLI_CPU = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
NON_ZERO = {"cpu": Fraction(DEFAULT_MILLI_CPU, 1000), "memory": Fraction(DEFAULT_MEMORY)}


# A cluster's pods repeat a handful of quantity strings ("100m", "128Mi"); parsing each into a
# Fraction was 60% of building the scheduler model's view of 50 000 bound pods (9.5 of 11 s).
# Only short strings are kept (a real quantity has a few characters; MAX_DIGITS bounds the rest):
# the cache holds at most QUANTITY_CACHE * QUANTITY_CACHED_CHARS characters, whoever writes pods.
QUANTITY_CACHE = 4096
QUANTITY_CACHED_CHARS = 32


@lru_cache(maxsize=QUANTITY_CACHE)
def _quantity_cached(text: str) -> Fraction:
    try:
        return parse_quantity(text)
    except QuantityError:
        return Fraction(0)


def _quantity(value: Any) -> Fraction:
    """A request's amount; 0 for one that is not a quantity (as before this cache)."""
    text = str(value)
    if len(text) <= QUANTITY_CACHED_CHARS:
        return _quantity_cached(text)
    try:
        return parse_quantity(text)
    except QuantityError:
        return Fraction(0)


def _amounts(raw: Any) -> dict[str, Fraction]:
    if type(raw) is not dict:
        return {}
    return {str(name): _quantity(value) for name, value in raw.items()}


def _container_requests(container: Any, non_missing: Mapping[str, Fraction]) -> dict[str, Fraction]:
    resources = container.get("resources") if type(container) is dict else None
    reqs = _amounts(resources.get("requests") if type(resources) is dict else None)
    for name, value in non_missing.items():  # applyNonMissing: only where the key is absent
        if name not in reqs:
            reqs[name] = value
    return reqs


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _max(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        if name not in total or value > total[name]:
            total[name] = value


def pod_level_supported(name: str) -> bool:
    """IsSupportedPodLevelResource: cpu, memory and hugepages-*."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """spec.resources.requests of the resources the pod level may set ({} when unset)."""
    resources = spec.get("resources")
    if type(resources) is not dict:
        return {}
    return {k: v for k, v in _amounts(resources.get("requests")).items() if pod_level_supported(k)}


def pod_requests_exact(
    spec: Mapping[str, Any], *, pod_level: bool, non_missing: Mapping[str, Fraction] = {}
) -> dict[str, Fraction]:
    """PodRequests (see the module docstring) as exact amounts in whole units."""
    reqs: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        _add(reqs, _container_requests(container, non_missing))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or ():
        use = _container_requests(container, non_missing)
        if type(container) is dict and container.get("restartPolicy") == "Always":
            _add(reqs, use)
            _add(sidecars, use)
            use = dict(sidecars)
        else:
            _add(use, sidecars)
        _max(init_peak, use)
    _max(reqs, init_peak)
    if pod_level:
        reqs.update(pod_level_requests(spec))
    _add(reqs, _amounts(spec.get("overhead")))
    return reqs


def as_units(name: str, value: Fraction) -> int:
    """cpu in millicores, everything else in whole units, rounded up (Quantity.MilliValue/Value)."""
    return math.ceil(value * 1000) if name == "cpu" else math.ceil(value)


def pod_requests(
    spec: Mapping[str, Any], *, pod_level: bool, non_missing: Mapping[str, Fraction] = {}
) -> dict[str, int]:
    """PodRequests with cpu in millicores and every other resource in whole units."""
    exact = pod_requests_exact(spec, pod_level=pod_level, non_missing=non_missing)
    return {name: as_units(name, value) for name, value in exact.items()}


def fit_score_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What NodeResourcesFit's score adds for the pod: pod level skipped, 100m / 200 MiB for
    containers that request no cpu / memory."""
    return pod_requests(spec, pod_level=False, non_missing=NON_ZERO)


# node_nonzero_share by what it reads of a spec: the pods of one workload ask alike, and the
# model's view of the bound pods asks for every one of them (policies/schedmodel/plugins.py).
# Cleared when full, so it holds at most SHARE_CACHE signatures.
SHARE_CACHE = 4096
_shares: dict[tuple, tuple[int, int]] = {}


def _requests_signature(spec: Mapping[str, Any]) -> tuple | None:
    """Everything pod_requests_exact and pod_level_requests read of `spec`, hashable; None for
    a spec that cannot be keyed (not the shape the API server stores)."""

    def requests_of(holder: Any) -> tuple:
        resources = holder.get("resources") if type(holder) is dict else None
        found = resources.get("requests") if type(resources) is dict else None
        return tuple(found.items()) if type(found) is dict else (found,)

    try:
        parts: list[Any] = [requests_of(c) for c in spec.get("containers") or ()]
        parts.append(None)  # the init containers follow
        for container in spec.get("initContainers") or ():
            restart = container.get("restartPolicy") if type(container) is dict else None
            parts.append((restart, requests_of(container)))
        parts.append(requests_of(spec))
        overhead = spec.get("overhead")
        parts.append(tuple(overhead.items()) if type(overhead) is dict else (overhead,))
        signature = tuple(parts)
        hash(signature)
    except (TypeError, AttributeError):
        return None
    return signature


def node_nonzero_share(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(milli-cpu, memory) a bound pod adds to its node's NonZeroRequested."""
    signature = _requests_signature(spec)
    if signature is None:
        return _node_nonzero_share(spec)
    found = _shares.get(signature)
    if found is None:
        if len(_shares) >= SHARE_CACHE:
            _shares.clear()
        found = _shares[signature] = _node_nonzero_share(spec)
    return found


def _node_nonzero_share(spec: Mapping[str, Any]) -> tuple[int, int]:
    requests = pod_requests_exact(spec, pod_level=True)
    if pod_level_requests(spec):
        non_missing = {k: v for k, v in NON_ZERO.items() if k not in requests}
    else:
        non_missing = NON_ZERO
    if non_missing:
        requests = pod_requests_exact(spec, pod_level=True, non_missing=non_missing)
    return (
        as_units("cpu", requests.get("cpu", Fraction(0))),
        as_units("memory", requests.get("memory", Fraction(0))),
    )
