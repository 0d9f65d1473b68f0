"""Nodes and pods on a kubelet-less control plane: Node objects carry real status (capacity,
allocatable, a Ready condition) and pods are placed with the `pods/binding` subresource, exactly
as kube-scheduler does, so a bound pod shows spec.nodeName."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tests.harness.kubeapi import ApiError, KubeApi

Obj = dict[str, Any]
_TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_taints(taints: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    # Caught here, with the taint's index, rather than as a 422 about "spec.taints[1].effect".
    checked = []
    for index, taint in enumerate(taints):
        if not taint.get("key"):
            raise ValueError(f"taints[{index}] has no key: {dict(taint)!r}")
        if taint.get("effect") not in _TAINT_EFFECTS:
            raise ValueError(
                f"taints[{index}].effect must be one of {sorted(_TAINT_EFFECTS)}, "
                f"not {taint.get('effect')!r}"
            )
        checked.append(dict(taint))
    return checked


def node_manifest(
    *,
    name: str,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    extra_capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    ready: bool = True,
    unschedulable: bool = False,
) -> Obj:
    """A Node as a kubelet would register it; allocatable defaults to capacity.

    `extra_capacity` adds resources such as ephemeral-storage or nvidia.com/gpu.
    """
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra_capacity or {})}
    heartbeat = _now()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
        },
        "spec": {"taints": _check_taints(taints), "unschedulable": unschedulable},
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, **(allocatable or {})},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "schedweb test node (no kubelet)",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": heartbeat,
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


def node_create(*, api: KubeApi, manifest: Obj) -> Obj:
    """Create a Node with its status in one POST.

    Verified against v1.35: create keeps a Node's status (kubelets register this way), so no
    follow-up write to /status is needed; the cluster tests read the stored status back.
    """
    return api.post("/api/v1/nodes", manifest)


def node_get(*, api: KubeApi, name: str) -> Obj:
    """The Node as stored."""
    return api.get(f"/api/v1/nodes/{name}")


def node_relabel(*, api: KubeApi, name: str, labels: Mapping[str, str | None]) -> Obj:
    """Set labels; a value of None removes that label (JSON merge patch semantics)."""
    return api.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": dict(labels)}})


def node_taint(*, api: KubeApi, name: str, taints: Sequence[Mapping[str, str]]) -> Obj:
    """Replace the node's taints with `taints` (an empty list removes them all)."""
    return api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": _check_taints(taints)}})


def node_cordon(*, api: KubeApi, name: str, cordoned: bool = True) -> Obj:
    """Mark the node unschedulable (or schedulable again), as `kubectl cordon` does."""
    return api.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": cordoned}})


def node_delete(*, api: KubeApi, name: str) -> None:
    """Delete the node (its pods stay: there is no pod garbage collector without controllers)."""
    api.delete(f"/api/v1/nodes/{name}")


def namespace_create(*, api: KubeApi, name: str) -> Obj:
    """Create a namespace (deleting one would hang: no namespace controller runs)."""
    return api.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )


def pod_manifest(
    *,
    name: str,
    namespace: str = "default",
    cpu: str = "100m",
    memory: str = "128Mi",
    scheduler_name: str = "default-scheduler",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> Obj:
    """A one-container pod with requests; it never runs (no kubelet), it is only placed."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": dict(node_selector or {}),
            "tolerations": [dict(t) for t in tolerations],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def pod_create(*, api: KubeApi, manifest: Obj) -> Obj:
    """Create a pod (pending until bound)."""
    namespace = manifest["metadata"].get("namespace", "default")
    return api.post(f"/api/v1/namespaces/{namespace}/pods", manifest)


def pod_get(*, api: KubeApi, name: str, namespace: str = "default") -> Obj:
    """The pod as stored."""
    return api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def pod_bind(*, api: KubeApi, name: str, node: str, namespace: str = "default") -> None:
    """Place the pod on `node` through pods/binding, the call kube-scheduler makes."""
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    api.post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)


def pod_delete(*, api: KubeApi, name: str, namespace: str = "default") -> None:
    """Delete at once: a bound pod would otherwise wait for a kubelet to confirm its end."""
    api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", grace_period_seconds=0)


def pod_wait_bound(
    *, api: KubeApi, name: str, namespace: str = "default", timeout: float = 120.0
) -> str:
    """Wait until a scheduler has bound the pod; return the node name. The limit only ends a
    wait that failed: generous, for a loaded machine and the scheduler's retries (backoff up to
    10 s each)."""
    deadline = time.monotonic() + timeout
    while True:
        pod = pod_get(api=api, name=name, namespace=namespace)
        if pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"]
        if time.monotonic() > deadline:
            # The scheduler explains a pending pod in its PodScheduled condition.
            why = [
                c.get("message", "")
                for c in pod.get("status", {}).get("conditions", [])
                if c.get("type") == "PodScheduled"
            ]
            raise TimeoutError(
                f"pod {namespace}/{name} was not bound within {timeout:.0f} s"
                + (f": {why[0]}" if why and why[0] else " (no scheduler has looked at it)")
            )
        time.sleep(0.1)


__all__ = [
    "ApiError",
    "namespace_create",
    "node_cordon",
    "node_create",
    "node_delete",
    "node_get",
    "node_manifest",
    "node_relabel",
    "node_taint",
    "pod_bind",
    "pod_create",
    "pod_delete",
    "pod_get",
    "pod_manifest",
    "pod_wait_bound",
]
