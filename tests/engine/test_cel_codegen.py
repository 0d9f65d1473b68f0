"""The fast path as the policy layer uses it: generated source embedded in host code, names
resolved through a CodegenContext, globals shared across several expressions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from policies.engine.cel import CodegenContext, compile_expression, policy_env, types
from policies.engine.inputs import ResourceMap
from tests.engine.cel_cases import NODES, PODS, activation, make_node

BUDGET = 1_000_000
ENV = policy_env({"freeCpu": types.INT})


def program(source: str):
    return compile_expression(source, ENV, cost_limit=BUDGET)


def test_one_context_serves_several_expressions_with_unique_global_names() -> None:
    ctx = CodegenContext({"pod": "pod", "node": "node", "variables.freeCpu": "v_free"})
    sources = [
        "node.name.matches('^node-[a-z]$')",
        "pod.name.matches('^web-[0-9]+$')",
        "node.podCount + 1 > variables.freeCpu",
        "node.labels.exists(k, k in ['zone', 'team'])",
    ]
    codes = [program(s).emit(ctx) for s in sources]
    assert all(name.startswith("_cel") for name in ctx.globals)
    # the two regular expressions are two different precompiled patterns
    patterns = [name for name in ctx.globals if name.endswith("_re")]
    assert len(patterns) == 2
    namespace = dict(ctx.globals)
    exec("def run(pod, node, v_free):\n    return [" + ", ".join(codes) + "]\n", namespace)
    assert namespace["run"](PODS[0], NODES[0], 2) == [True, True, True, True]
    assert namespace["run"](PODS[0], NODES[2], 2) == [False, True, False, False]


def test_generated_code_works_in_a_for_loop_a_comprehension_and_a_lambda() -> None:
    # a range holding an assignment expression must be hoisted out of the comprehension
    source = "[node.podCount + 1, node.podCount * 2].all(x, [x - 1].exists(y, y + 1 == x)) && node.podCount - 1 >= 0"
    ctx = CodegenContext({"node": "node"})
    code = program(source).emit(ctx)
    assert ":=" in code
    namespace = dict(ctx.globals)
    exec(
        "def loop(nodes):\n"
        "    out = []\n"
        "    for node in nodes:\n"
        f"        out.append({code})\n"
        "    return out\n"
        f"def comprehension(nodes):\n    return [{code} for node in nodes]\n"
        f"by_lambda = lambda node: {code}\n",
        namespace,
    )
    nodes = [NODES[0], NODES[2]]  # podCount 3 and 0
    expected = [True, False]
    assert namespace["loop"](nodes) == expected
    assert namespace["comprehension"](nodes) == expected
    assert [namespace["by_lambda"](n) for n in nodes] == expected


def test_names_may_be_arbitrary_python_expressions() -> None:
    ctx = CodegenContext({"node": "nodes[i]", "pod": "state.pod"})
    code = program("node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu").emit(ctx)

    class State:
        pod = PODS[0]

    namespace = dict(ctx.globals, nodes=NODES, state=State)
    assert [eval(code, namespace, {"i": i}) for i in range(3)] == [True, True, False]


def test_a_missing_name_is_reported_when_emitting() -> None:
    with pytest.raises(
        ValueError, match=r"no Python expression for CEL input 'variables\.freeCpu'"
    ):
        program("variables.freeCpu > 0").emit(CodegenContext({"pod": "pod"}))


def test_typed_arithmetic_is_inlined_without_calls() -> None:
    ctx = CodegenContext({"pod": "pod", "node": "node"})
    code = program("node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu").emit(ctx)
    # one subtraction with an int64 range check; the only call is the overflow error
    assert code.count("node['allocatable']['cpu'] - node['requested']['cpu']") == 1
    assert list(ctx.globals) == [name for name in ctx.globals if name.endswith("_overflow")]


@pytest.mark.parametrize(
    ("source", "expected_fragment"),
    [
        ("size(node.name) + 1", "(len(node['name']) + 1)"),  # sizes are small: no range check
        ("20 - size(node.name)", "(20 - len(node['name']))"),
        ("node.podCount / 2", "//"),  # division by a positive constant is inlined
        ("node.labels.zone in ['a', 'b']", "_set"),  # a constant list becomes a frozenset
        ("quantity('1Gi').asInteger()", "1073741824"),  # input-free parts are precomputed
    ],
)
def test_the_generator_uses_static_knowledge(source: str, expected_fragment: str) -> None:
    ctx = CodegenContext({"node": "node"})
    assert expected_fragment in program(source).emit(ctx)


def test_very_deep_generated_code_runs_the_exact_path_instead() -> None:
    # 90 checked additions nest 180 parentheses, more than Python's parser accepts
    source = "node.podCount" + " + 1" * 90
    p = program(source)
    ctx = CodegenContext({"node": "node"})
    code = p.emit(ctx)
    assert "exact" in code
    fast = eval(f"lambda node: {code}", ctx.globals)
    assert fast(NODES[0]) == 3 + 90 == p.evaluate(activation(PODS[0], NODES[0]), cost_limit=BUDGET)


def test_the_fast_path_raises_rather_than_return_a_wrong_value() -> None:
    huge = NODES[4]  # cpu 2^63 - 1
    for source in (
        "node.allocatable.cpu * 100 / 100",  # overflows before the division brings it back
        "node.allocatable.cpu + 1 - 1",
        "[1, 2, 3][node.podCount - 9223372036854775807 - 1]",  # index -1
    ):
        ctx = CodegenContext({"node": "node"})
        fast = eval(f"lambda node: {program(source).emit(ctx)}", ctx.globals)
        with pytest.raises(Exception):  # noqa: B017 - any exception sends the node to the exact path
            fast(huge)


def test_resource_maps_given_as_resource_map_need_no_fallback() -> None:
    ctx = CodegenContext({"node": "node"})
    fast = eval(f"lambda node: {program('node.allocatable.nvidia_com_gpu').emit(ctx)}", ctx.globals)
    assert fast(make_node(allocatable=ResourceMap(cpu=1))) == 0


def test_the_engine_imports_neither_django_nor_kubernetes() -> None:
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, policies.engine.cel\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'kubernetes'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
