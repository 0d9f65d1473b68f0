"""Queue order: a policy's `queue:` key for a pod, and the order pending pods would take.

kube-scheduler's default QueueSort (PrioritySort) pops the pod of highest priority first and,
among equal priorities, the one that entered the queue first. schedweb turns the key into the
pod's priority at admission (policies/queue.py), so the key orders the queue: seed 002's
QueueSort (`groupPriority` label, then QoS class) becomes one CEL expression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .inputs import PodView

QOS_RANK = {"Guaranteed": 2, "Burstable": 1, "BestEffort": 0}


@dataclass(frozen=True, slots=True)
class QueueKey:
    """The queue key of one pod: `key` is the priority it gets (None: unchanged), `raw` what the
    expression gave before clamping into min..max, `reason` why there is no key (the pod is
    not the policy's, or the expression failed: then `error` is True)."""

    key: int | None
    raw: int | None = None
    reason: str = ""
    error: bool = False

    @property
    def clamped(self) -> bool:
        return self.key is not None and self.raw is not None and self.raw != self.key

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "raw": self.raw,
            "clamped": self.clamped,
            "reason": self.reason,
            "error": self.error,
        }


def clamp(value: int, low: int, high: int) -> int:
    return low if value < low else high if value > high else value


def namespace_view(name: str, labels: Mapping[str, str] | None) -> dict[str, Any]:
    """`namespaceObject` as a queue expression sees it (`namespace` is a reserved word in CEL,
    and Kubernetes admission CEL uses the same name)."""
    return {"name": name, "labels": dict(labels or {})}


def queue_order(keys: Sequence[tuple[PodView, QueueKey]]) -> list[tuple[PodView, QueueKey]]:
    """Pods in the order kube-scheduler's PrioritySort pops them: highest key first; pods
    without a key keep their own priority; ties by creation (the snapshot has no queue entry
    time, so creationTimestamp, then namespace/name, stands in)."""

    def sort_key(item: tuple[PodView, QueueKey]) -> tuple:
        pod, qk = item
        priority = qk.key if qk.key is not None else int(pod.get("priority") or 0)
        meta = (pod.get("object") or {}).get("metadata") or {}
        return (-priority, meta.get("creationTimestamp") or "", pod["namespace"], pod["name"])

    return sorted(keys, key=sort_key)


@dataclass(frozen=True, slots=True)
class GangMembership:
    """A pod's gang under a policy's `gang:`: `group` ("" for none) and `min_count`; `reason`
    says why there is none (an evaluation error sets `error`)."""

    group: str = ""
    min_count: int = 0
    reason: str = ""
    error: bool = False

    @property
    def member(self) -> bool:
        return bool(self.group) and self.min_count >= 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "minCount": self.min_count,
            "member": self.member,
            "reason": self.reason,
            "error": self.error,
        }
