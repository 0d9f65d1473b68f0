"""The playground's node editor, as what-if edits: a node's labels, taints, cordon and
allocatable resources as a form, and the form's changes as the same edits the what-if text
holds (policies/cluster/whatif.py), so that text stays the one source of truth.

    before = node_form_from(obj)            # the node as the preview sees it (edits applied)
    errors = node_form_errors(after)        # {field path: message}, every one at once
    text = edits_text(node_form_edits(before, after))   # lines appended to the what-if text

Field paths name the form's inputs: `labels[2].key`, `taints[0].effect`, `cpu`, `copyName`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from policies.cluster.whatif import EFFECTS, UNSCHEDULABLE_TAINT
from policies.engine.quantity import QuantityError, parse_quantity

RESOURCES = ("cpu", "memory", "pods")
MAX_ROWS = 100  # labels or taints in one form: more than any real node carries
# Kubernetes' qualified name (label and taint keys): an optional DNS-subdomain prefix and "/",
# then 1-63 alphanumerics with -, _ or . inside; a label value is the name part or empty.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
VALUE_PROBLEM = "letters, digits, -, _ and . (starting and ending alphanumeric), at most 63"
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass
class NodeForm:
    """A node as the editor shows it; `copy_name` asks for a new node like this one."""

    name: str
    labels: list[tuple[str, str]] = field(default_factory=list)
    taints: list[tuple[str, str, str]] = field(default_factory=list)  # key, value, effect
    unschedulable: bool = False
    allocatable: dict[str, str] = field(default_factory=dict)  # cpu, memory, pods as given
    copy_name: str = ""


def node_form_from(obj: dict[str, Any]) -> NodeForm:
    """A node object (as the what-if edits leave it) as the form's values."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    return NodeForm(
        name=str(meta.get("name", "")),
        labels=sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items()),
        taints=[
            (str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
            for t in spec.get("taints") or []
            if isinstance(t, dict) and t.get("key") != UNSCHEDULABLE_TAINT["key"]
        ],
        unschedulable=bool(spec.get("unschedulable")),
        allocatable={r: str(allocatable[r]) for r in RESOURCES if r in allocatable},
    )


def node_form_errors(form: NodeForm, *, existing: set[str] = frozenset()) -> dict[str, str]:
    """Every problem of the form by field path; {} when its edits can be applied.
    `existing`: the node names a copy may not take."""
    errors: dict[str, str] = {}
    if len(form.labels) > MAX_ROWS or len(form.taints) > MAX_ROWS:
        errors["labels" if len(form.labels) > MAX_ROWS else "taints"] = f"at most {MAX_ROWS}"
        return errors
    seen: set[str] = set()
    for i, (key, value) in enumerate(form.labels):
        if not _KEY.match(key):
            errors[f"labels[{i}].key"] = _key_problem(key)
        elif key in seen:
            errors[f"labels[{i}].key"] = f"{key} is already a label above"
        seen.add(key)
        if not _VALUE.match(value):
            errors[f"labels[{i}].value"] = VALUE_PROBLEM
    taints: set[tuple[str, str]] = set()
    for i, (key, value, effect) in enumerate(form.taints):
        if not _KEY.match(key):
            errors[f"taints[{i}].key"] = _key_problem(key)
        if not _VALUE.match(value):
            errors[f"taints[{i}].value"] = VALUE_PROBLEM
        if effect not in EFFECTS:
            errors[f"taints[{i}].effect"] = f"one of {', '.join(EFFECTS)}"
        elif (key, effect) in taints:
            errors[f"taints[{i}].key"] = f"{key}:{effect} is already a taint above"
        taints.add((key, effect))
    for resource, text in form.allocatable.items():
        try:
            if not text or parse_quantity(text) < 0:
                raise QuantityError("a quantity of 0 or more, e.g. 8, 500m, 32Gi")
        except QuantityError as exc:
            errors[resource] = str(exc).removeprefix("invalid quantity ")
    if form.copy_name:
        if not _NODE_NAME.match(form.copy_name):
            errors["copyName"] = "a node name: lower-case letters, digits, - and ., at most 253"
        elif form.copy_name in existing:
            errors["copyName"] = f"node {form.copy_name} exists already"
    return errors


def _key_problem(key: str) -> str:
    if not key:
        return "required"
    return "a key like disk or example.com/disk: letters, digits, -, _ and ., at most 63 after /"


def node_form_edits(before: NodeForm, after: NodeForm) -> list[dict[str, Any]]:
    """The what-if edits that turn `before` into `after`, in the mini-language's order:
    labels, taints, cordon, allocatable, then the copy (made of the edited node)."""
    node = before.name
    edits: list[dict[str, Any]] = []
    old_labels, new_labels = dict(before.labels), dict(after.labels)
    for key in sorted(old_labels.keys() - new_labels.keys()):
        edits.append({"label": {"node": node, "key": key}})
    for key, value in after.labels:
        if old_labels.get(key) != value:
            edits.append({"label": {"node": node, "key": key, "value": value}})
    old_taints, new_taints = set(before.taints), set(after.taints)
    for key, _, effect in sorted(old_taints - new_taints):
        edits.append({"untaint": {"node": node, "key": key, "effect": effect}})
    for key, value, effect in after.taints:
        if (key, value, effect) not in old_taints:
            taint = {"node": node, "key": key, **({"value": value} if value else {})}
            edits.append({"taint": {**taint, "effect": effect}})
    if before.unschedulable != after.unschedulable:
        edits.append({"cordon" if after.unschedulable else "uncordon": node})
    changed = {r: v for r, v in after.allocatable.items() if before.allocatable.get(r) != v}
    if changed:
        edits.append({"allocatable": {"node": node, **changed}})
    if after.copy_name:
        edits.append({"addNode": {"name": after.copy_name, "like": node}})
    return edits


def edits_text(edits: list[dict[str, Any]]) -> str:
    """The edits as what-if lines, one each in flow style (`- label: {node: a, key: b}`)."""
    lines = []
    for edit in edits:
        [(kind, arg)] = edit.items()
        flow = yaml.safe_dump([arg], default_flow_style=True, sort_keys=False, width=10_000)
        lines.append(f"- {kind}: {flow.strip()[1:-1]}\n")  # [arg] -> arg, quoted as YAML needs
    return "".join(lines)
