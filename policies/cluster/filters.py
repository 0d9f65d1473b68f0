"""Nodes and pods of a snapshot filtered the way the cluster page and /api/v1/cluster/* both
filter them: ?zone= ?label=key=value (repeatable; `key` alone: it exists) ?search= for nodes,
?namespace= ?node= ?phase= ?label= ?search= for pods. A malformed filter is an InputError
naming it (the API answers 400, the page shows the sentence and every row).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from policies.cluster.loaded import LoadedCluster
from policies.engine.inputs import NodeView, PodView
from policies.errors import InputError

ZONE_LABEL = "topology.kubernetes.io/zone"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_MAX_FILTER = 253  # longest label value / name a filter may carry (DNS subdomain)


def _labels(values: Sequence[str]) -> list[tuple[str, str | None]]:
    """`key=value` or `key` (must exist) filters; InputError naming a malformed one."""
    found = []
    for raw in values:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not key or len(raw) > 2 * _MAX_FILTER or "\x00" in raw:
            raise InputError(f"label filter {raw!r}: expected key=value or key")
        found.append((key, value if sep else None))
    return found


def _has_labels(labels: dict[str, str], wanted: Iterable[tuple[str, str | None]]) -> bool:
    return all(
        (key in labels) if value is None else labels.get(key) == value for key, value in wanted
    )


def _text(params: Any, name: str) -> str:
    value = params.get(name, "")
    if len(value) > _MAX_FILTER or "\x00" in value:
        raise InputError(f"{name}: at most {_MAX_FILTER} characters, no NUL")
    return value


def nodes_filtered(*, loaded: LoadedCluster, params: Any) -> list[NodeView]:
    """Nodes of the snapshot matching ?zone= ?label= ?search= (by name)."""
    zone = _text(params, "zone")
    search = _text(params, "search").lower()
    wanted = _labels(params.getlist("label"))
    out = []
    for node in loaded.state.nodes():
        if zone and node["labels"].get(ZONE_LABEL) != zone:
            continue
        if search and search not in node["name"].lower():
            continue
        if wanted and not _has_labels(node["labels"], wanted):
            continue
        out.append(node)
    return out


def pods_filtered(*, loaded: LoadedCluster, params: Any) -> list[PodView]:
    """Pods of the snapshot matching ?namespace= ?node= ?phase= ?label= ?search=."""
    namespace = _text(params, "namespace")
    node = _text(params, "node")
    phase = _text(params, "phase")
    search = _text(params, "search").lower()
    wanted = _labels(params.getlist("label"))
    out = []
    for pod in loaded.state.pods():
        if namespace and pod["namespace"] != namespace:
            continue
        if node and pod["nodeName"] != node:
            continue
        if phase and pod["phase"].lower() != phase.lower():
            continue
        if search and search not in pod["name"].lower():
            continue
        if wanted and not _has_labels(pod["labels"], wanted):
            continue
        out.append(pod)
    return out


MAX_SEARCH_TERMS = 8


def pods_search(*, loaded: LoadedCluster, query: str, limit: int = 20) -> list[PodView]:
    """The playground's pod search: every whitespace-separated term must match - `key=value`
    (or `key=`) a label, anything else a part of `namespace/name`. Pending pods first, then by
    namespace and name; at most `limit`. InputError for an over-long query."""
    if len(query) > 2 * _MAX_FILTER or "\x00" in query:
        raise InputError(f"search: at most {2 * _MAX_FILTER} characters, no NUL")
    terms = query.split()[:MAX_SEARCH_TERMS]
    labels = _labels([t for t in terms if "=" in t])
    parts = [t.lower() for t in terms if "=" not in t]
    found = [
        pod
        for pod in loaded.state.pods()
        if _has_labels(pod["labels"], labels)
        and all(p in f"{pod['namespace']}/{pod['name']}".lower() for p in parts)
    ]
    found.sort(key=lambda p: (bool(p["nodeName"]), p["namespace"], p["name"]))
    return found[:limit]
