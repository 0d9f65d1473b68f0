"""The real control plane behaves like a cluster: tokens authenticate, RBAC refuses, nodes carry
status, binding places pods, the stock kube-scheduler schedules, and stop() leaves nothing."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import yaml

from tests.harness.binaries import binaries_version
from tests.harness.controlplane import ControlPlane
from tests.harness.kubeapi import ApiError
from tests.harness.resources import (
    node_cordon,
    node_create,
    node_delete,
    node_get,
    node_manifest,
    node_relabel,
    node_taint,
    pod_bind,
    pod_create,
    pod_delete,
    pod_get,
    pod_manifest,
    pod_wait_bound,
)

pytestmark = pytest.mark.cluster


def _unique(prefix: str) -> str:
    # The control plane is shared by the session: every test names its own objects.
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_the_api_server_answers_the_admin_token_as_the_pinned_release(control_plane):
    version = control_plane.api.get("/version")
    nodes = control_plane.api.get("/api/v1/nodes")

    assert version["gitVersion"] == binaries_version()
    assert nodes["kind"] == "NodeList"


def test_the_limited_token_is_refused_listing_nodes_with_403(control_plane):
    limited = control_plane.api_for(control_plane.limited_token)

    with pytest.raises(ApiError) as refused:
        limited.get("/api/v1/nodes")

    assert refused.value.status == 403
    assert "schedweb-limited" in refused.value.message


def test_a_wrong_token_is_refused_with_401(control_plane):
    stranger = control_plane.api_for("not-a-token-the-server-knows")

    with pytest.raises(ApiError) as refused:
        stranger.get("/api/v1/nodes")

    assert refused.value.status == 401


def test_the_kubeconfig_for_a_token_points_at_the_server_with_that_token(control_plane):
    path = control_plane.kubeconfig_for(control_plane.limited_token)

    config = yaml.safe_load(path.read_text())

    assert config["clusters"][0]["cluster"]["server"] == control_plane.url
    assert Path(config["clusters"][0]["cluster"]["certificate-authority"]) == control_plane.ca_file
    assert config["users"][0]["user"]["token"] == control_plane.limited_token
    assert path.stat().st_mode & 0o077 == 0  # holds a secret: owner-only


def test_a_created_node_keeps_its_allocatable_and_ready_condition(control_plane):
    name = _unique("node-status")
    manifest = node_manifest(
        name=name,
        cpu="4",
        memory="16Gi",
        pods=58,
        allocatable={"cpu": "3900m"},
        labels={"zone": "a"},
    )

    node_create(api=control_plane.api, manifest=manifest)
    stored = node_get(api=control_plane.api, name=name)  # read back, not the create answer

    # allocatable = capacity with cpu overridden: 4 cores - 100m reserved = 3900m
    assert stored["status"]["allocatable"] == {"cpu": "3900m", "memory": "16Gi", "pods": "58"}
    assert stored["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "58"}
    ready = [c for c in stored["status"]["conditions"] if c["type"] == "Ready"]
    assert [c["status"] for c in ready] == ["True"]
    assert stored["metadata"]["labels"]["zone"] == "a"
    # No TaintNodesByCondition admission: the node is not tainted not-ready behind our back.
    assert stored["spec"].get("taints", []) == []


def test_relabel_taint_and_cordon_change_the_stored_node(control_plane):
    name = _unique("node-edit")
    api = control_plane.api
    node_create(api=api, manifest=node_manifest(name=name, labels={"team": "a", "tier": "gold"}))

    node_relabel(api=api, name=name, labels={"team": "b", "tier": None})
    node_taint(
        api=api, name=name, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    )
    node_cordon(api=api, name=name)
    stored = node_get(api=api, name=name)

    assert stored["metadata"]["labels"]["team"] == "b"
    assert "tier" not in stored["metadata"]["labels"]
    assert stored["spec"]["taints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ]
    assert stored["spec"]["unschedulable"] is True


def test_a_deleted_node_is_gone(control_plane):
    name = _unique("node-gone")
    node_create(api=control_plane.api, manifest=node_manifest(name=name))

    node_delete(api=control_plane.api, name=name)

    with pytest.raises(ApiError) as missing:
        node_get(api=control_plane.api, name=name)
    assert missing.value.status == 404


def test_a_pod_bound_through_the_binding_helper_shows_its_node(control_plane):
    api = control_plane.api
    node, pod = _unique("node-bind"), _unique("pod-bind")
    node_create(api=api, manifest=node_manifest(name=node))
    pod_create(api=api, manifest=pod_manifest(name=pod, scheduler_name="nobody"))

    pod_bind(api=api, name=pod, node=node)

    assert pod_get(api=api, name=pod)["spec"]["nodeName"] == node


def test_deleting_a_bound_pod_removes_it_at_once_without_a_kubelet(control_plane):
    api = control_plane.api
    node, pod = _unique("node-del"), _unique("pod-del")
    node_create(api=api, manifest=node_manifest(name=node))
    pod_create(api=api, manifest=pod_manifest(name=pod, scheduler_name="nobody"))
    pod_bind(api=api, name=pod, node=node)

    pod_delete(api=api, name=pod)

    with pytest.raises(ApiError) as missing:
        pod_get(api=api, name=pod)
    assert missing.value.status == 404


def test_the_default_kube_scheduler_binds_a_pod_to_the_only_node_that_fits(control_plane):
    api = control_plane.api
    run = _unique("run")
    selector = {"schedweb.test/run": run}
    # The pod requests 2 cpu. Only `fits` can take it:
    #   too-small: allocatable 1 cpu < 2          (NodeResourcesFit)
    #   tainted:   8 cpu, NoSchedule, no toleration (TaintToleration)
    #   cordoned:  8 cpu, unschedulable            (NodeUnschedulable)
    #   fits:      4 cpu >= 2
    nodes = {
        "too-small": node_manifest(name=f"{run}-too-small", cpu="1", labels=selector),
        "tainted": node_manifest(
            name=f"{run}-tainted",
            cpu="8",
            labels=selector,
            taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        ),
        "cordoned": node_manifest(
            name=f"{run}-cordoned", cpu="8", labels=selector, unschedulable=True
        ),
        "fits": node_manifest(name=f"{run}-fits", cpu="4", labels=selector),
    }
    for manifest in nodes.values():
        node_create(api=api, manifest=manifest)
    pod = f"{run}-pod"
    pod_create(api=api, manifest=pod_manifest(name=pod, cpu="2", node_selector=selector))

    with control_plane.start_scheduler(
        {"profiles": [{"schedulerName": "default-scheduler"}]}
    ) as sched:
        bound_to = pod_wait_bound(api=api, name=pod)
        metrics = sched.get("/metrics")

    assert bound_to == f"{run}-fits"
    assert "scheduler_schedule_attempts_total" in metrics


def test_after_stop_no_process_of_ours_is_left_and_secrets_are_gone(tmp_path):
    plane = ControlPlane(tmp_path / "plane").start()
    plane.start_scheduler("profiles: [{schedulerName: other-scheduler}]")
    started = plane.pids()

    plane.stop()
    plane.stop()  # idempotent

    assert set(started) == {"etcd", "kube-apiserver", "kube-scheduler-1"}
    for name, pid in started.items():
        assert not _is_running(pid), f"{name} (pid {pid}) is still running"
    left = sorted(p.name for p in (tmp_path / "plane").iterdir())
    assert left == ["etcd.log", "kube-apiserver.log", "kube-scheduler-1.log"]


def _is_running(pid: int) -> bool:
    # Our children are reaped by stop(), so their pid no longer exists (unless reused by an
    # unrelated program: then its command line is not one of ours).
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    return Path(cmdline.decode()).name in {"etcd", "kube-apiserver", "kube-scheduler"}
