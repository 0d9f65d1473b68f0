"""The worker's side of gangs (`gang:`): which mode the cluster is in, and its Workloads.

    schedweb:gang:mode   JSON {mode, reason, checkedAt}   workload | hold, as last detected

- workload: the cluster serves scheduling.k8s.io/v1alpha1 Workloads (Kubernetes 1.35 with the
  GenericWorkload feature gate; kube-scheduler needs GangScheduling too). The webhook links each
  gang member to its group's Workload (spec.workloadRef) and this worker creates the Workload
  (one pod group, gang.minCount from the policy): kube-scheduler places the group all or nothing.
- hold: it does not. A policy's filter holds members pending until enough exist (seed 002's
  PreFilter, policies/examples/seed-002-gang.yaml), as before.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from django.conf import settings

from policies.admission.workloads import (
    MODE_HOLD,
    MODE_WORKLOAD,
    PREFIX,
    WORKLOAD_API,
    workload_manifest,
)
from policies.redis import redis_client

MODE_KEY = "schedweb:gang:mode"


def gang_mode_detect(client) -> tuple[str, str]:
    """(mode, reason) from the API server's discovery of the Workload API."""
    from policies.cluster.live import KubeError

    try:
        found = client.request_json("GET", WORKLOAD_API)
    except KubeError as exc:
        if exc.http_status == 404:
            return MODE_HOLD, f"{WORKLOAD_API} is not served (GenericWorkload feature gate off)"
        raise
    names = {r.get("name") for r in (found or {}).get("resources") or []}
    if "workloads" not in names:
        return MODE_HOLD, f"{WORKLOAD_API} serves no workloads"
    return MODE_WORKLOAD, f"{WORKLOAD_API}/workloads is served"


def gang_mode_record(mode: str, reason: str) -> None:
    redis_client().set(
        MODE_KEY, orjson.dumps({"mode": mode, "reason": reason, "checkedAt": time.time()})
    )


def gang_mode_read(client=None) -> dict[str, Any]:
    """The last detected mode ({} when never detected: a demo or file cluster)."""
    raw = (client or redis_client()).get(MODE_KEY)
    return orjson.loads(raw) if raw else {}


def gang_mode_status(source: str | None = None) -> dict[str, Any]:
    """How gangs (`gang:`) are placed here: `workload` (the cluster serves the Workload API:
    kube-scheduler places each group all or nothing), `hold` (it does not: a policy's filter
    holds members until enough exist) or `unknown` (not detected yet, or not a live cluster)."""
    source = source or settings.SCHEDWEB_CLUSTER_SOURCE
    found: dict[str, Any] = {}
    if source == "live":
        with contextlib.suppress(Exception):
            found = gang_mode_read()
    return {
        "mode": found.get("mode") or "unknown",
        "reason": found.get("reason")
        or (
            "the worker has not checked the cluster yet"
            if source == "live"
            else f"a {source} cluster has no API server to ask"
        ),
        "checkedAt": _iso(found.get("checkedAt")),
    }


def _iso(timestamp: Any) -> str | None:
    if not isinstance(timestamp, int | float):
        return None
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def gang_workloads_ensure() -> int:
    """Detects the mode and, with the Workload API, creates the Workload of every group whose
    pending members the webhook linked (spec.workloadRef to a schedweb- Workload) and that has
    none yet. Returns how many were created."""
    from policies.cluster.live import KubeError, LiveClient
    from policies.cluster.sources import cluster_default
    from policies.engine.document import PolicyInvalid
    from policies.evaluation import policy_compile
    from policies.publishing import active_policies_entries

    client = LiveClient.from_settings()
    mode, reason = gang_mode_detect(client)
    gang_mode_record(mode, reason)
    if mode != MODE_WORKLOAD:
        return 0
    by_scheduler = {}
    for entry in active_policies_entries():
        try:
            compiled = policy_compile(entry["document"])
        except PolicyInvalid:
            continue
        if compiled.spec.gang is not None:
            by_scheduler.update({name: compiled for name in compiled.spec.scheduler_names})
    if not by_scheduler:
        return 0
    cluster = cluster_default()
    namespaces = cluster.state.namespaces()
    wanted: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in cluster.state.pods():
        ref = ((pod.get("object") or {}).get("spec") or {}).get("workloadRef") or {}
        if not str(ref.get("name", "")).startswith(PREFIX) or pod["nodeName"]:
            continue
        compiled = by_scheduler.get(pod["schedulerName"])
        if compiled is None:
            continue
        gang = compiled.gang_of(pod, namespaces.get(pod["namespace"]))
        if gang.member:
            manifest = workload_manifest(
                namespace=pod["namespace"], group=gang.group, min_count=gang.min_count
            )
            wanted[(pod["namespace"], manifest["metadata"]["name"])] = manifest
    if not wanted:
        return 0
    listed = client.request_json("GET", f"{WORKLOAD_API}/workloads")
    existing = {
        (w["metadata"]["namespace"], w["metadata"]["name"]) for w in listed.get("items") or []
    }
    created = 0
    for (namespace, name), manifest in wanted.items():
        if (namespace, name) in existing:
            continue
        try:
            client.request_json(
                "POST", f"{WORKLOAD_API}/namespaces/{namespace}/workloads", manifest
            )
        except KubeError as exc:
            if exc.http_status != 409:  # another worker made it
                raise
        created += 1
    return created
