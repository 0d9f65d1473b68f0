"""Pod views held compactly, for snapshots sized for 150 000 pods (issue 28).

A pod view built from API JSON owns a copy of everything: its tolerations (two dicts of four
keys for nearly every pod: the admission defaults), its requests and limits (a handful of shapes
across a cluster), empty annotation and selector maps, and a fresh string for each namespace,
node name, phase and label value. `Compactor.pod` returns an equal view whose parts are shared
with the views already held (a table of the repetitive parts, bounded) and whose short strings
are interned. Views are never mutated (policies/engine/inputs.py), so sharing equal parts is
invisible to every reader.

A `lean` compactor also replaces the raw `object` of every pod bound to a node with one shared
object (BOUND_OBJECT: apiVersion and kind; the pod's identity is in the view, and the highest
resourceVersion held is noted before, `pods_seen`): the extender's processes only
count such pods (CEL's `cluster.*` helpers read labels, namespace and node name from the view)
and never read their raw objects (bind answers a bound pod before any evaluation, the requeue
sweep forgets it); a pod without a node keeps its object, because bind and the requeue sweep
evaluate the policy on it (CEL may read `pod.object`). Previews and the model
of kube-scheduler read bound pods' specs (affinity, ports, requests), so only the extender's
readers are lean (SnapshotReader(lean=True)).

Measured at 5000 nodes and 50 000 generated pods (docs/perf/issue-28-profile.txt): a lean state
holds 98 MB where the views with every raw object held 990 MB (77% of it the pods' objects), a
full one 839 MB.
"""

from __future__ import annotations

import sys
from typing import Any

from policies.engine.inputs import PodView, ResourceMap

# Entries of the sharing table before it is emptied (the views keep what they share): a stream of
# pods that repeat nothing cannot grow it without limit. An entry costs ~200-400 bytes.
SHARE_MAX = 50_000
_STRINGS = ("namespace", "nodeName", "schedulerName", "phase", "qosClass", "ownerKind", "ownerName")
_NAMES = ("name", "namespace", "uid")
_EMPTY: dict[str, str] = {}  # shared by every lean view without annotations, selector...
IDENTITY = ("name", "namespace", "uid", "resourceVersion")
# The raw object of every pod bound to a node in a lean state (nothing there reads it; the pod's
# identity is in the view). Shared by all of them: never modify it.
BOUND_OBJECT: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {}}


def lean_object(obj: dict[str, Any], keys: tuple[str, ...] = IDENTITY) -> dict[str, Any]:
    """A pod's raw object cut to the metadata `keys` (see the module docstring). The
    resourceVersion stays: a reader's `pods_seen` is the highest one held."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: meta[k] for k in keys if k in meta},
    }


def _view_dict(view: PodView) -> dict[str, Any]:
    """A copy of the view built as a literal: a dict of string keys sized for them (464 bytes
    for a pod view, where orjson's and dict()'s copies take 632)."""
    out = {
        "uid": view["uid"],
        "name": view["name"],
        "namespace": view["namespace"],
        "labels": view["labels"],
        "annotations": view["annotations"],
        "schedulerName": view["schedulerName"],
        "priority": view["priority"],
        "qosClass": view["qosClass"],
        "requests": view["requests"],
        "limits": view["limits"],
        "nodeSelector": view["nodeSelector"],
        "tolerations": view["tolerations"],
        "ownerKind": view["ownerKind"],
        "ownerName": view["ownerName"],
        "nodeName": view["nodeName"],
        "phase": view["phase"],
        "object": view["object"],
    }
    if len(view) != len(out):  # `admitted`, or keys of a stored view this version lacks
        out.update(view)
    return out


def share_tree(value: Any, table: dict[Any, Any]) -> Any:
    """An equal JSON value (dicts, lists, strings, numbers) whose equal strings, dicts and lists
    are one object each across every value passed with the same `table` (kept for one load: its
    keys hold the ids of the objects it keeps alive). A Node's status (images, conditions,
    nodeInfo) is mostly the same on every node of a pool: 5000 nodes' raw objects took 46 MB
    each in every process holding the snapshot (docs/perf/issue-28-profile.txt)."""
    kind = type(value)
    if kind is str:
        return table.setdefault(value, value)
    if kind is dict:
        value = {k: share_tree(v, table) for k, v in value.items()}
        key: tuple = ("d", *((k, _identity(v)) for k, v in value.items()))
    elif kind is list:
        value = [share_tree(v, table) for v in value]
        key = ("l", *map(_identity, value))
    else:
        return value
    return table.setdefault(key, value)


def _identity(value: Any) -> Any:
    """What tells a shared value apart: strings, dicts and lists are shared by then (their id);
    scalars by type and value (1, 1.0 and True are equal, and stay apart)."""
    kind = type(value)
    if kind in (str, dict, list):
        return id(value)
    return (kind, value)


def _reuse(into: dict[str, Any], key: str, value: Any) -> None:
    """into[key] = value when it is an equal value of the same type held elsewhere already."""
    if value is not None:
        mine = into.get(key)
        if value is not mine and type(value) is type(mine) and value == mine:
            into[key] = value


def _intern(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


class Compactor:
    """Makes pod views share their repetitive parts (one per cluster state)."""

    __slots__ = ("_shared", "lean")

    def __init__(self, *, lean: bool = False) -> None:
        self.lean = lean
        self._shared: dict[tuple, Any] = {}

    def pod(self, view: PodView) -> PodView:
        """An equal view built of shared parts (a new dict: the given one is left as it is)."""
        out = _view_dict(view)
        shared = self._shared
        if len(shared) >= SHARE_MAX:
            shared.clear()
        # Built by convert.pod_view for each pod (the raw object does not hold them as such).
        out["requests"] = self._shared_value("r", view["requests"])
        out["limits"] = self._shared_value("m", view["limits"])
        out["tolerations"] = self._tolerations(view["tolerations"])
        obj = view["object"]
        if type(obj) is not dict:
            return out  # type: ignore[return-value]
        if self.lean and view["nodeName"]:
            # The raw object goes: what the view took from it is worth sharing now.
            for key in _STRINGS:
                out[key] = _intern(out[key])
            out["labels"] = self._labels(view["labels"])
            out["annotations"] = self._shared_value("a", view["annotations"])
            out["nodeSelector"] = self._shared_value("s", view["nodeSelector"])
            out["object"] = BOUND_OBJECT
        else:
            # Kept whole: the view's maps and names point into it where they are equal (a
            # stored snapshot parses each twice, in the view and in the object).
            meta, spec = obj.get("metadata"), obj.get("spec")
            if type(meta) is dict:
                for key in _NAMES:
                    _reuse(out, key, meta.get(key))
                _reuse(out, "labels", meta.get("labels"))
                _reuse(out, "annotations", meta.get("annotations"))
            if type(spec) is dict:
                _reuse(out, "nodeSelector", spec.get("nodeSelector"))
                _reuse(out, "nodeName", spec.get("nodeName"))
                _reuse(out, "schedulerName", spec.get("schedulerName"))
        return out  # type: ignore[return-value]

    def _shared_value(self, tag: str, value: Any) -> Any:
        """A map shared whole with an equal one held already (annotations, nodeSelector,
        requests, limits; the tag keeps kinds apart, e.g. a ResourceMap from a dict)."""
        if type(value) is dict and not value:
            return _EMPTY
        if type(value) not in (dict, ResourceMap):
            return value
        key = (tag, *value.items())
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = value
        return found

    def _labels(self, labels: Any) -> Any:
        """Labels with interned keys and values: label sets repeat less than their strings
        (a Deployment's replicas differ in their pod-template-hash only across rollouts, but
        every pod of the cluster names the same few keys and values)."""
        if type(labels) is not dict:
            return labels
        if not labels:
            return _EMPTY
        return {_intern(k): _intern(v) for k, v in labels.items()}

    def _tolerations(self, value: Any) -> Any:
        """A toleration list shared with an equal one (most pods carry the two defaults)."""
        if type(value) is not list:
            return value
        if not value:
            return value
        try:
            key = ("t", *(tuple(t.items()) for t in value))
            found = self._shared.get(key)
        except (AttributeError, TypeError):  # not the dicts of strings convert builds
            return value
        if found is None:
            found = self._shared[key] = value
        return found
