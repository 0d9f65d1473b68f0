"""The request's pod: the key answers about it are remembered by (its content, never its uid), and
the last few engine views converted from it (filter and prioritize for one pod come back to back
with the same pod)."""

from __future__ import annotations

from typing import Any

import orjson

from policies.cluster.convert import pod_view
from policies.engine.inputs import PodView

from . import protocol

# Pods larger than this (as JSON) are converted on every call rather than remembered: a cache
# entry holds its key's bytes, and kube-scheduler's pods are a few KB (etcd stores at most 1.5 MB).
MAX_CACHED_POD_BYTES = 256 * 1024


def pod_key(args: protocol.ExtenderArgs | protocol.PreemptionArgs) -> bytes | None:
    """What a cached answer about the request's pod may be looked up by: the pod object itself,
    as orjson writes the parsed object (1, 1.0 and true stay apart, as they do in CEL), or None
    when it is too large to remember. Not its uid and resourceVersion: any caller can send a
    pending pod's with other content (issue 27: a forged pod's labels then decided the real
    pod's later calls). Computed once per parsed request (prioritize often reuses filter's)."""
    key = args.pod_key
    if key is None:
        try:
            key = orjson.dumps(args.pod)
        except orjson.JSONEncodeError:  # not from orjson.loads; never cached
            key = b""
        args.pod_key = key
    return key if 0 < len(key) <= MAX_CACHED_POD_BYTES else None


class PodCache:
    """The last few converted pods, by content (`pod_key`): filter and prioritize for one pod
    come back to back with the same pod."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._items: dict[bytes, PodView] = {}

    def view(self, obj: dict[str, Any], key: bytes | None) -> PodView:
        if key is not None:
            hit = self._items.get(key)
            if hit is not None:
                return hit
        view = pod_view(obj)
        if key is not None:
            if len(self._items) >= self._size:
                self._items.pop(next(iter(self._items)))
            self._items[key] = view
        return view
