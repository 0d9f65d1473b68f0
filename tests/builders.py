"""Small builders of Kubernetes JSON objects (as the API server returns them) for tests.

    make_node("n1", cpu="4", memory="16Gi")             # allocatable == capacity
    make_pod("web-1", cpu="250m", memory="64Mi", node_name="n1")

They return plain dicts that go through `policies.cluster.convert` like live data. Defaults are
chosen so that arithmetic in tests stays simple: allocatable equals capacity unless given, a
pod has one container `app`, uids are derived from the name (`uid-<namespace>-<name>`), and
pods target the `schedweb` scheduler. Every call returns fresh dicts.
"""

from __future__ import annotations

from typing import Any


def make_node(
    name: str = "node-1",
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    gpus: int = 0,
    allocatable: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    zone: str | None = None,
) -> dict[str, Any]:
    """A Node with `cpu`/`memory`/`pods` capacity (and `gpus` nvidia.com/gpu);
    `allocatable` overrides single resources of the allocatable map (default: the capacity)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if zone is not None:
        all_labels["topology.kubernetes.io/zone"] = zone
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, **(allocatable or {})},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def make_container(
    name: str = "app",
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """One container; `restart_policy="Always"` makes an init container a sidecar."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    container: dict[str, Any] = {"name": name, "image": "busybox:1.37", "resources": resources}
    if restart_policy:
        container["restartPolicy"] = restart_policy
    return container


def make_pod(
    name: str = "pod-1",
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    gpus: int = 0,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    node_name: str = "",
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    scheduler_name: str = "schedweb",
    tolerations: list[dict[str, Any]] | None = None,
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod. Without `containers`, one container requests `cpu`, `memory`, `gpus` and
    `requests` and limits `limits`. `phase` defaults to Running when bound, else Pending.
    `owner` is (kind, name) of the controller; extra keyword arguments go into spec."""
    if containers is None:
        container_requests = dict(requests or {})
        if cpu is not None:
            container_requests["cpu"] = cpu
        if memory is not None:
            container_requests["memory"] = memory
        if gpus:
            container_requests["nvidia.com/gpu"] = str(gpus)
        containers = [make_container(requests=container_requests, limits=limits)]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid if uid is not None else f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
    }
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "controller": True}
        ]
    pod_spec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": containers, **spec}
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if node_name:
        pod_spec["nodeName"] = node_name
    if tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": pod_spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }
