"""Compilation environments: the declared inputs an expression may reference."""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import bounds as bd
from . import types as t
from .bounds import Bound
from .lexer import KEYWORDS, RESERVED
from .types import Type

_NAME = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in KEYWORDS | RESERVED:
        raise ValueError(
            f"invalid {what} name {name!r}: use letters, digits and '_', not a CEL keyword"
        )


class Env:
    """Declared top-level inputs (name -> type) and their size bounds for cost estimates;
    `field_bounds` (object type name -> field -> bound) sizes fields of declared object types
    beyond the built-in ones (the policy's `variables.<name>`, see policy_env)."""

    __slots__ = ("bounds", "field_bounds", "variables")

    def __init__(
        self,
        variables: Mapping[str, Type] | None = None,
        *,
        bounds: Mapping[str, Bound] | None = None,
        field_bounds: Mapping[str, Mapping[str, Bound]] | None = None,
    ) -> None:
        self.variables: dict[str, Type] = {}
        self.bounds: dict[str, Bound] = {}
        self.field_bounds: dict[str, dict[str, Bound]] = {
            owner: dict(fields) for owner, fields in (field_bounds or {}).items()
        }
        for name, typ in (variables or {}).items():
            _check_name(name, "input")
            if not isinstance(typ, Type):
                raise TypeError(f"input {name!r}: expected a cel Type, got {type(typ).__name__}")
            self.variables[name] = typ
            self.bounds[name] = (bounds or {}).get(name) or bd.for_type(typ)

    def with_variable(self, name: str, typ: Type, *, bound: Bound | None = None) -> Env:
        """A copy with one more top-level input (for tests and ad-hoc expressions)."""
        env = Env(self.variables, bounds=self.bounds, field_bounds=self.field_bounds)
        _check_name(name, "input")
        env.variables[name] = typ
        env.bounds[name] = bound or bd.for_type(typ)
        return env

    @property
    def variables_type(self) -> Type | None:
        """The object type of `variables` in a policy environment."""
        return self.variables.get("variables")


def policy_env(
    variables: Mapping[str, Type] | None = None,
    *,
    bounds: Mapping[str, Bound] | None = None,
) -> Env:
    """The environment of policy expressions: `pod`, `node`, `cluster`, and `variables.<name>`
    for each declared policy variable. `bounds` gives a variable's size bound (the bound its own
    expression's estimate computed, `Program.bound`), so expressions reading it estimate with it;
    a variable without one is sized by its type (strings, lists and maps: bounds.DYN)."""
    fields: dict[str, Type] = {}
    for name, typ in (variables or {}).items():
        _check_name(name, "variable")
        if not isinstance(typ, Type):
            raise TypeError(f"variable {name!r}: expected a cel Type, got {type(typ).__name__}")
        fields[name] = typ
    return Env(
        {
            "pod": t.POD,
            "node": t.NODE,
            "cluster": t.CLUSTER,
            "variables": t.object_type("Variables", fields),
        },
        field_bounds={
            "Variables": {name: bound for name, bound in (bounds or {}).items() if name in fields}
        },
    )


def queue_env() -> Env:
    """The environment of a policy's `queue.expression`: `pod` and its `namespaceObject` (name,
    labels). A queue key is computed when a pod is admitted, before any node is considered,
    so there is no `node`, and no `cluster` or `variables` (which may read nodes)."""
    return Env({"pod": t.POD, "namespaceObject": t.NAMESPACE})
