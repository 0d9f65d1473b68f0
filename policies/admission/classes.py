"""The PriorityClasses that carry queue keys: one per key value, `preemptionPolicy: Never`.

Ordering only: kube-scheduler pops higher priorities first, and Never keeps a pod from evicting
others (seed 002's QueueSort never preempted). The names are shared by every policy: the class
of key 7 is `schedweb-queue-7` whichever policy gave the key (a negative key: `-neg-7`).
"""

from __future__ import annotations

from typing import Any

PREFIX = "schedweb-queue-"
MANAGED_LABEL = "schedweb.io/managed"
PREEMPTION_POLICY = "Never"


def class_name(value: int) -> str:
    """The PriorityClass of queue key `value`."""
    return f"{PREFIX}{value}" if value >= 0 else f"{PREFIX}neg-{-value}"


def class_manifest(value: int) -> dict[str, Any]:
    """The PriorityClass the worker creates for key `value`."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": class_name(value), "labels": {MANAGED_LABEL: "true"}},
        "value": value,
        "preemptionPolicy": PREEMPTION_POLICY,
        "globalDefault": False,
        "description": f"schedweb queue key {value} (ordering only, never preempts)",
    }
