"""The engine's inputs: pod and node views, and the cluster helpers' view of all pods.

A view is a plain dict keyed by the CEL field names below, built once per object by
`policies.cluster.convert` from the Kubernetes JSON form and shared (never mutated) by every
evaluation. Quantities are integers: CPU in millicores, memory and storage in bytes, everything
else in whole units.

Resource maps (`requests`, `limits`, `capacity`, `allocatable`, `requested`) are keyed by
resource name with every character other than [A-Za-z0-9] replaced by "_":
`cpu`, `memory`, `ephemeral_storage`, `pods`, `nvidia_com_gpu`, `hugepages_2Mi`. A resource that
a pod or node does not list reads as 0 in CEL (`node.allocatable.nvidia_com_gpu` on a node
without GPUs is 0, not an error): resource maps are `ResourceMap` instances.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, Protocol, TypedDict

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


class ResourceMap(dict):
    """A resource map whose absent resources read as 0 (`r["nvidia_com_gpu"]` on a CPU node).

    A dict subclass, so lookups stay as fast as a plain dict's in compiled policies.
    """

    __slots__ = ()

    def __missing__(self, key: str) -> int:
        return 0


Resources = ResourceMap


def resource_key(name: str) -> str:
    """The CEL key of a Kubernetes resource name: "nvidia.com/gpu" -> "nvidia_com_gpu"."""
    return _NOT_ALNUM.sub("_", name)


class Toleration(TypedDict):
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" (all effects), NoSchedule, PreferNoSchedule or NoExecute


class Taint(TypedDict):
    key: str
    value: str
    effect: str


class PodView(TypedDict):
    """What CEL sees as `pod`."""

    uid: str
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    schedulerName: str
    priority: int
    qosClass: str  # Guaranteed, Burstable or BestEffort
    requests: Resources  # effective pod request: containers, init containers, overhead
    limits: Resources
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]
    ownerKind: str  # "" when the pod has no controller
    ownerName: str
    nodeName: str  # "" while pending
    phase: str
    object: dict[str, Any]  # the raw Pod (managedFields removed)
    # what API defaulting and admission added to a pod given as text (not visible to CEL)
    admitted: NotRequired[list[str]]


class NodeView(TypedDict):
    """What CEL sees as `node`."""

    uid: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    conditions: dict[str, str]  # condition type -> status, e.g. {"Ready": "True"}
    capacity: Resources
    allocatable: Resources
    requested: Resources  # sum of requests of non-terminated pods bound to this node
    podCount: int  # number of those pods
    object: dict[str, Any]  # the raw Node (managedFields removed)


class ClusterView(Protocol):
    """What the cluster helpers (`cluster.countPods(...)` etc.) read. Implemented by snapshots."""

    def pods_matching(self, namespace: str, selector: Mapping[str, str]) -> Sequence[PodView]:
        """Non-terminated pods (bound or pending) in `namespace` ("" = every namespace) whose
        labels contain every key/value of `selector`."""
        ...

    def node(self, name: str) -> NodeView | None:
        """The node view by name, if the snapshot has it."""
        ...

    def node_count(self) -> int:
        """Number of nodes in the snapshot."""
        ...
