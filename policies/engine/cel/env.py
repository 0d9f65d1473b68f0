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
    """Declared top-level inputs (name -> type) and their size bounds for cost estimates."""

    __slots__ = ("bounds", "variables")

    def __init__(
        self,
        variables: Mapping[str, Type] | None = None,
        *,
        bounds: Mapping[str, Bound] | None = None,
    ) -> None:
        self.variables: dict[str, Type] = {}
        self.bounds: dict[str, Bound] = {}
        for name, typ in (variables or {}).items():
            _check_name(name, "input")
            if not isinstance(typ, Type):
                raise TypeError(f"input {name!r}: expected a cel Type, got {type(typ).__name__}")
            self.variables[name] = typ
            self.bounds[name] = (bounds or {}).get(name) or bd.for_type(typ)

    def with_variable(self, name: str, typ: Type, *, bound: Bound | None = None) -> Env:
        """A copy with one more top-level input (for tests and ad-hoc expressions)."""
        env = Env(self.variables, bounds=self.bounds)
        _check_name(name, "input")
        env.variables[name] = typ
        env.bounds[name] = bound or bd.for_type(typ)
        return env

    @property
    def variables_type(self) -> Type | None:
        """The object type of `variables` in a policy environment."""
        return self.variables.get("variables")


def policy_env(variables: Mapping[str, Type] | None = None) -> Env:
    """The environment of policy expressions: `pod`, `node`, `cluster`, and `variables.<name>`
    for each declared policy variable."""
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
        }
    )
