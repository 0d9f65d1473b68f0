"""Cost: the static worst-case estimate from declared input bounds, the compile-time budget
check, and the run-time count on both paths."""

from __future__ import annotations

import pytest

from policies.engine.cel import (
    CelCompileError,
    CelCostError,
    CelEvalError,
    CodegenContext,
    compile_expression,
    policy_env,
)
from tests.engine.cel_cases import NODES, PODS, activation, make_node

ENV = policy_env()
BIG = 10**12


@pytest.mark.parametrize(
    ("source", "cost"),
    [
        # every node costs 1: >= and - (2), three selections of two fields from an input (3 each)
        ("node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu", 2 + 3 * 3),
        ("1", 1),
        ("pod.name", 2),
        # a macro: 1 + range (2) + 64 labels x (1 per step + startsWith (1) + k (1) + 'a' (1)
        # + ceil(len('a') / 10) = 1)
        ("node.labels.exists(k, k.startsWith('a'))", 1 + 2 + 64 * (1 + 4)),
        # string traversal: contains on a 253-character name costs ceil(253 / 10) = 26 more
        ("node.name.contains('x')", 1 + 2 + 1 + 26),
        # concatenation: ceil((253 + 1) / 10) = 26 on top of 1 + 2 + 1
        ("node.name + '!'", 1 + 2 + 1 + 26),
        # regex: ceil((1 + 253) * 0.1) = 26 times ceil(len('^a+$') * 0.25) = 1
        ("node.name.matches('^a+$')", 1 + 2 + 1 + 26 * 1),
        # ternary: the dearer branch counts
        ("true ? node.name.contains('x') : false", 1 + 1 + 30),
        # nested macros multiply: 64 taints x 64 tolerations; a comparison of two keys costs
        # 1 + operands + their common length, ceil(min(317, 317) / 10) = 32 (cel-go's formula)
        (
            "node.taints.all(t, pod.tolerations.exists(o, o.key == t.key))",
            1 + 2 + 64 * (1 + (1 + 2 + 64 * (1 + (1 + 2 + 2 + 32)))),
        ),
        # a comparison with a literal reads at most the literal: ceil(min(253, 3) / 10) = 1
        ("node.name == 'abc'", 1 + 2 + 1 + 1),
        ("node.name < pod.name", 1 + 2 + 2 + 26),
        # a map lookup reads its key: ceil(len('zone') / 10) = 1; `in` a map the same
        ("node.labels['zone'] == 'a'", 1 + (1 + 2 + 1 + 1) + 1 + 1),
        ("'zone' in node.labels", 1 + 1 + 2 + 1),
        # `in` a list: each of 64 tolerations' keys compared with a 253-character name
        ("pod.name in pod.tolerations.map(o, o.key)", 1 + 2 + (1 + 2 + 64 * (1 + 2)) + 64 * 27),
        # contains: the product of both traversals, as cel-go: 26 x ceil(63 / 10) = 182
        ("node.name.contains(pod.namespace)", 1 + 2 + 2 + 26 * 7),
        # an empty pattern still scans the text: 26 x 1
        ("node.name.matches('')", 1 + 2 + 1 + 26),
    ],
)
def test_it_estimates_the_worst_case_cost(source: str, cost: int) -> None:
    assert compile_expression(source, ENV, cost_limit=BIG).cost == cost


def test_a_macro_over_the_raw_object_can_exceed_the_budget_at_compile_time() -> None:
    source = "node.object.spec.containers.all(c, c.name.matches('^a.*z$'))"
    # range: node.object.spec.containers = 4; 1000 elements (dyn) each costing 1 (step) + 1
    # (call) + 2 (c.name) + 1 (pattern) + ceil((1 + 10000) * 0.1) * ceil(6 * 0.25) = 1001 * 2
    expected = 1 + 4 + 1000 * (1 + 1 + 2 + 1 + 1001 * 2)
    assert expected == 2_007_005
    with pytest.raises(CelCompileError) as raised:
        compile_expression(source, ENV, cost_limit=1_000_000)
    (issue,) = raised.value.issues
    assert issue.kind == "cost"
    assert issue.message == (
        "estimated cost 2007005 exceeds the budget 1000000 (the all() over node.object.spec.containers"
        " at line 1, column 29 dominates)"
    )
    assert (issue.line, issue.column) == (1, 29)


def test_the_budget_check_names_the_dominant_function_call() -> None:
    with pytest.raises(CelCompileError) as raised:
        compile_expression("pod.object.metadata.name.matches('a' + 'b')", ENV, cost_limit=500)
    assert "(the matches() on pod.object.metadata.name at line 1, column 26 dominates)" in str(
        raised.value
    )


def test_the_run_time_count_stops_an_evaluation_over_its_budget() -> None:
    node = make_node(object={"items": list(range(100))})
    program = compile_expression("node.object.items.all(x, x >= 0)", ENV, cost_limit=BIG)
    assert program.evaluate({"node": node}, cost_limit=10_000) is True
    # 1 + 3 for the range, then each element: 1 (step) + 3 (x >= 0); 50 passes after 12 steps
    with pytest.raises(CelCostError) as raised:
        program.evaluate({"node": node}, cost_limit=50)
    assert raised.value.message.startswith("cost budget exceeded: ")
    assert raised.value.message.endswith(" > 50")
    assert isinstance(raised.value, CelEvalError)


def test_a_cost_error_is_never_absorbed_by_and_or_or_macros() -> None:
    node = make_node(object={"items": list(range(100))})
    for source in (
        "node.object.items.exists(x, x < 0) || true",
        "node.object.items.all(x, x >= 0) && false",
        "[1, 2].exists(y, node.object.items.all(x, x > -y))",
    ):
        program = compile_expression(source, ENV, cost_limit=BIG)
        with pytest.raises(CelCostError):
            program.evaluate({"node": node}, cost_limit=60)


def test_the_fast_path_counts_cost_when_the_estimate_exceeds_its_limit() -> None:
    node = make_node(object={"items": list(range(100))})
    program = compile_expression("node.object.items.all(x, x >= 0)", ENV, cost_limit=BIG)
    ctx = CodegenContext({"node": "node"}, cost_limit=50)
    code = program.emit(ctx)
    fast = eval(f"lambda node: {code}", ctx.globals)
    with pytest.raises(CelCostError):
        fast(node)
    small = make_node(object={"items": [1, 2]})
    assert fast(small) is True  # 1 + 3 + 2 * 4 = 12 <= 50


def test_the_fast_path_needs_no_counting_within_the_estimate() -> None:
    program = compile_expression("node.labels.exists(k, k == 'zone')", ENV, cost_limit=BIG)
    ctx = CodegenContext({"node": "node"}, cost_limit=program.cost)
    assert "exact" not in program.emit(ctx)  # plain generated code, no call into the interpreter


@pytest.mark.parametrize("node", NODES, ids=lambda n: n["name"])
@pytest.mark.parametrize(
    "source",
    [
        "node.labels.all(k, node.labels[k].size() < 64 && k.contains('/'))",
        "node.taints.exists(t, pod.tolerations.exists(o, o.key == t.key && (o.effect == '' || o.effect == t.effect)))",
        "node.annotations.exists(k, node.annotations[k].matches('^[0-9.]+$'))",
        "node.name.split('-').map(p, p.upperAscii()).join('.') + pod.name",
        "[node.name, pod.namespace].filter(s, s.startsWith('n')).size() + size(node.allocatable)",
    ],
)
def test_the_actual_cost_never_exceeds_the_estimate_on_inputs_within_bounds(
    source: str, node: dict
) -> None:
    program = compile_expression(source, ENV, cost_limit=BIG)
    for pod in PODS:
        try:
            program.evaluate(activation(pod, node), cost_limit=program.cost)
        except CelCostError:  # pragma: no cover - the assertion below explains
            raise AssertionError(f"actual cost passed the estimate {program.cost}") from None
        except CelEvalError:
            pass  # a CEL error (a missing key) is fine here; only the budget matters


@pytest.mark.parametrize(
    ("source", "node"),
    [
        # 100 taints where 64 are declared: the macro's range is larger than the estimate assumed
        (
            "node.taints.exists(t, t.key == 'x')",
            make_node(
                taints=[{"key": f"k{i}", "value": "", "effect": "NoSchedule"} for i in range(100)]
            ),
        ),
        # a 300-character name where 253 are declared, read by a size-charged function
        ("node.name.contains('x')", make_node(name="n" * 300)),
        ("node.name + node.labels.zone == 'x'", make_node(name="n" * 300)),
    ],
)
def test_the_fast_path_hands_inputs_larger_than_declared_to_the_exact_path(
    source: str, node: dict
) -> None:
    program = compile_expression(source, ENV, cost_limit=BIG)
    ctx = CodegenContext({"node": "node"})
    fast = eval(f"lambda node: {program.emit(ctx)}", ctx.globals)
    with pytest.raises(Exception):  # noqa: B017 - any exception sends the node to the exact path
        fast(node)
    assert program.evaluate({"node": node}, cost_limit=BIG) is False
    assert fast(make_node()) is False  # inputs within their declared sizes run the fast path


# -- variables carry their size bound into the expressions that read them (issue 15) -------------
LABEL_PAIRS = 'node.labels.map(k, k + "=" + node.labels[k])'
QUADRATIC = "variables.big.all(x, variables.big.exists(y, y == x))"


def test_a_variable_read_estimates_with_the_bound_of_its_expression() -> None:
    variable = compile_expression(LABEL_PAIRS, ENV, cost_limit=BIG)
    # 64 labels: a list of at most 64 strings of at most 317 + 1 + 63 characters
    assert (variable.bound.items, variable.bound.element().chars) == (64, 381)
    carried = policy_env({"big": variable.type}, bounds={"big": variable.bound})
    unbounded = policy_env({"big": variable.type})
    tight = compile_expression(QUADRATIC, carried, cost_limit=BIG)
    loose = compile_expression(QUADRATIC, unbounded, cost_limit=BIG)
    # the same loops as over the labels themselves (64 entries, a step 1 + the comparison 3 +
    # the pair's common length: ceil(381 / 10) = 39 for these strings, 32 for label keys):
    # 3 + 64 x (1 + 3 + 64 x (1 + 3 + 39)) = 176 387 and 3 + 64 x (1 + 3 + 64 x 36) = 147 715;
    # the type alone (a list of up to 1000 strings of 10 000 characters) makes it billions
    same_loops = compile_expression(
        QUADRATIC.replace("variables.big", "node.labels"), ENV, cost_limit=BIG
    )
    assert (tight.cost, same_loops.cost) == (176_387, 147_715)
    assert loose.cost > 1_000_000
    with pytest.raises(CelCompileError, match="exceeds the budget 1000000"):
        compile_expression(QUADRATIC, unbounded, cost_limit=1_000_000)


def test_bounds_carry_through_a_chain_of_variables_in_a_policy() -> None:
    from policies.engine.policy import compile_policy, validate_policy

    from .inputs import node_view, pod_view

    doc = (
        "name: t\nschedulerNames: [schedweb]\nvariables:\n"
        f"  - name: big\n    expression: '{LABEL_PAIRS}'\n"
        "  - name: long\n    expression: 'variables.big.filter(x, x.size() > 3)'\n"
        "filters:\n"
        "  - name: f\n    expression: 'variables.long.all(x, variables.big.exists(y, y == x))'\n"
    )
    assert validate_policy(doc) == []  # 4004003 when variables were sized by their type
    policy = compile_policy(doc)
    assert policy.variables["long"].program.bound.items == 64
    assert policy.filters[0].program.cost < 200_000
    # a node with more labels than declared: the exact path counts, the fast path hands it over
    crowded = node_view("crowded", labels={f"k{i}": "v" for i in range(500)})
    nodes = [node_view("n1", labels={"zone": "a"}), crowded]
    for fast in (True, False):
        evaluation = policy.evaluate(pod_view(), nodes, fast=fast)
        assert evaluation.passed == [True, True], (fast, evaluation.errors)
