"""Errors of the CEL engine: compile issues (every one found, with positions) and evaluation errors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One problem in an expression; line and column are 1-based within the source."""

    message: str
    line: int
    column: int
    kind: str  # "syntax", "type" or "cost"

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.message}"


class CelError(Exception):
    """Base of every error the CEL engine raises on purpose."""


class CelCompileError(CelError):
    """An expression that does not parse, type-check or fit its cost budget; `issues` lists all."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = sorted(issues, key=lambda i: (i.line, i.column))
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.issues) == 1:
            return f"{self.issues[0]}"
        return f"{len(self.issues)} issues: " + "; ".join(str(i) for i in self.issues)


class CelEvalError(CelError):
    """A CEL evaluation error (division by zero, overflow, missing key, ...)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class CelCostError(CelEvalError):
    """The evaluation's actual cost passed its budget; never absorbed by `&&`, `||` or macros."""
