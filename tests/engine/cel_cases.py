"""Test support for the CEL engine: pod and node builders, a varied set of inputs, the
cel-expr-python oracle, and a strict typed comparison of CEL values.

The oracle sees `pod` and `node` as `map(string, dyn)`; resource maps are given every resource
name the tests use (absent ones as 0), since "absent reads as 0" is schedweb's own rule.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from policies.engine.cel import CodegenContext, Program, policy_env, types
from policies.engine.cel.values import TypeValue, UInt
from policies.engine.inputs import ResourceMap

GiB = 2**30
MiB = 2**20
RESOURCE_NAMES = ("cpu", "memory", "ephemeral_storage", "pods", "nvidia_com_gpu", "hugepages_2Mi")


def make_node(**overrides: Any) -> dict[str, Any]:
    """A NodeView dict: a 4-CPU, 8 GiB worker in zone "a" with a quarter of its CPU requested."""
    name = overrides.pop("name", "node-a")
    node = {
        "uid": f"uid-{name}",
        "name": name,
        "labels": {"kubernetes.io/hostname": name, "zone": "a"},
        "annotations": {},
        "taints": [],
        "unschedulable": False,
        "conditions": {"Ready": "True"},
        "capacity": ResourceMap(cpu=4000, memory=8 * GiB, pods=110),
        "allocatable": ResourceMap(cpu=4000, memory=8 * GiB, pods=110),
        "requested": ResourceMap(cpu=1000, memory=2 * GiB),
        "podCount": 3,
        "object": {
            "metadata": {"name": name, "labels": {"zone": "a"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi"},
                "nodeInfo": {"kubeletVersion": "v1.35.0"},
            },
        },
    }
    node.update(overrides)
    return node


def make_pod(**overrides: Any) -> dict[str, Any]:
    """A PodView dict: a pending Burstable web pod asking for 500m CPU and 1 GiB."""
    name = overrides.pop("name", "web-1")
    pod = {
        "uid": f"uid-{name}",
        "name": name,
        "namespace": "default",
        "labels": {"app": "web"},
        "annotations": {},
        "nodeSelector": {},
        "schedulerName": "schedweb",
        "qosClass": "Burstable",
        "ownerKind": "ReplicaSet",
        "ownerName": "web-5d9c",
        "nodeName": "",
        "phase": "Pending",
        "priority": 0,
        "requests": ResourceMap(cpu=500, memory=GiB),
        "limits": ResourceMap(cpu=1000, memory=2 * GiB),
        "tolerations": [],
        "object": {
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "priority": 0,
                "containers": [
                    {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}
                ],
            },
        },
    }
    pod.update(overrides)
    return pod


NODES = [
    make_node(),
    make_node(
        name="gpu-node-1",
        labels={
            "zone": "b",
            "nvidia.com/gpu.present": "true",
            "node.kubernetes.io/instance-type": "p4d.24xlarge",
        },
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        capacity=ResourceMap(cpu=96000, memory=1152 * GiB, pods=110, nvidia_com_gpu=8),
        allocatable=ResourceMap(cpu=95000, memory=1100 * GiB, pods=110, nvidia_com_gpu=8),
        requested=ResourceMap(cpu=40000, memory=300 * GiB, nvidia_com_gpu=6),
        podCount=14,
        object={
            "metadata": {"name": "gpu-node-1", "labels": {"zone": "b"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu"}]},
            "status": {
                "allocatable": {"nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    ),
    make_node(
        name="n",
        labels={},
        annotations={},
        conditions={},
        capacity=ResourceMap(),
        allocatable=ResourceMap(),
        requested=ResourceMap(),
        podCount=0,
        object={"metadata": {"name": "n"}, "spec": {}, "status": {}},
    ),
    make_node(
        name="control-plane-0",
        labels={
            "node-role.kubernetes.io/control-plane": "",
            "zone": "c",
            "team": "platform",
            "tier": "gold",
        },
        annotations={"note": "Drained for maintenance — back at 18:00 (é)", "ratio": "0.75"},
        taints=[
            {"key": "node-role.kubernetes.io/control-plane", "value": "", "effect": "NoSchedule"},
            {"key": "maintenance", "value": "true", "effect": "NoExecute"},
        ],
        unschedulable=True,
        conditions={"Ready": "False", "MemoryPressure": "True"},
        capacity=ResourceMap(cpu=64000, memory=256 * GiB, pods=250, hugepages_2Mi=512 * MiB),
        allocatable=ResourceMap(cpu=63500, memory=250 * GiB, pods=250, hugepages_2Mi=512 * MiB),
        requested=ResourceMap(cpu=63500, memory=260 * GiB, pods=250),
        podCount=250,
        object={
            "metadata": {"name": "control-plane-0", "annotations": {"ratio": "0.75"}},
            "spec": {"unschedulable": True, "weights": [3, -2.5, 0, 1e300]},
            "status": {"phase": None},
        },
    ),
    make_node(
        name="huge",
        labels={"zone": "a"},
        allocatable=ResourceMap(cpu=9223372036854775807, memory=9223372036854775807),
        requested=ResourceMap(cpu=-9223372036854775807, memory=0),
        podCount=9223372036854775807,
    ),
]

PODS = [
    make_pod(),
    make_pod(
        name="trainer-0",
        namespace="ml",
        labels={"app": "trainer", "pod-group": "g1"},
        qosClass="Guaranteed",
        priority=1000,
        requests=ResourceMap(cpu=8000, memory=64 * GiB, nvidia_com_gpu=2),
        limits=ResourceMap(cpu=8000, memory=64 * GiB, nvidia_com_gpu=2),
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"}
        ],
        nodeSelector={"nvidia.com/gpu.present": "true"},
        object={
            "metadata": {"name": "trainer-0", "annotations": {"scheduling/min-available": "4"}},
            "spec": {
                "priority": 1000,
                "containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": 2}}}],
            },
        },
    ),
    make_pod(
        name="x",
        namespace="kube-system",
        labels={},
        qosClass="BestEffort",
        priority=-5,
        ownerKind="",
        ownerName="",
        requests=ResourceMap(),
        limits=ResourceMap(),
        object={"metadata": {"name": "x"}, "spec": {"priority": -5.5, "containers": []}},
    ),
]

ENV = policy_env()


def activation(pod: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    return {"pod": pod, "node": node, "cluster": None, "variables": {}}


def fast_function(program: Program, *, fold_constants: bool = True) -> Any:
    """The fast path compiled into a function of (pod, node), as the policy layer would do."""
    ctx = CodegenContext(
        {"pod": "pod", "node": "node", "cluster": "cluster"}, fold_constants=fold_constants
    )
    code = program.emit(ctx)
    namespace = dict(ctx.globals)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # generated code must compile without SyntaxWarning
        exec(f"def fast(pod, node, cluster=None):\n    return {code}\n", namespace)
    return namespace["fast"]


# -- the oracle ------------------------------------------------------------------------------------
class Oracle:
    """cel-expr-python with the strings and math extensions; pod and node as map(string, dyn)."""

    def __init__(self) -> None:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_math, ext_strings

        self.cel = cel
        dyn_map = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
        self.env = cel.NewEnv(
            variables={"pod": dyn_map, "node": dyn_map},
            extensions=[ext_strings.ExtStrings(), ext_math.ExtMath()],
        )

    def compile(self, source: str) -> Any:
        return self.env.compile(source)

    def evaluate(
        self, expression: Any, pod: Mapping[str, Any], node: Mapping[str, Any]
    ) -> tuple[str, Any]:
        """("value", typed value) or ("error", message)."""
        value = expression.eval(data={"pod": oracle_input(pod), "node": oracle_input(node)})
        if value.type() == self.cel.Type.ERROR:
            return "error", value.plain_value()
        return "value", self.typed(value)

    def typed(self, value: Any) -> Any:
        name = value.type().name()
        raw = value.value()
        if name.startswith("LIST"):
            return ("list", tuple(self.typed(v) for v in raw))
        if name.startswith("MAP"):
            return ("map", frozenset((typed(k), self.typed(v)) for k, v in raw.items()))
        if name.startswith("TYPE"):
            return ("type", _ORACLE_TYPE_NAMES.get(raw.name(), raw.name().split("<")[0].lower()))
        if name == "UINT":
            return ("uint", int(raw))
        if name == "BYTES":
            return ("bytes", bytes(raw))
        return typed(raw)


_ORACLE_TYPE_NAMES = {
    "INT": "int",
    "UINT": "uint",
    "DOUBLE": "double",
    "BOOL": "bool",
    "STRING": "string",
    "BYTES": "bytes",
    "NULL": "null_type",
    "TYPE": "type",
}


def oracle_input(value: Any) -> Any:
    """Our input values as the oracle accepts them: plain dicts and lists, resources filled."""
    if isinstance(value, ResourceMap):
        return {name: value.get(name, 0) for name in sorted(set(RESOURCE_NAMES) | set(value))}
    if isinstance(value, dict):
        return {k: oracle_input(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [oracle_input(v) for v in value]
    return value


def typed(value: Any) -> Any:
    """A hashable, type-tagged form of a CEL value: 1, 1u, 1.0 and true all differ; NaNs are
    equal to each other; maps compare without order."""
    if value is None:
        return ("null",)
    tv = type(value)
    if tv is bool:
        return ("bool", value)
    if tv is UInt:
        return ("uint", int(value))
    if tv is int:
        return ("int", value)
    if tv is float:
        return ("double", "nan" if math.isnan(value) else repr(value))
    if tv is str:
        return ("string", value)
    if tv in (bytes, bytearray):
        return ("bytes", bytes(value))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((typed(k), typed(v)) for k, v in value.items()))
    if isinstance(value, TypeValue):
        return ("type", value.name)
    return ("other", repr(value))


def unordered(t: Any) -> Any:
    """A typed list compared as a multiset (for results built by iterating a map)."""
    if t[0] == "list":
        return ("list", tuple(sorted(t[1], key=repr)))
    return t


__all__ = [
    "ENV",
    "NODES",
    "PODS",
    "Oracle",
    "activation",
    "fast_function",
    "make_node",
    "make_pod",
    "typed",
    "types",
]


def fast_call(program: Program, act: Mapping[str, Any]) -> Any:
    """Runs the fast path on an activation (inputs bound to Python names as the policy layer
    binds them: one local per input and per variable)."""
    names = {"pod": "pod", "node": "node", "cluster": "cluster"}
    variables = dict(act.get("variables") or {})
    for name in variables:
        names[f"variables.{name}"] = f"v_{name}"
    ctx = CodegenContext(names)
    code = program.emit(ctx)
    params = ", ".join(["pod", "node", "cluster", *(f"v_{n}" for n in variables)])
    namespace = dict(ctx.globals)
    exec(f"def fast({params}):\n    return {code}\n", namespace)
    return namespace["fast"](
        act.get("pod"), act.get("node"), act.get("cluster"), *variables.values()
    )


def both_paths(program: Program, act: Mapping[str, Any], *, cost_limit: int = 10**9) -> Any:
    """The exact path's value, after checking that the fast path gives the same typed value
    (or raises when the exact path raises)."""
    from policies.engine.cel import CelEvalError

    try:
        value = program.evaluate(act, cost_limit=cost_limit)
    except CelEvalError:
        fast_failed = False
        try:
            fast_value = fast_call(program, act)
        except Exception:
            fast_failed = True
        if not fast_failed:
            raise AssertionError(f"fast path returned {fast_value!r} where CEL fails") from None
        raise
    fast_value = fast_call(program, act)
    assert typed(fast_value) == typed(value), (fast_value, value)
    return value
