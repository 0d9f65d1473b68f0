"""A compiled rule, the checks its generated code calls, and `variables` as the exact path reads
them (shared by policy.py, which compiles and evaluates, and fastpath.py, which generates the
per-node loop)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .cel import CelError, CelEvalError, Program


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


class _Failure(Exception):
    """A rule failed to evaluate on a node; carries the rule name for the report."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


class LazyVariables(Mapping):
    """`variables` for the exact path: each is computed on first use, as in CEL policies."""

    def __init__(
        self,
        rules: dict[str, CompiledRule],
        activation: dict[str, Any],
        cost_limit: int,
        cache: dict | None = None,
    ) -> None:
        self._rules = rules
        # The inputs without `variables` itself: holding the activation that holds this map
        # would be a reference cycle, keeping a node's values alive until the next GC.
        self._inputs = {k: v for k, v in activation.items() if k != "variables"}
        self._cost_limit = cost_limit
        self._cache: dict[str, Any] = dict(cache) if cache else {}

    def __getitem__(self, name: str) -> Any:
        if name in self._cache:
            value = self._cache[name]
        else:
            rule = self._rules[name]
            try:
                value = rule.program.evaluate(
                    {**self._inputs, "variables": self}, cost_limit=self._cost_limit
                )
            except CelError as exc:
                value = _Failure(name, f"variable {name}: {exc}")
            self._cache[name] = value
        if isinstance(value, _Failure):
            raise _VariableError(value.message)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)


class _VariableError(CelEvalError):
    """A variable's own evaluation error, surfacing where the variable is used."""


def cel_type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        bytes: "bytes",
        list: "list",
        dict: "map",
    }.get(type(value), type(value).__name__)
