"""Workloads for gangs (scheduling.k8s.io/v1alpha1, Kubernetes 1.35 with the GenericWorkload and
GangScheduling feature gates): one Workload per group, one pod group in it with a gang policy.

kube-scheduler's GangScheduling plugin keeps a pod whose `spec.workloadRef` names a gang from
being placed until `minCount` members can be placed at once (and a pod whose Workload does not
exist yet waits for it), so the webhook can link pods before the worker creates the Workload.
Field names checked against k8s.io/api v0.35.8: core/v1 PodSpec.WorkloadRef {name, podGroup},
scheduling/v1alpha1 Workload.spec.podGroups[].policy.gang.minCount.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

POD_GROUP = "members"
PREFIX = "schedweb-"
WORKLOAD_API = "/apis/scheduling.k8s.io/v1alpha1"
MODE_WORKLOAD = "workload"  # the cluster serves Workloads: kube-scheduler places gangs whole
MODE_HOLD = "hold"  # it does not: the extender holds members until enough exist (a filter)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def workload_name(group: str) -> str:
    """The Workload of a group: `schedweb-<group>` when that is a valid name, else a stable
    hash of the group (label values may hold '_' or capitals, names may not)."""
    name = PREFIX + group
    if len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name):
        return name
    return PREFIX + hashlib.sha256(group.encode()).hexdigest()[:16]


def workload_ref(group: str) -> dict[str, str]:
    """The pod's spec.workloadRef for its group."""
    return {"name": workload_name(group), "podGroup": POD_GROUP}


def workload_manifest(*, namespace: str, group: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(group),
            "namespace": namespace,
            "labels": {"schedweb.io/managed": "true"},
            "annotations": {"schedweb.io/pod-group": group[:253]},
        },
        "spec": {"podGroups": [{"name": POD_GROUP, "policy": {"gang": {"minCount": min_count}}}]},
    }
