"""The cluster as the engine sees it: the `/cluster/` page and `/api/v1/cluster*`.

    GET /cluster/                 nodes and pods of the configured source, its status in words
    GET /api/v1/cluster           status: source, version, age, stale, status, error, counts, runs
    GET /api/v1/cluster/nodes     ?zone= ?label=key=value (repeatable; `key` alone: has it) ?search=
    GET /api/v1/cluster/pods      ?namespace= ?node= ?phase= ?label=key=value ?search=

All read the configured source (SCHEDWEB_CLUSTER_SOURCE) through policies.cluster.loaded.cluster_default,
like previews do. Without a snapshot the status says why and the lists answer 503; a stale
snapshot is still shown, marked stale, with the watcher's error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from policies.api.views import ApiView, Pagination, errors
from policies.cluster.loaded import LoadedCluster, cluster_default
from policies.engine.inputs import NodeView, PodView
from policies.errors import ClusterUnavailable, InputError
from policies.models import SyncRun
from policies.ui.access import page_access

ZONE_LABEL = "topology.kubernetes.io/zone"
GPU = "nvidia_com_gpu"
PAGE_ROWS = 200  # rows per table page on /cluster/
RUNS_SHOWN = 10
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_MAX_FILTER = 253  # longest label value / name a filter may carry (DNS subdomain)

# --- reading ------------------------------------------------------------------------------------


def cluster_status(*, runs: int = RUNS_SHOWN) -> tuple[dict[str, Any], LoadedCluster | None]:
    """The configured source's status (the API's shape) and its snapshot, if there is one."""
    source = settings.SCHEDWEB_CLUSTER_SOURCE
    cluster_name = settings.SCHEDWEB_CLUSTER_NAME
    loaded: LoadedCluster | None = None
    problem = ""
    try:
        loaded = cluster_default()
    except (ClusterUnavailable, InputError) as exc:
        problem = str(exc)
    details: dict[str, Any] = dict(loaded.details) if loaded is not None else {}
    if loaded is None and source == "live":
        details = _live_meta()
    now = datetime.now(UTC).timestamp()
    updated = loaded.updated_at if loaded is not None else None
    status: dict[str, Any] = {
        "source": source,
        "cluster": cluster_name if source == "live" else None,
        "label": loaded.describe() if loaded is not None else source,
        "available": loaded is not None,
        "version": loaded.version if loaded is not None else None,
        "ageSeconds": round(now - updated, 1) if updated else None,
        "updatedAt": _iso(updated),
        "stale": loaded.stale if loaded is not None else True,
        "status": loaded.status if loaded is not None else (details.get("status") or "unavailable"),
        "error": (loaded.error if loaded is not None else problem) or "",
        "nodes": loaded.state.node_count() if loaded is not None else None,
        "pods": loaded.state.pod_count() if loaded is not None else None,
        "pendingPods": _pending(loaded) if loaded is not None else None,
        "server": details.get("server") or None,
        "lastEventAt": _iso(_float(details.get("last_event_at"))),
        "lastSyncAt": _iso(_float(details.get("last_sync_at"))),
        "runs": [sync_run_dict(r) for r in SyncRun.objects.filter(cluster=cluster_name)[:runs]]
        if source == "live"
        else [],
    }
    return status, loaded


def _live_meta() -> dict[str, Any]:
    """The watcher's status hash when there is no snapshot (it says why)."""
    from policies.cluster.sources import cluster_source

    with contextlib.suppress(Exception):
        return dict(cluster_source("live").reader.meta)  # type: ignore[attr-defined]
    return {}


def _pending(loaded: LoadedCluster) -> int:
    return sum(1 for p in loaded.state.pods() if not p["nodeName"] and p["phase"] == "Pending")


def sync_run_dict(run: SyncRun) -> dict[str, Any]:
    """A SyncRun for the API and the page."""
    duration = None
    if run.finished_at and run.started_at:
        duration = round((run.finished_at - run.started_at).total_seconds(), 1)
    return {
        "id": run.pk,
        "status": run.status,
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationSeconds": duration,
        "error": run.error,
        "nodes": run.nodes,
        "pods": run.pods,
        "events": run.events,
        "snapshotVersion": run.snapshot_version,
    }


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


def node_dict(node: NodeView) -> dict[str, Any]:
    """A node for the API: the engine's view without the raw object."""
    return {
        "name": node["name"],
        "zone": node["labels"].get(ZONE_LABEL, ""),
        "labels": node["labels"],
        "taints": node["taints"],
        "unschedulable": node["unschedulable"],
        "conditions": node["conditions"],
        "capacity": dict(node["capacity"]),
        "allocatable": dict(node["allocatable"]),
        "requested": dict(node["requested"]),
        "podCount": node["podCount"],
    }


def pod_dict(pod: PodView) -> dict[str, Any]:
    """A pod for the API: the engine's view without the raw object."""
    return {
        "uid": pod["uid"],
        "name": pod["name"],
        "namespace": pod["namespace"],
        "nodeName": pod["nodeName"],
        "phase": pod["phase"],
        "schedulerName": pod["schedulerName"],
        "priority": pod["priority"],
        "qosClass": pod["qosClass"],
        "requests": dict(pod["requests"]),
        "limits": dict(pod["limits"]),
        "labels": pod["labels"],
        "ownerKind": pod["ownerKind"],
        "ownerName": pod["ownerName"],
    }


# --- API ---------------------------------------------------------------------------------------

_Resources = serializers.DictField(child=serializers.IntegerField())
_Strings = serializers.DictField(child=serializers.CharField(allow_blank=True))


class SyncRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SyncRun.Status.choices)
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    durationSeconds = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    nodes = serializers.IntegerField()
    pods = serializers.IntegerField()
    events = serializers.IntegerField()
    snapshotVersion = serializers.IntegerField()


class ClusterStatusSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=["live", "file", "demo"])
    cluster = serializers.CharField(allow_null=True, help_text="SCHEDWEB_CLUSTER_NAME (live only).")
    label = serializers.CharField()
    available = serializers.BooleanField(help_text="False: no snapshot exists; `error` says why.")
    version = serializers.IntegerField(allow_null=True)
    ageSeconds = serializers.FloatField(
        allow_null=True, help_text="Since the source last confirmed the snapshot current."
    )
    updatedAt = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(
        help_text="The snapshot may be behind the cluster (see `error`)."
    )
    status = serializers.CharField(help_text="ok, stale, error, starting or unavailable.")
    error = serializers.CharField(allow_blank=True)
    nodes = serializers.IntegerField(allow_null=True)
    pods = serializers.IntegerField(allow_null=True)
    pendingPods = serializers.IntegerField(allow_null=True)
    server = serializers.CharField(allow_null=True)
    lastEventAt = serializers.DateTimeField(allow_null=True)
    lastSyncAt = serializers.DateTimeField(allow_null=True)
    runs = SyncRunSerializer(many=True)


class TaintSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField(allow_blank=True)
    effect = serializers.CharField(allow_blank=True)


class ClusterNodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    zone = serializers.CharField(allow_blank=True)
    labels = _Strings
    taints = TaintSerializer(many=True)
    unschedulable = serializers.BooleanField()
    conditions = _Strings
    capacity = _Resources
    allocatable = _Resources
    requested = _Resources
    podCount = serializers.IntegerField()


class ClusterPodSerializer(serializers.Serializer):
    uid = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    namespace = serializers.CharField()
    nodeName = serializers.CharField(allow_blank=True)
    phase = serializers.CharField()
    schedulerName = serializers.CharField()
    priority = serializers.IntegerField()
    qosClass = serializers.CharField()
    requests = _Resources
    limits = _Resources
    labels = _Strings
    ownerKind = serializers.CharField(allow_blank=True)
    ownerName = serializers.CharField(allow_blank=True)


class SnapshotRefSerializer(serializers.Serializer):
    source = serializers.CharField()
    version = serializers.IntegerField()
    stale = serializers.BooleanField()
    status = serializers.CharField()
    error = serializers.CharField(allow_blank=True)


def _page_of(item_serializer: type[serializers.Serializer], name: str) -> serializers.Serializer:
    return inline_serializer(
        name=name,
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.CharField(allow_null=True),
            "previous": serializers.CharField(allow_null=True),
            "snapshot": SnapshotRefSerializer(),
            "results": item_serializer(many=True),
        },
    )


_LIMITS = [OpenApiParameter("limit", int), OpenApiParameter("offset", int)]
_LABEL = OpenApiParameter(
    "label",
    str,
    many=True,
    description="key=value (the label equals value) or key (it exists); repeatable.",
)
_SEARCH = OpenApiParameter("search", str, description="Substring of the name (case-insensitive).")


def _paged(
    view: ApiView, request: Request, loaded: LoadedCluster, items: list, to_dict
) -> Response:
    paginator = Pagination()
    page = paginator.paginate_queryset(items, request, view=view)
    return Response(
        {
            "count": paginator.count,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
            "snapshot": {
                "source": loaded.source,
                "version": loaded.version,
                "stale": loaded.stale,
                "status": loaded.status,
                "error": loaded.error,
            },
            "results": [to_dict(item) for item in page],
        }
    )


class ClusterStatusView(ApiView):
    @extend_schema(
        operation_id="cluster_status",
        description="The configured cluster source: snapshot version, age, staleness and the watcher's status in words, with the last sync runs.",
        responses={200: ClusterStatusSerializer, **errors()},
    )
    def get(self, request: Request) -> Response:
        status, _ = cluster_status()
        return Response(status)


class ClusterNodesView(ApiView):
    @extend_schema(
        operation_id="cluster_nodes",
        description="Nodes as the engine sees them (requested = sum over non-terminated pods bound to the node).",
        parameters=[
            OpenApiParameter("zone", str, description=f"Label {ZONE_LABEL} equals this."),
            _LABEL,
            _SEARCH,
            *_LIMITS,
        ],
        responses={
            200: _page_of(ClusterNodeSerializer, "PaginatedClusterNodeList"),
            **errors(400, 503),
        },
    )
    def get(self, request: Request) -> Response:
        loaded = cluster_default()
        nodes = nodes_filtered(loaded=loaded, params=request.query_params)
        return _paged(self, request, loaded, nodes, node_dict)


class ClusterPodsView(ApiView):
    @extend_schema(
        operation_id="cluster_pods",
        description="Pods as the engine sees them (effective requests as kube-scheduler computes them).",
        parameters=[
            OpenApiParameter("namespace", str),
            OpenApiParameter("node", str, description="Bound to this node."),
            OpenApiParameter(
                "phase", str, description="Pending, Running, Succeeded, Failed or Unknown."
            ),
            _LABEL,
            _SEARCH,
            *_LIMITS,
        ],
        responses={
            200: _page_of(ClusterPodSerializer, "PaginatedClusterPodList"),
            **errors(400, 503),
        },
    )
    def get(self, request: Request) -> Response:
        loaded = cluster_default()
        pods = pods_filtered(loaded=loaded, params=request.query_params)
        return _paged(self, request, loaded, pods, pod_dict)


# --- page --------------------------------------------------------------------------------------


@page_access(roles={"GET": "viewer"})
def cluster_page(request: HttpRequest) -> HttpResponse:
    """Nodes and pods of the configured source as the engine sees them, and its status."""
    status, loaded = cluster_status()
    context: dict[str, Any] = {"status": status, "filters": request.GET, "phases": PHASES}
    if loaded is not None:
        try:
            nodes = nodes_filtered(loaded=loaded, params=request.GET)
            pods = pods_filtered(loaded=loaded, params=request.GET)
        except InputError as exc:
            context["filter_error"] = str(exc)
            nodes, pods = loaded.state.nodes(), loaded.state.pods()
        context["nodes"] = _table_page(request, "nodes_page", nodes, node_row)
        context["pods"] = _table_page(request, "pods_page", pods, pod_row)
        context["zones"] = sorted(
            {n["labels"].get(ZONE_LABEL, "") for n in loaded.state.nodes()} - {""}
        )
        context["totals"] = _totals(loaded.state.nodes())
    return render(request, "cluster/page.html", context)


def _table_page(request: HttpRequest, param: str, items: list, to_row) -> dict[str, Any]:
    """One page of rows (PAGE_ROWS) with links that keep the other query parameters."""
    total = len(items)
    pages = max(1, -(-total // PAGE_ROWS))
    try:
        number = min(max(1, int(request.GET.get(param, "1"))), pages)
    except ValueError:
        number = 1
    start = (number - 1) * PAGE_ROWS

    def link(n: int) -> str:
        query = request.GET.copy()
        query[param] = str(n)
        return "?" + query.urlencode()

    return {
        "rows": [to_row(item) for item in items[start : start + PAGE_ROWS]],
        "total": total,
        "number": number,
        "pages": pages,
        "first": start + 1 if total else 0,
        "last": min(start + PAGE_ROWS, total),
        "previous": link(number - 1) if number > 1 else "",
        "next": link(number + 1) if number < pages else "",
    }


def node_row(node: NodeView) -> dict[str, Any]:
    """A node for the page: formatted quantities and utilisation percentages."""
    alloc, used = node["allocatable"], node["requested"]
    conditions = node["conditions"]
    ready = conditions.get("Ready", "Unknown")
    # Pressure conditions are bad when True; the page lists only the bad ones.
    problems = [t for t, s in conditions.items() if t != "Ready" and s == "True"]
    return {
        "name": node["name"],
        "zone": node["labels"].get(ZONE_LABEL, ""),
        "labels": sorted(node["labels"].items()),
        "taints": node["taints"],
        "unschedulable": node["unschedulable"],
        "ready": ready,
        "problems": problems,
        "cpu": _usage(used["cpu"], alloc["cpu"], _cpu),
        "memory": _usage(used["memory"], alloc["memory"], _bytes),
        "gpu": _usage(used[GPU], alloc[GPU], str) if alloc[GPU] or used[GPU] else None,
        "pods": node["podCount"],
        "pods_max": alloc["pods"],
    }


def pod_row(pod: PodView) -> dict[str, Any]:
    """A pod for the page."""
    requests = pod["requests"]
    return {
        "namespace": pod["namespace"],
        "name": pod["name"],
        "node": pod["nodeName"],
        "phase": pod["phase"],
        "cpu": requests["cpu"],
        "cpu_text": _cpu(requests["cpu"]),
        "memory": requests["memory"],
        "memory_text": _bytes(requests["memory"]),
        "gpu": requests[GPU],
        "qos": pod["qosClass"],
        "scheduler": pod["schedulerName"],
        "owner": f"{pod['ownerKind']}/{pod['ownerName']}" if pod["ownerKind"] else "",
    }


def _totals(nodes: list[NodeView]) -> dict[str, Any]:
    cpu_used = sum(n["requested"]["cpu"] for n in nodes)
    cpu_alloc = sum(n["allocatable"]["cpu"] for n in nodes)
    mem_used = sum(n["requested"]["memory"] for n in nodes)
    mem_alloc = sum(n["allocatable"]["memory"] for n in nodes)
    return {
        "cpu": _usage(cpu_used, cpu_alloc, _cpu),
        "memory": _usage(mem_used, mem_alloc, _bytes),
        "ready": sum(1 for n in nodes if n["conditions"].get("Ready") == "True"),
        "cordoned": sum(1 for n in nodes if n["unschedulable"]),
    }


def _usage(used: int, allocatable: int, fmt) -> dict[str, Any]:
    # pct = used * 100 / allocatable, capped at 100 for the bar (overcommit shows as 100)
    pct = round(used * 100 / allocatable) if allocatable > 0 else 0
    return {
        "used": used,
        "alloc": allocatable,
        "text": f"{fmt(used)} / {fmt(allocatable)}",
        "pct": pct,
        "bar": min(pct, 100),
    }


def _cpu(millis: int) -> str:
    """Millicores for people: 250 -> "250m", 4000 -> "4", 3500 -> "3.5"."""
    if millis < 1000:
        return f"{millis}m"
    return f"{millis / 1000:.2f}".rstrip("0").rstrip(".")


def _bytes(n: int) -> str:
    """Bytes for people, binary units: 134217728 -> "128 MiB"."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return (
                f"{value:.0f} {unit}"
                if unit in ("B", "KiB") or value >= 100
                else f"{value:.1f} {unit}".replace(".0 ", " ")
            )
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _iso(timestamp: float | None) -> str | None:
    return datetime.fromtimestamp(timestamp, UTC).isoformat() if timestamp else None
