"""The `file` cluster source: a saved `kubectl get nodes,pods -A -o json` for offline work.

Accepted shapes, JSON or YAML: a `List` whose items carry `kind` (what kubectl prints), a
`NodeList` / `PodList` (items may omit `kind`, as the API server returns them), a plain list of
objects, a single Node or Pod, or a YAML stream of any of these (`---` separated). Namespaces,
Services, ReplicaSets, StatefulSets and ReplicationControllers are kept too (kube-scheduler reads
them: `kubectl get nodes,pods,namespaces,services,replicasets,statefulsets,replicationcontrollers
-A -o json`); items of other kinds (Deployments... from `kubectl get all`) are skipped.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import yaml

from policies.cluster.convert import OBJECT_KINDS, ConversionError, node_view, object_view, pod_view
from policies.cluster.state import ClusterState, gc_paused
from policies.engine.inputs import NodeView, PodView

_LIST_ITEM_KIND = {
    "NodeList": "Node",
    "PodList": "Pod",
    "List": None,
    **{f"{kind}List": kind for kind in OBJECT_KINDS},
}
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~10x faster


class ClusterFileError(ValueError):
    """A cluster file that cannot be loaded; the message names the file (and the item)."""


def load_cluster_file(path: str | os.PathLike[str]) -> ClusterState:
    """A ClusterState from a JSON or YAML file of Nodes and Pods, or ClusterFileError."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ClusterFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return load_cluster_bytes(data, name=str(path))


def read_regular_file(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes; OSError otherwise
    (a device such as /dev/zero, a FIFO or a directory is refused before anything is read, and
    at most limit + 1 bytes are ever read, should the file grow meanwhile)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"not a regular file: {os.fspath(path)}")
        if info.st_size > limit:
            raise OSError(f"larger than {limit} bytes: {os.fspath(path)}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit} bytes: {os.fspath(path)}")
    return data


FREEZE_ABOVE_BYTES = 4_000_000  # smaller loads (a test case's inline cluster) only pause the GC


@contextmanager
def bulk_load(*, freeze: bool = True) -> Iterator[None]:
    """Around building a large snapshot: the cyclic GC is paused while it is built, then the
    objects are moved to the permanent generation (gc.freeze) before it is enabled again.

    A 50 000-pod snapshot is ~3 million acyclic objects that live until the next snapshot
    replaces them (refcounting frees them then; freezing only stops the collector from
    scanning them). Without this, re-enabling the GC costs a 1.8 s collection at once and
    every later full collection ~3 s - a pause in whatever request runs then. Collecting
    first (cheap: earlier snapshots are frozen) keeps unrelated garbage out of the freeze.
    freeze=False: only pause the GC (small loads, where a collection would cost more)."""
    if freeze:
        gc.collect()
    with gc_paused():
        yield
        if freeze:
            gc.freeze()


def load_cluster_bytes(data: bytes, *, name: str) -> ClusterState:
    """A ClusterState from the bytes of such a file (an upload, a test case's inline cluster);
    `name` stands for the file in error messages. Built under bulk_load(): with the collector
    running, the load took 10-12 s instead of 4 s at 5000 nodes/50 000 pods."""
    node_views: list[NodeView] = []
    pod_views: list[PodView] = []
    object_views: list[dict[str, Any]] = []
    with bulk_load(freeze=len(data) > FREEZE_ABOVE_BYTES):
        for index, (item, default_kind) in enumerate(_items(name, _parse(data, name))):
            if type(item) is not dict:
                raise ClusterFileError(
                    f"{name}: item {index}: expected an object, got {_kind_of(item)}"
                )
            kind = item.get("kind") or default_kind
            if not kind:
                raise ClusterFileError(f"{name}: item {index}: has no kind (expected Node or Pod)")
            try:
                if kind == "Node":
                    node_views.append(node_view(item, requested={}, pod_count=0))
                elif kind == "Pod":
                    pod_views.append(pod_view(item))
                elif kind in OBJECT_KINDS:
                    object_views.append(object_view(item, kind))
            except ConversionError as exc:
                raise ClusterFileError(f"{name}: item {index}: {exc}") from None
        return ClusterState.from_views(nodes=node_views, pods=pod_views, objects=object_views)


def _parse(data: bytes, path: str) -> list[Any]:
    """The file's documents: one for JSON, one or more for YAML."""
    if not data or data.isspace():  # not strip(): that would copy a 200 MB file
        raise ClusterFileError(f"{path}: the file is empty")
    try:
        return [orjson.loads(data)]
    except orjson.JSONDecodeError:
        pass
    try:
        docs = [doc for doc in yaml.load_all(data, Loader=_YAML_LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ClusterFileError(f"{path}: neither JSON nor YAML{at}: {problem}") from None
    if not docs:
        raise ClusterFileError(f"{path}: the file holds no document")
    return docs


def _items(path: str, docs: list[Any]) -> list[tuple[Any, str | None]]:
    """Flattens the documents to (item, kind implied by its list) pairs."""
    items: list[tuple[Any, str | None]] = []
    for doc in docs:
        if type(doc) is list:
            items.extend((item, None) for item in doc)
        elif type(doc) is dict and doc.get("kind") in _LIST_ITEM_KIND:
            listed = doc.get("items")
            if listed is None:
                listed = []
            if type(listed) is not list:
                raise ClusterFileError(f"{path}: {doc['kind']}.items is not a list")
            default_kind = _LIST_ITEM_KIND[doc["kind"]]
            items.extend((item, default_kind) for item in listed)
        elif type(doc) is dict and "kind" in doc:
            items.append((doc, None))  # a single object
        elif type(doc) is dict and "items" in doc:
            raise ClusterFileError(
                f"{path}: a list without a kind (expected List, NodeList or PodList)"
            )
        else:
            raise ClusterFileError(
                f"{path}: expected a List of Nodes and Pods (kubectl get nodes,pods -A -o json),"
                f" got {_kind_of(doc)}"
            )
    return items


def _kind_of(value: Any) -> str:
    if type(value) is dict:
        return "an object without kind or items"
    return {list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )
