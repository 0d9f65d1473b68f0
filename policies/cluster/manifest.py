"""Kubernetes objects given as text (a pasted pod, a test case's pod) -> engine inputs."""

from __future__ import annotations

import json
from typing import Any

import yaml

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


def pod_view_from_object(obj: dict[str, Any]) -> PodView:
    """A Pod object (dict) -> the engine's pod view; missing namespace means default."""
    if type(obj) is not dict:
        raise InputError(f"the pod must be a mapping (a Kubernetes object), got {_kind(obj)}")
    kind = obj.get("kind", "Pod")
    if kind != "Pod":
        raise InputError(f"expected a Pod, got kind {kind!r}")
    metadata = obj.get("metadata") or {}
    if type(metadata) is not dict:
        raise InputError(f"pod: metadata: expected an object, got {_kind(metadata)}")
    obj = {**obj, "metadata": {"namespace": "default", **metadata}}
    try:
        return pod_view(obj)
    except ConversionError as exc:
        raise InputError(str(exc)) from None


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
