"""The playground editor's completion schema: the engine's declared CEL input types
(policies/devviews.py builds them from policies/engine/cel/types.py), plus what this page knows
beyond the types: the resources present in the cluster snapshot and the draft's variables."""

from __future__ import annotations

import functools
from typing import Any

from policies.devviews import cel_completions
from policies.engine.document import PolicyInvalid
from policies.engine.policy import compile_policy


@functools.cache
def _base() -> dict[str, Any]:
    return cel_completions()


def _snapshot_resources(*, nodes: list[dict[str, Any]], known: set[str]) -> list[dict[str, str]]:
    """Extended resources the snapshot's nodes report (e.g. example_com_fpga) not listed yet."""
    seen: set[str] = set()
    for node in nodes[:2000]:  # enough to see every resource kind on a real cluster
        seen.update(node["allocatable"].keys())
    return [
        {"name": name, "type": "int", "doc": "reported by nodes in the snapshot"}
        for name in sorted(seen - known)
    ]


def _variables(*, document: str) -> list[dict[str, str]]:
    """The draft's variables with their checked CEL types (when the draft compiles)."""
    try:
        compiled = compile_policy(document)
    except PolicyInvalid:
        return []
    return [
        {"name": name, "type": str(rule.program.type), "kind": "variable", "doc": "variable"}
        for name, rule in compiled.variables.items()
    ]


def policy_completions(*, document: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Completion data for `pod.`, `node.`, `variables.`, `cluster.` and resource maps."""
    base = _base()
    resources = list(base["resources"])
    resources += _snapshot_resources(nodes=nodes, known={r["name"] for r in resources})
    return {**base, "resources": resources, "variables": _variables(document=document)}
