"""`compile_expression` and `Program`: one checked expression with its exact and fast paths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import ast
from . import types as t
from .bounds import Bound
from .checker import Checker
from .codegen import CodegenContext, emit_program
from .cost import Estimator, describe
from .deadline import deadline_check
from .env import Env
from .errors import CelCompileError, Issue
from .interpreter import Compiler, run
from .parser import ParseError, parse
from .types import Type


def _position(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a source offset; columns count characters."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def compile_expression(
    source: str,
    env: Env,
    *,
    cost_limit: int,
    expect: tuple[Type, ...] | None = None,
    track_cost: bool = True,
) -> Program:
    """Parses, type-checks and cost-estimates `source`; CelCompileError lists every issue found
    (syntax errors stop at the first). `expect` restricts the result's static type (dyn passes)."""
    if not isinstance(env, Env):
        raise TypeError(f"env must be an Env (see policy_env()), got {type(env).__name__}")
    if isinstance(expect, Type):
        expect = (expect,)
    if not isinstance(source, str):
        raise CelCompileError(
            [Issue(f"expression must be a string, got {type(source).__name__}", 1, 1, "syntax")]
        )

    def issue(offset: int, message: str, kind: str) -> Issue:
        line, column = _position(source, offset)
        return Issue(message, line, column, kind)

    try:
        root = parse(source)
    except ParseError as e:
        raise CelCompileError([issue(e.pos, e.message, "syntax")]) from None
    deadline_check()  # under a request's wall-clock guard, each phase looks at the clock
    checker = Checker(env.variables)
    result = checker.check(root)
    issues = [issue(pos, message, "type") for pos, message in checker.issues]
    fits = result.is_dyn or any(t.is_assignable(e, result, {}) for e in expect or ())
    if expect and not issues and not fits:
        wanted = " or ".join(str(e) for e in expect)
        issues.append(Issue(f"expected {wanted}, got {result}", 1, 1, "type"))
    if issues:
        raise CelCompileError(issues)
    deadline_check()
    estimate = Estimator(env.bounds, env.field_bounds).run(root)
    deadline_check()
    if estimate.cost > cost_limit:
        message = f"estimated cost {estimate.cost} exceeds the budget {cost_limit}"
        offset = 0
        if estimate.dominant is not None:
            offset = estimate.dominant.pos
            line, column = _position(source, offset)
            message += (
                f" (the {_what(estimate.dominant)} at line {line}, column {column} dominates)"
            )
        raise CelCompileError([issue(offset, message, "cost")])
    return Program(
        source,
        root,
        result,
        estimate.cost,
        _references(root, env),
        nslots=checker.slots,
        bounds=estimate.bounds,
        track_cost=track_cost,
    )


def _what(node: ast.Node) -> str:
    if isinstance(node, ast.Comprehension):
        return f"{node.kind}() over {describe(node.iter_range)}"
    assert isinstance(node, ast.Call)
    return (
        f"{node.function}() on {describe(node.operands[0])}"
        if node.operands
        else f"{node.function}()"
    )


def _references(root: ast.Node, env: Env) -> frozenset[str]:
    refs: set[str] = set()
    selected: set[int] = set()
    for node in ast.walk(root):
        if isinstance(node, (ast.Select, ast.Has)) and _is_input(node.operand, "variables", env):
            refs.add(f"variables.{node.field}")
            selected.add(id(node.operand))
    for node in ast.walk(root):
        is_input = isinstance(node, ast.Ident) and node.binding is None
        if is_input and node.name in env.variables and id(node) not in selected:
            refs.add(node.name)
    return frozenset(refs)


def _is_input(node: ast.Node, name: str, env: Env) -> bool:
    return (
        isinstance(node, ast.Ident)
        and node.binding is None
        and node.name == name
        and name in env.variables
    )


class Program:
    """A compiled expression. `evaluate` is the exact path; `emit` writes the fast path."""

    def __init__(
        self,
        source: str,
        root: ast.Node,
        result: Type,
        cost: int,
        references: frozenset[str],
        *,
        nslots: int,
        bounds: dict[int, Bound],
        track_cost: bool = True,
    ) -> None:
        self.source = source
        self.type = result
        self.cost = cost
        self.references = references
        self._root = root
        self._nslots = nslots  # macro variable slots the interpreter needs
        self._bounds = bounds  # id(node) -> size the estimate assumed for the node's value
        self._eval = Compiler(track=track_cost).compile(root)

    def __repr__(self) -> str:
        return f"Program({self.source!r}, type={self.type}, cost={self.cost})"

    @property
    def bound(self) -> Bound:
        """The size bound the estimate computed for the value (on inputs within their declared
        bounds): what a policy variable carries into the expressions that read it."""
        return self._bounds[id(self._root)]

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int) -> Any:
        """The exact path: the value for `activation` ("pod", "node", "cluster" -> views,
        "variables" -> {name: value}); CelEvalError for every CEL error, including a cost
        budget exceeded (CelCostError). A variable whose value is a CelEvalError instance
        fails where it is read, so `false && variables.broken` is still false."""
        return run(self._eval, activation, cost_limit=cost_limit, nslots=self._nslots)

    def emit(self, ctx: CodegenContext) -> str:
        """The fast path: Python source of one expression computing the value, reading inputs
        through `ctx.names` and using globals it adds to `ctx.globals`.

        Whenever CEL yields a value, the code yields exactly that value (same type); whenever
        CEL fails, it raises. It may also raise where CEL would not (error absorption, inputs
        larger than their declared sizes): run `evaluate` for that node then. When the
        estimate exceeds `ctx.cost_limit` the code counts cost through the exact path.
        """
        return emit_program(self, ctx)
