"""Kubernetes objects given as text (a pasted pod, a test case's pod) -> engine inputs."""

from __future__ import annotations

import json
from typing import Any

import yaml

from policies.cluster.admission_defaults import pod_admit
from policies.cluster.convert import ConversionError, pod_view
from policies.engine.inputs import PodView
from policies.errors import InputError

MAX_POD_BYTES = 256 * 1024


def parse_manifest(text: str, *, what: str = "pod") -> dict[str, Any]:
    """YAML or JSON text of one Kubernetes object -> dict, or InputError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POD_BYTES:
        raise InputError(f"the {what} is larger than {MAX_POD_BYTES // 1024} KiB")
    if not text.strip():
        raise InputError(f"the {what} is empty")
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(
            f"the {what} is not valid YAML or JSON{where}: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"the {what} must be a mapping (a Kubernetes object), got {type(data).__name__}"
        )
    return data


# Workloads whose pod template stands for the pods they create: where the template is.
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pod_from_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """The Pod a workload's template describes: its labels, annotations and spec, in the
    workload's namespace, named `<workload>-<kind>-template`. The pod has no owner reference
    (the ReplicaSet or Job that would own it may not exist yet)."""
    kind = obj["kind"]
    template: Any = obj
    for key in TEMPLATE_PATHS[kind]:
        template = template.get(key) if type(template) is dict else None
    where = ".".join(TEMPLATE_PATHS[kind])
    if type(template) is not dict:
        raise InputError(f"{kind}: {where}: expected the pod template (an object)")
    meta = obj.get("metadata") if type(obj.get("metadata")) is dict else {}
    template_meta = template.get("metadata") or {}
    if type(template_meta) is not dict:
        raise InputError(
            f"{kind}: {where}.metadata: expected an object, got {_kind(template_meta)}"
        )
    name = str(meta.get("name") or "workload")[:200]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{kind.lower()}-template",
            "namespace": meta.get("namespace") or "default",
            "labels": template_meta.get("labels") or {},
            "annotations": template_meta.get("annotations") or {},
        },
        "spec": template.get("spec"),
    }


def pod_view_from_object(obj: dict[str, Any]) -> PodView:
    """A Pod object (dict), or a workload with a pod template (Deployment, StatefulSet,
    DaemonSet, ReplicaSet, ReplicationController, Job, CronJob) -> the engine's view of the pod
    as the API server would store it (admission_defaults.pod_admit; what that added is the
    view's `admitted`); missing namespace means default."""
    if type(obj) is not dict:
        raise InputError(f"the pod must be a mapping (a Kubernetes object), got {_kind(obj)}")
    kind = obj.get("kind", "Pod")
    if type(kind) is str and kind in TEMPLATE_PATHS:
        obj = pod_from_workload(obj)
    elif kind != "Pod":
        raise InputError(
            f"expected a Pod or a workload with a pod template ({', '.join(TEMPLATE_PATHS)}), "
            f"got kind {kind!r}"
        )
    metadata = obj.get("metadata") or {}
    if type(metadata) is not dict:
        raise InputError(f"pod: metadata: expected an object, got {_kind(metadata)}")
    obj = {**obj, "metadata": {"namespace": "default", **metadata}}
    # kube-scheduler judges the pod the API server stores: defaults and admission first
    stored, admitted = pod_admit(obj)
    try:
        view = pod_view(stored)
    except ConversionError as exc:
        raise InputError(str(exc)) from None
    view["admitted"] = admitted
    return view


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "an integer"}.get(
        type(value), type(value).__name__
    )


def pod_view_from_text(text: str) -> PodView:
    """A Pod manifest as YAML or JSON text -> the engine's pod view."""
    return pod_view_from_object(parse_manifest(text))


def pod_view_from_source(source: str | dict[str, Any]) -> PodView:
    """A pod given as an object (API JSON, a document's test) or as manifest text."""
    return pod_view_from_object(source if isinstance(source, dict) else parse_manifest(source))
