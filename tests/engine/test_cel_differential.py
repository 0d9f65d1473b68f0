"""Differential test: our exact path and our generated fast path against Google's C++ CEL runtime
(cel-expr-python), over hand-written and seeded random expressions, on every pod x node pair of
a varied input set. Results must be identical values of identical type, or errors on both sides.

The fast path may raise where CEL absorbs an error (the policy layer then runs the exact path),
but it must never return a value CEL would not. Known deviations of the oracle are documented in
test_cel_functions.py (cel-cpp 0.1.3's substring(start, end) rejects end == size()).
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.engine.cel import CelCompileError, CelCostError, CelEvalError, compile_expression
from tests.engine.cel_cases import (
    ENV,
    NODES,
    PODS,
    Oracle,
    activation,
    fast_function,
    typed,
    unordered,
)
from tests.engine.cel_differential_cases import CASES
from tests.engine.cel_generator import ExpressionGenerator, render

BUDGET = 10**12
GENERATED = [
    render(e, for_oracle=False) for e in ExpressionGenerator(seed=20251122).expressions(320)
]
ORACLE_GENERATED = {
    render(e, for_oracle=False): render(e, for_oracle=True)
    for e in ExpressionGenerator(seed=20251122).expressions(320)
}
INPUTS = [(pod, node) for pod in PODS for node in NODES]
ABSORBING = ("&&", "||", ".all(", ".exists(")


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle()


def outcome(run: Any) -> tuple[str, Any]:
    try:
        return "value", typed(run())
    except CelEvalError as e:
        return "error", e.message


def check_against_oracle(oracle: Oracle, source: str, oracle_source: str, flags: str) -> None:
    program = compile_expression(source, ENV, cost_limit=BUDGET)
    expected_program = oracle.compile(oracle_source)
    fast_paths = {
        "fast": fast_function(program),
        "fast, unfolded": fast_function(program, fold_constants=False),
    }
    may_absorb = "absorbs" in flags or (
        flags == "generated" and any(t in source for t in ABSORBING)
    )
    for pod, node in INPUTS:
        where = f"{source!r} on pod {pod['name']}, node {node['name']}"
        expected = oracle.evaluate(expected_program, pod, node)
        # The estimate bounds the actual cost on inputs within the declared sizes.
        try:
            exact = outcome(
                lambda pod=pod, node=node: program.evaluate(
                    activation(pod, node), cost_limit=program.cost
                )
            )
        except CelCostError as e:  # pragma: no cover - explained by the message
            raise AssertionError(f"{where}: actual cost passed the estimate: {e}") from None
        if "unordered" in flags and expected[0] == "value":
            expected, exact = ("value", unordered(expected[1])), ("value", unordered(exact[1]))
        if expected[0] == "error":
            assert exact[0] == "error", (
                f"{where}: oracle fails ({expected[1]}), exact path gives {exact}"
            )
        else:
            assert exact == expected, f"{where}: exact path {exact} != oracle {expected}"
        for name, fast in fast_paths.items():
            try:
                value = typed(fast(pod, node))
            except Exception as e:
                assert exact[0] == "error" or may_absorb, (
                    f"{where}: {name} path raised {e!r} where CEL gives {exact[1]}"
                )
                continue
            if "unordered" in flags:
                value = unordered(value)
            assert exact[0] == "value", (
                f"{where}: {name} path returned {value} where CEL fails: {exact[1]}"
            )
            assert value == exact[1], f"{where}: {name} path {value} != exact path {exact[1]}"


@pytest.mark.parametrize(("source", "flags"), CASES, ids=[c for c, _ in CASES])
def test_hand_written_expressions_agree_with_cel_cpp(
    oracle: Oracle, source: str, flags: str
) -> None:
    check_against_oracle(oracle, source, source, flags)


@pytest.mark.parametrize("source", GENERATED, ids=[f"gen{i}" for i in range(len(GENERATED))])
def test_generated_expressions_agree_with_cel_cpp(oracle: Oracle, source: str) -> None:
    try:
        check_against_oracle(oracle, source, ORACLE_GENERATED[source], "generated")
    except CelCompileError as e:  # pragma: no cover - the generator only builds well-typed input
        raise AssertionError(f"generated expression does not compile: {source!r}: {e}") from None


def test_the_differential_set_is_large_and_varied() -> None:
    assert len(CASES) >= 200 and len(GENERATED) >= 300
    assert len(set(GENERATED)) >= 250  # few duplicates among the random expressions
    assert len(INPUTS) >= 12
    # the generator reaches every kind of result and run-time errors as well as values
    program_types = {str(compile_expression(s, ENV, cost_limit=BUDGET).type) for s in GENERATED}
    assert {
        "bool",
        "int",
        "uint",
        "double",
        "string",
        "list(int)",
        "list(string)",
        "dyn",
    } <= program_types


ILL_TYPED = [
    "1 + 1u",
    "1 < 1.5",
    "1 == 1u",
    "[1] + ['a']",
    "[1] == [1.0]",
    "'a' == b'a'",
    "true ? 1 : 'a'",
    "-(1u)",
    "5.0 % 2.0",
    "'abc'[0]",
    "int(true)",
    "math.ceil(1)",
    "{'a': 1} + {'b': 2}",
    "math.greatest('a', 'b')",
    "math.greatest([])",
    "[1, 2].all(x, x)",
    "string(int)",
    "{1: 'a'}[1u]",
    "'a'.size(1)",
    "undeclared + 1",
]


@pytest.mark.parametrize("source", ILL_TYPED)
def test_expressions_cel_cpp_rejects_at_compile_time_are_rejected_too(
    oracle: Oracle, source: str
) -> None:
    with pytest.raises(Exception):  # noqa: B017 - cel-expr-python raises a bare RuntimeError
        oracle.compile(source)
    with pytest.raises(CelCompileError):
        compile_expression(source, ENV, cost_limit=BUDGET)
