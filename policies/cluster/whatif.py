"""What-if edits: changes to nodes and to the pod, applied to a copy of a snapshot for one
preview only (the snapshot itself, shared by every reader, is never touched).

The playground sends them as a YAML list, one edit per item, in the order they apply:

    - cordon: a-small-1                # spec.unschedulable and the controller's taint, as kubectl
    - uncordon: a-small-1
    - label: {node: b-large-1, key: disk, value: ssd}     # no value: the label is removed
    - taint: {node: b-large-1, key: gpu, value: "true", effect: NoSchedule}
    - untaint: {node: b-large-1, key: gpu}                # every effect, or just `effect:`
    - allocatable: {node: b-large-1, cpu: "8", memory: 32Gi, nvidia.com/gpu: 2}
    - addNode: {name: spare-1, like: b-large-1, labels: {zone: c}}   # a copy, no pods on it
    - removeNode: a-small-2                                # its pods stay bound to it
    - podRequests: {cpu: 500m, memory: 1Gi}                # the pod's requests (first container)

Every edit is checked before any is applied; an unusable one is an InputError naming it
(`whatIf[2].node: no node named x`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

import yaml

from policies.cluster.convert import OBJECT_KINDS, ConversionError, node_view, pod_view
from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterState
from policies.engine.inputs import NodeView, PodView
from policies.errors import InputError

MAX_WHATIF_BYTES = 64 * 1024
MAX_EDITS = 50
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
KINDS = (
    "cordon",
    "uncordon",
    "label",
    "taint",
    "untaint",
    "allocatable",
    "addNode",
    "removeNode",
    "podRequests",
)
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def whatif_parse(text: str) -> list[tuple[str, Any]]:
    """The edits of `text` as (kind, argument); [] for empty text; InputError otherwise."""
    if not text.strip():
        return []
    if len(text.encode("utf-8", "surrogatepass")) > MAX_WHATIF_BYTES:
        raise InputError(f"whatIf: at most {MAX_WHATIF_BYTES // 1024} KiB")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"whatIf: not valid YAML{where}") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError("whatIf: expected a list of edits (- cordon: NODE, - label: {...}, ...)")
    if len(data) > MAX_EDITS:
        raise InputError(f"whatIf: at most {MAX_EDITS} edits")
    edits = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or len(item) != 1:
            raise InputError(f"whatIf[{i}]: expected one edit, e.g. `cordon: NODE`")
        [(kind, arg)] = item.items()
        if kind not in KINDS:
            raise InputError(f"whatIf[{i}]: unknown edit {kind!r} (use {', '.join(KINDS)})")
        edits.append((kind, arg))
    return edits


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool) or value == "":
        raise InputError(f"{where}: expected a name or value")
    return str(value)


def _arg_map(arg: Any, where: str, required: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(arg, dict):
        raise InputError(f"{where}: expected a mapping with {', '.join(required)}")
    for key in required:
        if key not in arg:
            raise InputError(f"{where}.{key}: required")
    return arg


class _Edit:
    """The nodes being edited (name -> raw object copy, or None when removed) and the pod."""

    def __init__(self, cluster: LoadedCluster, pod: PodView) -> None:
        self.state = cluster.state
        self.nodes: dict[str, dict[str, Any] | None] = {}
        self.pod = pod
        self.added: list[str] = []

    def node(self, name: Any, where: str) -> dict[str, Any]:
        name = _text(name, where)
        if name in self.nodes:
            if self.nodes[name] is None:
                raise InputError(f"{where}: node {name} was removed by an earlier edit")
            return self.nodes[name]
        view = self.state.node(name)
        if view is None:
            raise InputError(f"{where}: no node named {name}")
        obj = copy.deepcopy(view["object"])
        self.nodes[name] = obj
        return obj

    def apply(self, i: int, kind: str, arg: Any) -> str:
        """Applies one edit; returns its description."""
        where = f"whatIf[{i}].{kind}"
        if kind in ("cordon", "uncordon"):
            obj = self.node(arg, where)
            spec = obj.setdefault("spec", {})
            taints = [
                t for t in spec.get("taints") or [] if t.get("key") != UNSCHEDULABLE_TAINT["key"]
            ]
            if kind == "cordon":
                spec["unschedulable"] = True
                taints.append(dict(UNSCHEDULABLE_TAINT))
            else:
                spec.pop("unschedulable", None)
            spec["taints"] = taints
            return f"{kind} {arg}"
        if kind == "removeNode":
            self.node(arg, where)
            self.nodes[str(arg)] = None
            return f"remove node {arg}"
        if kind == "podRequests":
            return self._pod_requests(arg, where)
        if kind == "addNode":
            args = _arg_map(arg, where, ("name", "like"))
            name = _text(args["name"], f"{where}.name")
            if name in self.nodes or self.state.node(name) is not None:
                raise InputError(f"{where}.name: node {name} exists already")
            obj = copy.deepcopy(self.node(args["like"], f"{where}.like"))
            meta = obj.setdefault("metadata", {})
            meta.update(name=name, uid="")
            labels = dict(meta.get("labels") or {})
            labels["kubernetes.io/hostname"] = name
            extra = args.get("labels") or {}
            if not isinstance(extra, dict):
                raise InputError(f"{where}.labels: expected a mapping")
            labels.update({str(k): str(v) for k, v in extra.items()})
            meta["labels"] = labels
            self.nodes[name] = obj
            self.added.append(name)
            return f"add node {name} like {args['like']}"
        args = _arg_map(arg, where, ("node",))
        obj = self.node(args["node"], f"{where}.node")
        node = args["node"]
        if kind == "label":
            key = _text(args.get("key"), f"{where}.key")
            labels = obj.setdefault("metadata", {}).setdefault("labels", {})
            if args.get("value") is None:
                labels.pop(key, None)
                return f"label {node}: remove {key}"
            labels[key] = str(args["value"])
            return f"label {node}: {key}={args['value']}"
        if kind in ("taint", "untaint"):
            key = _text(args.get("key"), f"{where}.key")
            effect = args.get("effect")
            if kind == "taint" and effect not in EFFECTS:
                raise InputError(f"{where}.effect: one of {', '.join(EFFECTS)}")
            spec = obj.setdefault("spec", {})
            kept = [
                t
                for t in spec.get("taints") or []
                if not (t.get("key") == key and (effect is None or t.get("effect") == effect))
            ]
            if kind == "taint":
                taint = {"key": key, "effect": effect}
                if args.get("value") is not None:
                    taint["value"] = str(args["value"])
                kept.append(taint)
            spec["taints"] = kept
            return f"{kind} {node}: {key}" + (f":{effect}" if effect else "")
        # allocatable
        status = obj.setdefault("status", {})
        allocatable = dict(status.get("allocatable") or status.get("capacity") or {})
        changed = {str(k): str(v) for k, v in args.items() if k != "node"}
        if not changed:
            raise InputError(f'{where}: name at least one resource, e.g. cpu: "8"')
        allocatable.update(changed)
        status["allocatable"] = allocatable
        return f"allocatable {node}: " + ", ".join(f"{k}={v}" for k, v in changed.items())

    def _pod_requests(self, arg: Any, where: str) -> str:
        if not isinstance(arg, dict) or not arg:
            raise InputError(f"{where}: expected resources, e.g. {{cpu: 500m, memory: 1Gi}}")
        obj = copy.deepcopy(self.pod["object"])
        containers = (obj.get("spec") or {}).get("containers")
        if (
            not isinstance(containers, list)
            or not containers
            or not isinstance(containers[0], dict)
        ):
            raise InputError(f"{where}: the pod has no containers to set requests on")
        wanted = {str(k): str(v) for k, v in arg.items()}
        for i, container in enumerate(containers):
            resources = container.setdefault("resources", {}) if isinstance(container, dict) else {}
            requests = dict(resources.get("requests") or {})
            for key in wanted:
                requests.pop(key, None)
            if i == 0:
                requests.update(wanted)
            resources["requests"] = requests
        (obj.get("spec") or {}).pop("resources", None)  # pod-level requests would override
        try:
            self.pod = pod_view(obj)
        except ConversionError as exc:
            raise InputError(f"{where}: {exc}") from None
        return "pod requests: " + ", ".join(f"{k}={v}" for k, v in wanted.items())

    def cluster(self, base: LoadedCluster) -> LoadedCluster:
        views: list[NodeView] = []
        try:
            for view in self.state.nodes():
                name = view["name"]
                if name not in self.nodes:
                    views.append(view)
                elif self.nodes[name] is not None:
                    views.append(node_view(self.nodes[name], requested={}, pod_count=0))
            views += [
                node_view(obj, requested={}, pod_count=0)
                for n in self.added
                if (obj := self.nodes[n]) is not None
            ]
        except ConversionError as exc:
            raise InputError(f"whatIf: {exc}") from None
        objects = [v for kind in OBJECT_KINDS for v in self.state.objects(kind).values()]
        state = ClusterState.from_views(
            nodes=views, pods=self.state.pods(), objects=objects
        ).freeze()
        return LoadedCluster(
            state=state,
            source=base.source,
            label=f"{base.label} with what-if edits",
            version=base.version,
            age_seconds=base.age_seconds,
            stale=base.stale,
            status=base.status,
            error=base.error,
            updated_at=base.updated_at,
            details=base.details,
        )


def whatif_apply(
    *, cluster: LoadedCluster, pod: PodView, edits: list[tuple[str, Any]]
) -> tuple[LoadedCluster, PodView, list[str]]:
    """(the edited copy of the cluster, the edited pod, a description per edit)."""
    if not edits:
        return cluster, pod, []
    edit = _Edit(cluster, pod)
    described = [edit.apply(i, kind, arg) for i, (kind, arg) in enumerate(edits)]
    node_edits = any(kind != "podRequests" for kind, _ in edits)
    return (edit.cluster(cluster) if node_edits else cluster), edit.pod, described


def whatif_nodes(*, cluster: LoadedCluster, text: str) -> LoadedCluster:
    """The cluster as the what-if text's node edits leave it (its pod edits aside): what the
    playground's node editor starts from. InputError as for a preview."""
    edits = whatif_parse(text)
    if all(kind == "podRequests" for kind, _ in edits):
        return cluster
    edit = _Edit(cluster, cast(PodView, {}))  # no pod: podRequests edits are skipped
    for i, (kind, arg) in enumerate(edits):
        if kind != "podRequests":
            edit.apply(i, kind, arg)
    return edit.cluster(cluster)
