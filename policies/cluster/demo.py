"""The bundled demo cluster (the default source without a kubeconfig) and a large-cluster
generator for benchmarks.

Both are deterministic: names, uids and placements derive from fixed tables, hashes and a
seeded `random.Random`; timestamps are fixed strings. The objects look like API-server output
(`kubectl get -o json`), so they go through the same conversion as live data.

Demo cluster: 36 nodes in zone-a/b/c (one control-plane node, small to xlarge workers, GPU
nodes, two spot nodes, one cordoned, one NotReady, one under maintenance), ~165 pods in
default, web, batch, ml and kube-system, and a few pods pending for `schedweb`, among them an
incomplete gang (3 members of a pod group whose minAvailable is 4). Node names have varied
lengths and `cp-1` is the unique shortest, which the seed-003 and seed-000 examples score on.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from policies.cluster.convert import pod_view
from policies.cluster.state import ClusterState, gc_paused
from policies.engine.quantity import to_millis, to_units

CREATED = "2025-06-02T08:00:00Z"  # fixed: no wall-clock dependence
STARTED = "2025-06-02T08:05:00Z"
SCHEDWEB = "schedweb"
ZONE_LABEL = "topology.kubernetes.io/zone"
GPU = "nvidia.com/gpu"
SPOT_TAINT = "cloud.example.com/spot"
MAINTENANCE_LABEL = "example.com/maintenance"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String's alphabet
_UID_NAMESPACE = uuid.UUID("6f1c3a52-3f3e-4d8e-9a57-5c0d9e1b7a10")


# ---------------------------------------------------------------------------------------------
# node shapes and Node JSON


@dataclass(frozen=True)
class Shape:
    """A machine type: vCPUs, memory in GiB, GPUs."""

    instance_type: str
    cpus: int
    memory_gi: int
    gpus: int = 0


SHAPES = {
    "small": Shape("m6i.xlarge", 4, 16),
    "medium": Shape("m6i.2xlarge", 8, 32),
    "large": Shape("m6i.4xlarge", 16, 64),
    "xlarge": Shape("m6i.8xlarge", 32, 128),
    "highmem": Shape("r6i.4xlarge", 16, 128),
    "gpu4": Shape("g5.12xlarge", 48, 192, 4),
    "gpu8": Shape("g5.48xlarge", 192, 768, 8),
}
_KI_PER_GI = 1024 * 1024
_DISK_KI = 101_430_960  # a 100 GB root disk as kubelet reports it


def reserved_cpu_millis(cpus: int) -> int:
    """Kubelet system reservation (the GKE formula): 6% of the first core, 1% of the second,
    0.5% of cores 3-4, 0.25% above 4. 4 cores -> 60+10+10 = 80m; 8 -> 80+4*2.5 = 90m."""
    millis = 60 + (10 if cpus > 1 else 0) + 5 * min(max(cpus - 2, 0), 2)
    return millis + (max(cpus - 4, 0) * 5) // 2


def reserved_memory_ki(memory_gi: int) -> int:
    """25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2%
    above 128, plus a 100 MiB eviction threshold. 16 GiB -> (1024+819.2+819.2) MiB + 100 MiB."""
    tiers = [(4, 25), (4, 20), (8, 10), (112, 6), (10**6, 2)]
    left, hundredths_ki = memory_gi, 0
    for size, percent in tiers:
        used = min(left, size)
        hundredths_ki += used * _KI_PER_GI * percent
        left -= used
    return hundredths_ki // 100 + 100 * 1024


def make_node_object(
    *,
    name: str,
    zone: str,
    shape: Shape,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    region: str = "region-1",
) -> dict[str, Any]:
    """A Node as the API server returns it, allocatable below capacity by the kubelet
    reservations."""
    capacity = {
        "cpu": str(shape.cpus),
        "ephemeral-storage": f"{_DISK_KI}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{shape.memory_gi * _KI_PER_GI}Ki",
        "pods": "110",
    }
    allocatable = dict(capacity)
    allocatable["cpu"] = f"{shape.cpus * 1000 - reserved_cpu_millis(shape.cpus)}m"
    allocatable["memory"] = (
        f"{shape.memory_gi * _KI_PER_GI - reserved_memory_ki(shape.memory_gi)}Ki"
    )
    allocatable["ephemeral-storage"] = str(_DISK_KI * 1024 * 9 // 10)  # 90%, in bytes as kubelet
    if shape.gpus:
        capacity[GPU] = allocatable[GPU] = str(shape.gpus)
    all_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": shape.instance_type,
        "topology.kubernetes.io/region": region,
        ZONE_LABEL: zone,
        **(labels or {}),
    }
    if not ready:
        ready_condition = {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "container runtime network not ready: NetworkReady=false",
        }
    else:
        ready_condition = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
        }
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHasSufficient{short}"}
        for kind, short in (
            ("MemoryPressure", "Memory"),
            ("DiskPressure", "Disk"),
            ("PIDPressure", "PID"),
        )
    ] + [ready_condition]
    for condition in conditions:
        condition["lastHeartbeatTime"] = CREATED
        condition["lastTransitionTime"] = CREATED
    spec: dict[str, Any] = {"providerID": f"example://{zone}/{name}"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", "", name),
            "resourceVersion": "1000",
            "creationTimestamp": CREATED,
            "labels": all_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": _ip(name)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://2.1.1",
                "kernelVersion": "6.1.0-37-cloud-amd64",
                "kubeletVersion": "v1.35.0",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
            },
        },
    }


def _taint(key: str, effect: str, value: str = "") -> dict[str, str]:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _uid(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def _ip(text: str, prefix: str = "10.0") -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return f"{prefix}.{digest[0]}.{digest[1] % 250 + 2}"


def _suffix(text: str, length: int = 5) -> str:
    """A deterministic stand-in for the random suffixes of generated pod names."""
    digest = hashlib.sha256(text.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


# ---------------------------------------------------------------------------------------------
# Pod JSON

_DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
_TOLERATE_ALL = [{"operator": "Exists"}]


def make_pod_object(
    *,
    name: str,
    namespace: str,
    containers: list[dict[str, Any]],
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    node_name: str = "",
    scheduler_name: str = "default-scheduler",
    phase: str | None = None,
    priority: int = 0,
    priority_class: str = "",
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod as the API server returns it; qosClass is filled in as the API server does."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": _uid("pod", namespace, name),
        "resourceVersion": "2000",
        "creationTimestamp": CREATED,
        "labels": dict(labels or {}),
    }
    if owner is not None:
        kind, owner_name = owner
        api = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1"}
        metadata["ownerReferences"] = [
            {
                "apiVersion": api.get(kind, "batch/v1" if kind == "Job" else "v1"),
                "kind": kind,
                "name": owner_name,
                "uid": _uid(kind.lower(), namespace, owner_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {
        "containers": containers,
        "restartPolicy": "Never" if owner and owner[0] == "Job" else "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": scheduler_name,
        "priority": priority,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": tolerations if tolerations is not None else list(_DEFAULT_TOLERATIONS),
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if node_name:
        status.update(hostIP=_ip(node_name), podIP=_ip(f"{namespace}/{name}", "10.244"))
        status["startTime"] = STARTED
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
    status["qosClass"] = pod_view(pod)["qosClass"]
    return pod


def container(
    name: str,
    image: str,
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One container; requests default to limits as the API server defaults them."""
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = dict(limits)
        requests = {**limits, **(requests or {})}
    if requests:
        resources["requests"] = dict(requests)
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


# ---------------------------------------------------------------------------------------------
# the demo cluster

# (name, zone, shape, kind of node)
_DEMO_NODES: list[tuple[str, str, str, str]] = [
    ("cp-1", "zone-a", "medium", "control-plane"),
    ("a-small-1", "zone-a", "small", ""),
    ("a-small-2", "zone-a", "small", ""),
    ("a-small-3", "zone-a", "small", ""),
    ("worker-medium-a-1", "zone-a", "medium", ""),
    ("worker-medium-a-2", "zone-a", "medium", ""),
    ("worker-medium-a-3", "zone-a", "medium", ""),
    ("a-large-1", "zone-a", "large", ""),
    ("a-large-2", "zone-a", "large", "maintenance"),
    ("a-xlarge-1", "zone-a", "xlarge", ""),
    ("a-gpu-1", "zone-a", "gpu8", "gpu"),
    ("a-spot-1", "zone-a", "medium", "spot"),
    ("b-small-1", "zone-b", "small", ""),
    ("b-small-2", "zone-b", "small", ""),
    ("b-small-3", "zone-b", "small", ""),
    ("worker-medium-b-1", "zone-b", "medium", ""),
    ("worker-medium-b-2", "zone-b", "medium", ""),
    ("worker-medium-b-3", "zone-b", "medium", "cordoned"),
    ("b-large-1", "zone-b", "large", ""),
    ("b-large-2", "zone-b", "large", ""),
    ("b-xlarge-1", "zone-b", "xlarge", ""),
    ("b-gpu-1", "zone-b", "gpu4", "gpu"),
    ("b-gpu-2", "zone-b", "gpu8", "gpu"),
    ("b-spot-1", "zone-b", "large", "spot"),
    ("c-small-1", "zone-c", "small", ""),
    ("c-small-2", "zone-c", "small", ""),
    ("c-small-3", "zone-c", "small", "not-ready"),
    ("worker-medium-c-1", "zone-c", "medium", ""),
    ("worker-medium-c-2", "zone-c", "medium", ""),
    ("worker-medium-c-3", "zone-c", "medium", ""),
    ("c-large-1", "zone-c", "large", ""),
    ("c-large-2", "zone-c", "large", ""),
    ("c-xlarge-1", "zone-c", "xlarge", ""),
    ("c-xlarge-2", "zone-c", "xlarge", ""),
    ("c-gpu-1", "zone-c", "gpu4", "gpu"),
    ("c-mem-1", "zone-c", "highmem", ""),
]


def _demo_node(name: str, zone: str, shape: str, role: str) -> dict[str, Any]:
    labels: dict[str, str] = {"node-pool": "general"}
    taints: list[dict[str, str]] = []
    if role == "control-plane":
        labels = {CONTROL_PLANE: "", "node.kubernetes.io/exclude-from-external-load-balancers": ""}
        taints.append(_taint(CONTROL_PLANE, "NoSchedule"))
    elif role == "gpu":
        labels = {
            "node-pool": "gpu",
            "gpu": "true",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-A10G",
        }
        taints.append(_taint(GPU, "NoSchedule", "present"))
    elif role == "spot":
        labels = {"node-pool": "spot", SPOT_TAINT: "true"}
        taints.append(_taint(SPOT_TAINT, "NoSchedule", "true"))
    elif role == "maintenance":
        labels[MAINTENANCE_LABEL] = "scheduled"
    elif role == "cordoned":
        taints.append(_taint("node.kubernetes.io/unschedulable", "NoSchedule"))
    elif role == "not-ready":
        taints.append(_taint("node.kubernetes.io/not-ready", "NoSchedule"))
        taints.append(_taint("node.kubernetes.io/not-ready", "NoExecute"))
    return make_node_object(
        name=name,
        zone=zone,
        shape=SHAPES[shape],
        labels=labels,
        taints=taints,
        unschedulable=role == "cordoned",
        ready=role != "not-ready",
    )


@dataclass
class _Workload:
    """Replicas of one controller, placed round-robin over `nodes` where they fit."""

    namespace: str
    kind: str  # ReplicaSet (of a Deployment), StatefulSet, DaemonSet, Job, Node (static), ""
    name: str
    replicas: int
    containers: list[dict[str, Any]]
    nodes: list[str] = field(default_factory=list)  # [] = pending for schedweb
    labels: dict[str, str] = field(default_factory=dict)
    phases: dict[int, str] = field(default_factory=dict)  # replica index -> Succeeded/Failed
    tolerations: list[dict[str, Any]] | None = None
    priority: int = 0
    priority_class: str = ""
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None


def _small(cpu: str, memory: str, *, cpu_limit: str = "", memory_limit: str = "") -> dict:
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v}
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": limits}


def _demo_workloads(all_nodes: list[str]) -> list[_Workload]:
    gpu_nodes = [n for n, _, _, role in _DEMO_NODES if role == "gpu"]
    gpu_tol = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}, *_DEFAULT_TOLERATIONS]
    cp_tol = [{"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"}]
    img = "registry.example.com"

    def c(name: str, image: str, **resources: Any) -> list[dict[str, Any]]:
        return [container(name, image, **resources)]

    return [
        # kube-system: daemons on every node, static control-plane pods, cluster add-ons
        _Workload("kube-system", "DaemonSet", "kube-proxy", len(all_nodes),
                  c("kube-proxy", "registry.k8s.io/kube-proxy:v1.35.0", requests={"cpu": "100m"}),
                  all_nodes, {"k8s-app": "kube-proxy"}, tolerations=_TOLERATE_ALL,
                  priority=2000001000, priority_class="system-node-critical"),
        _Workload("kube-system", "DaemonSet", "fluent-bit", len(all_nodes),
                  c("fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:4.0",
                    requests={"cpu": "50m", "memory": "64Mi"}, limits={"memory": "128Mi"}),
                  all_nodes, {"app": "fluent-bit", "tier": "logging"}, tolerations=_TOLERATE_ALL,
                  priority=2000000000, priority_class="system-cluster-critical"),
        _Workload("kube-system", "DaemonSet", "nvidia-device-plugin", len(gpu_nodes),
                  c("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
                  gpu_nodes,
                  {"app": "nvidia-device-plugin"}, tolerations=_TOLERATE_ALL,
                  priority=2000001000, priority_class="system-node-critical"),
        *[
            _Workload("kube-system", "Node", f"{component}-cp-1", 1,
                      c(component, f"registry.k8s.io/{component}:v1.35.0", requests={"cpu": cpu}),
                      ["cp-1"], {"component": component, "tier": "control-plane"},
                      tolerations=[{"operator": "Exists", "effect": "NoExecute"}],
                      priority=2000001000, priority_class="system-node-critical")
            for component, cpu in (("etcd", "100m"), ("kube-apiserver", "250m"),
                                   ("kube-controller-manager", "200m"),
                                   ("kube-scheduler", "100m"))
        ],
        _Workload("kube-system", "ReplicaSet", "coredns-7db6d8ff4d", 2,
                  c("coredns", "registry.k8s.io/coredns/coredns:v1.12.0",
                    **_small("100m", "70Mi", memory_limit="170Mi")),
                  ["cp-1", "worker-medium-a-1"], {"k8s-app": "kube-dns"},
                  tolerations=cp_tol + _DEFAULT_TOLERATIONS,
                  priority=2000000000, priority_class="system-cluster-critical"),
        _Workload("kube-system", "ReplicaSet", "metrics-server-5f9f776df5", 1,
                  c("metrics-server", "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
                    **_small("100m", "200Mi")),
                  ["worker-medium-b-1"], {"k8s-app": "metrics-server"},
                  priority=2000000000, priority_class="system-cluster-critical"),
        # default
        _Workload("default", "StatefulSet", "redis", 3,
                  c("redis", "redis:7.4", limits={"cpu": "500m", "memory": "1Gi"}),
                  ["worker-medium-a-2", "worker-medium-b-1", "worker-medium-c-1"],
                  {"app": "redis", "tier": "cache"}),
        _Workload("default", "ReplicaSet", "hello-6b8d9c7f5", 2,
                  c("hello", "nginxdemos/hello:0.4"), ["a-large-1", "b-large-1"],
                  {"app": "hello", "tier": "web"}),
        _Workload("default", "", "toolbox", 1, c("toolbox", "busybox:1.37"), ["a-small-3"],
                  {"run": "toolbox"}),
        # web: the busy namespace
        _Workload("web", "ReplicaSet", "frontend-6d5f8b7c9d", 16,
                  c("frontend", f"{img}/web/frontend:2.14.1",
                    **_small("250m", "256Mi", cpu_limit="500m", memory_limit="512Mi")),
                  ["worker-medium-a-1", "worker-medium-b-2", "worker-medium-c-2", "a-large-1",
                   "b-large-1", "c-large-1", "a-small-1", "b-small-2"],
                  {"app": "frontend", "tier": "web"}),
        _Workload("web", "ReplicaSet", "api-84c9f6d7b8", 12,
                  c("api", f"{img}/web/api:5.2.0",
                    **_small("500m", "1Gi", cpu_limit="1", memory_limit="2Gi")),
                  ["worker-medium-a-3", "worker-medium-b-2", "worker-medium-c-3", "a-xlarge-1",
                   "b-xlarge-1"],
                  {"app": "api", "tier": "backend"}),
        _Workload("web", "ReplicaSet", "worker-5c7d8b9f6", 8,
                  c("worker", f"{img}/web/worker:5.2.0", requests={"cpu": "1", "memory": "2Gi"}),
                  ["a-xlarge-1", "b-xlarge-1", "a-large-2"],
                  {"app": "worker", "tier": "backend"}),
        _Workload("web", "StatefulSet", "postgres", 3,
                  c("postgres", "postgres:17.5", limits={"cpu": "2", "memory": "8Gi"}),
                  ["a-large-1", "b-large-2", "c-large-1"], {"app": "postgres", "tier": "db"}),
        _Workload("web", "ReplicaSet", "cache-7f8c9d6b5", 4,
                  c("memcached", "memcached:1.6", limits={"cpu": "250m", "memory": "2Gi"}),
                  ["worker-medium-a-2", "worker-medium-b-1", "worker-medium-c-1"],
                  {"app": "cache", "tier": "cache"}),
        # batch: jobs filling the small nodes; some finished
        _Workload("batch", "Job", "etl-29150400", 10,
                  c("etl", f"{img}/batch/etl:1.9",
                    **_small("1750m", "5Gi", cpu_limit="3", memory_limit="8Gi")),
                  ["a-small-1", "a-small-2", "b-small-1", "b-small-3", "c-small-1", "c-small-2",
                   "a-small-2", "b-small-1", "c-small-1", "b-small-3"],
                  {"app": "etl", "tier": "batch", "job-name": "etl-29150400"}),
        _Workload("batch", "Job", "nightly-report-29150280", 6,
                  c("report", f"{img}/batch/report:3.0", requests={"cpu": "1", "memory": "2Gi"}),
                  ["a-small-3", "b-small-2", "c-small-2", "worker-medium-a-3",
                   "worker-medium-b-2", "worker-medium-c-3"],
                  {"app": "nightly-report", "tier": "batch",
                   "job-name": "nightly-report-29150280"},
                  phases={0: "Succeeded", 3: "Succeeded"}),
        _Workload("batch", "Job", "cleanup-29150460", 3,
                  c("cleanup", "busybox:1.37", **_small("100m", "128Mi")),
                  ["a-small-3", "b-small-2", "c-small-2"],
                  {"app": "cleanup", "tier": "batch", "job-name": "cleanup-29150460"},
                  phases={0: "Succeeded", 1: "Succeeded", 2: "Failed"}),
        # ml: GPU work
        _Workload("ml", "Job", "train-resnet", 2,
                  c("trainer", f"{img}/ml/resnet-train:0.8",
                    limits={"cpu": "16", "memory": "64Gi", GPU: "4"}),
                  ["a-gpu-1"], {"app": "train-resnet", "tier": "training"},
                  tolerations=gpu_tol),
        _Workload("ml", "ReplicaSet", "inference-65d4f7c8b9", 3,
                  c("server", f"{img}/ml/inference:1.3", requests={"cpu": "4", "memory": "16Gi"},
                    limits={"cpu": "8", "memory": "24Gi", GPU: "1"}),
                  ["b-gpu-1", "b-gpu-2"], {"app": "inference", "tier": "serving"},
                  tolerations=gpu_tol),
        _Workload("ml", "StatefulSet", "jupyter", 2,
                  c("notebook", "quay.io/jupyter/scipy-notebook:2025-05-19",
                    **_small("500m", "8Gi", memory_limit="16Gi")),
                  ["c-mem-1"], {"app": "jupyter", "tier": "notebook"}),
        # pending for schedweb
        _Workload("web", "ReplicaSet", "checkout-5b6c7d8f9", 2,
                  c("checkout", f"{img}/web/checkout:1.0.3",
                    **_small("250m", "512Mi", memory_limit="1Gi")),
                  [], {"app": "checkout", "tier": "web"}),
        _Workload("default", "", "abc", 1, c("app", "nginx:1.27", **_small("100m", "64Mi")),
                  [], {"app": "abc"}),
        _Workload("default", "", "abcdefg", 1, c("app", "nginx:1.27", **_small("100m", "64Mi")),
                  [], {"app": "abcdefg"}),
        _Workload("ml", "", "train-llama", 3,
                  c("trainer", f"{img}/ml/llama-train:0.3",
                    limits={"cpu": "8", "memory": "32Gi", GPU: "2"}),
                  [], {"app": "train-llama", "tier": "training", "podGroup": "train-llama",
                       "minAvailable": "4"},
                  tolerations=gpu_tol),
        # a namespaceSelector: near the storefront team's api pods (namespace web), wherever
        # they run; kube-scheduler resolves the selector against the Namespaces' labels
        _Workload("batch", "", "report-sync", 1,
                  c("sync", f"{img}/batch/report-sync:0.4", **_small("200m", "256Mi")),
                  [], {"app": "report-sync", "tier": "batch"},
                  affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                      {"weight": 50, "podAffinityTerm": {
                          "labelSelector": {"matchLabels": {"app": "api"}},
                          "namespaceSelector": {"matchLabels": {"team": "storefront"}},
                          "topologyKey": ZONE_LABEL}}]}}),
    ]  # fmt: skip


# Namespace labels (kubernetes.io/metadata.name is added to each, as the API server does).
_DEMO_NAMESPACES = {
    "kube-system": {},
    "default": {"env": "dev"},
    "web": {"team": "storefront", "env": "production"},
    "batch": {"team": "data", "env": "production"},
    "ml": {"team": "data", "env": "research"},
}
# Services (namespace, name, spec.selector): the pods they select get kube-scheduler's default
# spreading even without a controller (the pending `abc` pod).
_DEMO_SERVICES = [
    ("kube-system", "kube-dns", {"k8s-app": "kube-dns"}),
    ("kube-system", "metrics-server", {"k8s-app": "metrics-server"}),
    ("default", "redis", {"app": "redis"}),
    ("default", "hello", {"app": "hello"}),
    ("default", "abc", {"app": "abc"}),
    ("web", "frontend", {"app": "frontend"}),
    ("web", "api", {"app": "api"}),
    ("web", "checkout", {"app": "checkout"}),
    ("web", "postgres", {"app": "postgres"}),
    ("ml", "inference", {"app": "inference"}),
    ("ml", "headless-db", None),  # no selector: selects nothing
]


def demo_cluster_objects() -> list[dict[str, Any]]:
    """The demo's Namespaces, Services, ReplicaSets and StatefulSets as raw API JSON (what
    kube-scheduler reads besides nodes and pods); fresh dicts on every call."""
    out: list[dict[str, Any]] = []
    for name, labels in _DEMO_NAMESPACES.items():
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": name,
                    "uid": _uid("namespace", "", name),
                    "resourceVersion": "10",
                    "labels": {"kubernetes.io/metadata.name": name, **labels},
                },
            }
        )
    for namespace, name, selector in _DEMO_SERVICES:
        spec: dict[str, Any] = {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}
        if selector is not None:
            spec["selector"] = dict(selector)
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": _uid("service", namespace, name),
                    "resourceVersion": "20",
                },
                "spec": spec,
            }
        )
    for work in _demo_workloads([row[0] for row in _DEMO_NODES]):
        if work.kind not in ("ReplicaSet", "StatefulSet"):
            continue
        match = dict(work.labels)
        if work.kind == "ReplicaSet":
            match["pod-template-hash"] = work.name.rsplit("-", 1)[1]
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": work.kind,
                "metadata": {
                    "name": work.name,
                    "namespace": work.namespace,
                    "uid": _uid(work.kind.lower(), work.namespace, work.name),
                    "resourceVersion": "30",
                },
                "spec": {"replicas": work.replicas, "selector": {"matchLabels": match}},
            }
        )
    return out


def demo_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, pods) of the demo cluster as raw API JSON; fresh dicts on every call."""
    nodes = [_demo_node(*row) for row in _DEMO_NODES]
    names = [row[0] for row in _DEMO_NODES]
    free = {node["metadata"]["name"]: _allocatable(node) for node in nodes}
    pods = []
    for work in _demo_workloads(names):
        for i in range(work.replicas):
            pods.append(_place(work, i, free))
    return nodes, pods


def demo_state() -> ClusterState:
    """The demo cluster as a ClusterState, with its Namespaces, Services and controllers."""
    nodes, pods = demo_objects()
    return ClusterState.from_objects(nodes, pods, demo_cluster_objects())


def _allocatable(node: dict[str, Any]) -> dict[str, int]:
    alloc = node["status"]["allocatable"]
    return {
        "cpu": to_millis(alloc["cpu"]),
        "memory": to_units(alloc["memory"]),
        GPU: to_units(alloc.get(GPU, "0")),
        "pods": to_units(alloc["pods"]),
    }


def _pod_name(work: _Workload, i: int) -> str:
    if work.kind in ("StatefulSet",) or (work.kind == "" and work.replicas > 1):
        return f"{work.name}-{i}"
    if work.kind in ("", "Node"):
        return work.name
    return f"{work.name}-{_suffix(f'{work.namespace}/{work.name}/{i}')}"


def _place(work: _Workload, i: int, free: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Replica i of a workload, bound to the first node from nodes[i % n] on that still has room
    (terminated replicas take none); pending for schedweb when the workload lists no nodes."""
    name = _pod_name(work, i)
    owner = (work.kind, work.name) if work.kind else None
    if work.kind == "Node":
        owner = ("Node", work.nodes[0])
    labels = dict(work.labels)
    if work.kind == "ReplicaSet":
        labels["pod-template-hash"] = work.name.rsplit("-", 1)[1]
    elif work.kind == "StatefulSet":
        labels["statefulset.kubernetes.io/pod-name"] = name
    phase = work.phases.get(i)
    node_name = ""
    if work.nodes:
        need = _needs(work.containers)
        order = [work.nodes[(i + k) % len(work.nodes)] for k in range(len(work.nodes))]
        for candidate in order:
            room = free[candidate]
            if phase or all(room[r] >= n for r, n in need.items()):
                node_name = candidate
                break
        if not node_name:
            raise AssertionError(f"demo pod {work.namespace}/{name} fits none of {work.nodes}")
        if not phase:
            for r, n in need.items():
                free[node_name][r] -= n
    return make_pod_object(
        name=name,
        namespace=work.namespace,
        containers=[dict(c) for c in work.containers],
        labels=labels,
        owner=owner,
        node_name=node_name,
        scheduler_name="default-scheduler" if work.nodes else SCHEDWEB,
        phase=phase,
        priority=work.priority,
        priority_class=work.priority_class,
        tolerations=work.tolerations,
        node_selector=work.node_selector,
        affinity=work.affinity,
    )


def _needs(containers: Iterable[dict[str, Any]]) -> dict[str, int]:
    need = {"cpu": 0, "memory": 0, GPU: 0, "pods": 1}
    for c in containers:
        requests = c["resources"].get("requests", {})
        need["cpu"] += to_millis(requests.get("cpu", "0"))
        need["memory"] += to_units(requests.get("memory", "0"))
        need[GPU] += to_units(requests.get(GPU, "0"))
    return need


# ---------------------------------------------------------------------------------------------
# large generated clusters (benchmarks)

# (weight, requests, limits, qosClass) of generated containers
_GEN_RESOURCES: list[tuple[int, dict[str, str], dict[str, str], str]] = [
    (30, {"cpu": "100m", "memory": "128Mi"}, {"memory": "256Mi"}, "Burstable"),
    (25, {"cpu": "250m", "memory": "256Mi"}, {"cpu": "500m", "memory": "512Mi"}, "Burstable"),
    (15, {"cpu": "500m", "memory": "1Gi"}, {"cpu": "500m", "memory": "1Gi"}, "Guaranteed"),
    (10, {"cpu": "50m", "memory": "64Mi"}, {}, "Burstable"),
    (10, {}, {}, "BestEffort"),
    (7, {"cpu": "1", "memory": "2Gi"}, {"cpu": "2", "memory": "4Gi"}, "Burstable"),
    (3, {"cpu": "2", "memory": "4Gi"}, {"cpu": "2", "memory": "4Gi"}, "Guaranteed"),
]
_GEN_SHAPES = [("small", 20), ("medium", 40), ("large", 30), ("xlarge", 10)]
_GEN_NAMESPACES = ["default", "web", "batch", "ml", "payments", "search", "kube-system"]
_GEN_TIERS = ["web", "backend", "cache", "db", "batch"]


def generate_cluster(
    nodes: int, pods: int, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A synthetic cluster of `nodes` Nodes and `pods` Pods as raw API JSON (with managedFields,
    as watch events carry them), the same for the same arguments. ~95% of pods are bound,
    3% pending (a third of those for schedweb), 2% Succeeded."""
    with gc_paused():
        return _generate(nodes, pods, seed)


def generate_cluster_objects(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a real cluster holds beside generate_cluster's pods, as raw API JSON with kinds:
    a Namespace per namespace, and per app of a namespace its ReplicaSet (the pods' owner,
    selecting app + pod-template-hash) and a Service selecting the app."""
    namespaces: dict[str, None] = {}
    apps: dict[tuple[str, str], tuple[str, str]] = {}
    for pod in pods:
        meta = pod["metadata"]
        namespaces[meta["namespace"]] = None
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") == "ReplicaSet":
                labels = meta["labels"]
                apps[meta["namespace"], labels["app"]] = (ref["name"], labels["pod-template-hash"])
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "resourceVersion": "10",
                "labels": {"kubernetes.io/metadata.name": ns, "team": f"team-{len(ns) % 3}"},
            },
        }
        for ns in namespaces
    ]
    for (ns, app), (rs, hash_) in apps.items():
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": rs, "namespace": ns, "resourceVersion": "20"},
                "spec": {
                    "replicas": 8,
                    "selector": {"matchLabels": {"app": app, "pod-template-hash": hash_}},
                },
            }
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": app, "namespace": ns, "resourceVersion": "30"},
                "spec": {"selector": {"app": app}, "ports": [{"port": 80}]},
            }
        )
    return out


def _generate(nodes: int, pods: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    node_objects = []
    shape_names = [name for name, w in _GEN_SHAPES for _ in range(w)]
    for i in range(nodes):
        zone = f"zone-{'abc'[i % 3]}"
        shape = SHAPES[shape_names[rng.randrange(len(shape_names))]]
        name = f"node-{zone[-1]}-{shape.instance_type.split('.')[1]}-{i:05d}"
        node = make_node_object(
            name=name,
            zone=zone,
            shape=shape,
            labels={"node-pool": "general", "example.com/rack": f"r{i % 40:02d}"},
        )
        node["metadata"]["uid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        node["metadata"]["managedFields"] = [_managed_field("kubelet", "status")]
        node["status"]["images"] = [
            {"names": [f"registry.example.com/img-{k}:1.0"], "sizeBytes": 10_000_000 * (k + 1)}
            for k in range(5)
        ]
        node_objects.append(node)

    weights = [w for w, *_ in _GEN_RESOURCES]
    pod_objects = []
    apps_per_ns = max(1, pods // (8 * len(_GEN_NAMESPACES)))  # ~8 replicas per app
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for i in range(pods):
        namespace = _GEN_NAMESPACES[rng.randrange(len(_GEN_NAMESPACES))]
        app = f"app-{rng.randrange(apps_per_ns)}"
        if (namespace, app) not in owners:
            hash_ = _suffix(f"{namespace}/{app}", 9)
            owners[namespace, app] = (hash_, _uid("replicaset", namespace, f"{app}-{hash_}"))
        hash_, owner_uid = owners[namespace, app]
        _, requests, limits, qos = rng.choices(_GEN_RESOURCES, weights)[0]
        roll = rng.random()
        bound = roll < 0.97
        phase = "Succeeded" if roll < 0.02 else ("Running" if bound else "Pending")
        node_name = (
            node_objects[rng.randrange(nodes)]["metadata"]["name"] if bound and nodes else ""
        )
        image = f"registry.example.com/{namespace}/{app}:1.0"
        containers = [_gen_container("main", image, requests, limits)]
        if rng.random() < 0.3:  # a mesh sidecar: requests without limits make it Burstable
            containers.append(
                _gen_container("proxy", "registry.example.com/mesh/proxy:1.24",
                               {"cpu": "50m", "memory": "64Mi"}, {})
            )  # fmt: skip
            qos = "Burstable"
        name = f"{app}-{hash_}-{''.join(rng.choices(_ALPHABET, k=5))}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "generateName": f"{app}-{hash_}-",
                "namespace": namespace,
                "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "resourceVersion": str(100_000 + i),
                "creationTimestamp": CREATED,
                "labels": {
                    "app": app,
                    "tier": _GEN_TIERS[rng.randrange(len(_GEN_TIERS))],
                    "pod-template-hash": hash_,
                    "version": f"v{rng.randrange(3) + 1}",
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": f"{app}-{hash_}",
                        "uid": owner_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "managedFields": [_managed_field("kube-controller-manager", "")],
            },
            "spec": {
                "volumes": [_service_account_volume()],
                "containers": containers,
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default",
                "serviceAccount": "default",
                "securityContext": {},
                "schedulerName": SCHEDWEB if not bound and i % 3 == 0 else "default-scheduler",
                "priority": 0,
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerPriority",
                "tolerations": [dict(t) for t in _DEFAULT_TOLERATIONS],
            },
            "status": {"phase": phase, "qosClass": qos},
        }
        if node_name:
            pod["spec"]["nodeName"] = node_name
            pod["status"].update(
                hostIP="10.0.0.1",
                podIP="10.244.0.1",
                startTime=STARTED,
                conditions=[
                    {"type": kind, "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": STARTED}
                    for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                containerStatuses=[
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": f"{c['image']}@sha256:{'0' * 64}",
                        "containerID": f"containerd://{rng.getrandbits(128):032x}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": STARTED}},
                        "lastState": {},
                    }
                    for c in containers
                ],
            )  # fmt: skip
        pod_objects.append(pod)
    return node_objects, pod_objects


def _gen_container(
    name: str, image: str, requests: dict[str, str], limits: dict[str, str]
) -> dict[str, Any]:
    """A container as a Deployment's pods carry it (ports, env, the service-account mount)."""
    out = container(name, image)
    out["resources"] = _resources(requests, limits)
    out["ports"] = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    out["env"] = [
        {"name": "LOG_LEVEL", "value": "info"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
    ]  # fmt: skip
    out["volumeMounts"] = [
        {
            "name": "kube-api-access",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        }
    ]
    return out


def _service_account_volume() -> dict[str, Any]:
    return {
        "name": "kube-api-access",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }  # fmt: skip


def _resources(requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = dict(requests)
    if limits:
        out["limits"] = dict(limits)
    return out


def _managed_field(manager: str, subresource: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": CREATED,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": {}}},
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def measure_snapshot(
    *, nodes: int = 5000, pods: int = 50_000, seed: int = 1, repeat: int = 3
) -> dict[str, float]:
    """Median seconds (and sizes in MB) of building, freezing and storing a generated cluster:
    the figures `make bench` reports for the snapshot. The objects go through a JSON round
    trip first so that, as with data from the API server, no strings are shared."""
    import gc
    import pickle
    import statistics
    import time

    import orjson

    from policies.cluster.state import ClusterSnapshot

    raw = orjson.dumps(generate_cluster(nodes, pods, seed))
    with gc_paused():
        node_objects, pod_objects = orjson.loads(raw)

    def median(action: Any) -> tuple[float, Any]:
        times, result = [], None
        for _ in range(repeat):
            result = None
            gc.collect()
            start = time.perf_counter()
            result = action()
            times.append(time.perf_counter() - start)
        return statistics.median(times), result

    out: dict[str, float] = {"raw_json_mb": len(raw) / 1e6}
    out["build_s"], state = median(lambda: ClusterState.from_objects(node_objects, pod_objects))
    out["freeze_s"], snapshot = median(state.freeze)
    for label, full in (("full", True), ("lean", False)):
        out[f"to_bytes_{label}_s"], data = median(
            lambda full=full: snapshot.to_bytes(pod_objects=full)
        )
        out[f"to_bytes_{label}_mb"] = len(data) / 1e6
        out[f"from_bytes_{label}_s"], _ = median(lambda data=data: ClusterSnapshot.from_bytes(data))
    with gc_paused():
        out["pickle_s"], data = median(lambda: pickle.dumps(snapshot, pickle.HIGHEST_PROTOCOL))
        out["pickle_mb"] = len(data) / 1e6
        out["unpickle_s"], _ = median(lambda: pickle.loads(data))
    return out
