"""/api/v1/cluster*: the configured cluster source as the engine sees it.

    GET /api/v1/cluster           status: source, version, age, stale, status, error, counts, runs
    GET /api/v1/cluster/nodes     ?zone= ?label=key=value (repeatable; `key` alone: has it) ?search=
    GET /api/v1/cluster/pods      ?namespace= ?node= ?phase= ?label=key=value ?search=

Without a snapshot the status says why and the lists answer 503; a stale snapshot is still
served, marked stale, with the watcher's error.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from policies.api.views import ApiView, Pagination, errors
from policies.cluster.filters import ZONE_LABEL, nodes_filtered, pods_filtered
from policies.cluster.loaded import LoadedCluster
from policies.cluster.sources import cluster_default
from policies.cluster.status import cluster_status
from policies.engine.inputs import NodeView, PodView
from policies.gangs import gang_mode_status
from policies.models import SyncRun


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


class GangModeSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(
        choices=["workload", "hold", "unknown"],
        help_text="workload: the cluster serves scheduling.k8s.io/v1alpha1 Workloads and gangs are placed all or nothing by kube-scheduler; hold: a policy's filter holds members until enough exist.",
    )
    reason = serializers.CharField()
    checkedAt = serializers.DateTimeField(allow_null=True)


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
    gangMode = GangModeSerializer(help_text="How gangs (a policy's gang:) are placed.")


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
        return Response({**status, "gangMode": gang_mode_status()})


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
