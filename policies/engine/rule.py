"""A compiled rule and the checks its generated code calls (shared by policy.py, which compiles
and evaluates, and fastpath.py, which generates the per-node loop)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cel import Program


@dataclass(frozen=True)
class CompiledRule:
    """One checked expression of the policy and where it came from."""

    name: str
    path: str  # document path of the expression, e.g. filters[1].expression
    program: Program
    node_dependent: bool


def variable_refs(program: Program) -> set[str]:
    return {r.split(".", 1)[1] for r in program.references if r.startswith("variables.")}


class MessageLater:
    """Marks a rejection whose message the fast path left to the exact path."""

    def __repr__(self) -> str:
        return "<message later>"


MESSAGE_LATER = MessageLater()


def check_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError("not a bool")
    return value


def check_number(value: Any) -> int | float:
    if type(value) not in (int, float):
        raise TypeError("not a number")
    return value
