"""The hostile-policy corpus (issue 15): inputs a viewer can send to validate or preview.

Each case is rejected at validation with a positioned error, or evaluates within its budget with
the verdict CEL specifies, on both the generated-code and the exact path; none raises.
"""

from __future__ import annotations

import pytest

from policies.engine.policy import compile_policy, validate_policy

from .inputs import node_view, pod_view

HEADER = "name: t\nschedulerNames: [schedweb]\n"
NODES = [node_view("n1"), node_view("n2")]


def filter_policy(expression: str) -> str:
    return HEADER + f"filters:\n  - name: f\n    expression: {expression!r}\n"


def verdicts(text: str) -> dict[bool, list[bool]]:
    """passed[] per path (fast=True generated code, fast=False exact)."""
    policy = compile_policy(text)
    return {fast: policy.evaluate(pod_view(), NODES, fast=fast).passed for fast in (True, False)}


# --- numbers Python refuses to convert ------------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    ["9" * 5000, "-" + "9" * 5000, "0x" + "f" * 5000, "9" * 5000 + "u", "0" * 5000 + "1"],
)
def test_a_huge_int_literal_is_a_positioned_error_or_its_value(literal):
    text = filter_policy(f"{literal} > 0")
    errors = validate_policy(text)
    if literal.startswith("0" * 10):
        assert errors == []  # 000...01 is just 1
        return
    [error] = errors
    assert "out of range" in error.message
    assert (error.line, error.column) == (1, 1 + literal.startswith("-"))


@pytest.mark.parametrize(
    ("expression", "passes"),
    [
        # CEL: `error || true` is true and `error && false` is false, whatever the error
        (f'uint("{"9" * 5000}") > 0u || true', True),
        (f'int("{"9" * 5000}") > 0 || true', True),
        (f'uint("{"9" * 5000}") > 0u && false', False),
        (f'false && int("-{"9" * 5000}") < 0', False),
        # exists: one true absorbs the errors of the others; all: one false does
        (f'[1, 2].exists(x, x == 1 || uint("{"9" * 5000}") > 0u)', True),
        (f'["{"9" * 5000}", "1"].exists(x, uint(x) == 1u)', True),
        (f'["{"9" * 5000}", "1"].all(x, uint(x) == 7u)', False),
    ],
)
def test_errors_from_huge_numbers_are_absorbed_as_cel_specifies(expression, passes):
    assert verdicts(filter_policy(expression)) == {True: [passes] * 2, False: [passes] * 2}


def test_an_unabsorbed_conversion_error_is_a_clipped_cel_error_on_both_paths():
    policy = compile_policy(filter_policy(f'uint("{"9" * 5000}") > 0u'))
    for fast in (True, False):
        evaluation = policy.evaluate(pod_view(), NODES, fast=fast)
        message = evaluation.errors[0][0].message
        assert "cannot convert string" in message and len(message) < 300
