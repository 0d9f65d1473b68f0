"""Builders of engine view dicts for pure engine tests (no Kubernetes JSON, no conversion)."""

from __future__ import annotations

from typing import Any

from policies.engine.inputs import NodeView, PodView, ResourceMap


def node_view(
    name: str,
    *,
    cpu: int = 4000,
    memory: int = 16 * 2**30,
    requested_cpu: int = 0,
    requested_memory: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    gpus: int = 0,
    pod_count: int = 0,
    unschedulable: bool = False,
    ready: bool = True,
) -> NodeView:
    """A node with `cpu` millicores and `memory` bytes allocatable (capacity the same)."""
    allocatable = ResourceMap(cpu=cpu, memory=memory, pods=110)
    if gpus:
        allocatable["nvidia_com_gpu"] = gpus
    return {
        "uid": f"uid-{name}",
        "name": name,
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        "annotations": {},
        "taints": [
            {"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]}
            for t in taints or []
        ],
        "unschedulable": unschedulable,
        "conditions": {"Ready": "True" if ready else "False"},
        "capacity": ResourceMap(allocatable),
        "allocatable": allocatable,
        "requested": ResourceMap(cpu=requested_cpu, memory=requested_memory),
        "podCount": pod_count,
        "object": {"metadata": {"name": name}},
    }


def pod_view(
    name: str = "web-1",
    *,
    namespace: str = "default",
    cpu: int = 500,
    memory: int = 2**30,
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    scheduler_name: str = "schedweb",
    tolerations: list[dict[str, str]] | None = None,
    node_name: str = "",
    uid: str | None = None,
    **extra: Any,
) -> PodView:
    """A pending pod requesting `cpu` millicores and `memory` bytes."""
    requests = ResourceMap(cpu=cpu, memory=memory)
    if gpus:
        requests["nvidia_com_gpu"] = gpus
    view: PodView = {
        "uid": uid or f"uid-{namespace}-{name}",
        "name": name,
        "namespace": namespace,
        "labels": labels or {},
        "annotations": {},
        "schedulerName": scheduler_name,
        "priority": 0,
        "qosClass": "Burstable",
        "requests": requests,
        "limits": ResourceMap(),
        "nodeSelector": {},
        "tolerations": [
            {
                "key": t.get("key", ""),
                "operator": t.get("operator", "Equal"),
                "value": t.get("value", ""),
                "effect": t.get("effect", ""),
            }
            for t in tolerations or []
        ],
        "ownerKind": "",
        "ownerName": "",
        "nodeName": node_name,
        "phase": "Running" if node_name else "Pending",
        "object": {"metadata": {"name": name, "namespace": namespace}},
    }
    view.update(extra)  # type: ignore[typeddict-item]
    return view


class ListCluster:
    """A ClusterView over plain lists, for helper tests."""

    def __init__(self, nodes: list[NodeView], pods: list[PodView]) -> None:
        self._nodes = {n["name"]: n for n in nodes}
        self._pods = pods

    def pods_matching(self, namespace, selector):
        return [
            p
            for p in self._pods
            if (not namespace or p["namespace"] == namespace)
            and all(p["labels"].get(k) == v for k, v in selector.items())
        ]

    def node(self, name):
        return self._nodes.get(name)

    def node_count(self):
        return len(self._nodes)
