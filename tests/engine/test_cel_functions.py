"""Worked examples for what the oracle cannot check: schedweb's resource maps, the Kubernetes
quantity, lists and regex libraries, cluster helpers, variables, plus runtime errors and their
messages. Every example runs on the exact path and the fast path, which must agree."""

from __future__ import annotations

import math
from typing import Any

import pytest

from policies.engine.cel import CelEvalError, compile_expression, policy_env, types
from policies.engine.cel.values import TypeValue, UInt
from policies.engine.quantity import Quantity
from tests.engine.cel_cases import NODES, PODS, both_paths, fast_call, make_node, make_pod

BUDGET = 1_000_000
ENV = policy_env({"freeCpu": types.INT, "ratio": types.DOUBLE, "tags": types.list_of(types.STRING)})
GPU_NODE = NODES[1]  # allocatable nvidia_com_gpu 8, requested 6
EMPTY_NODE = NODES[2]  # no labels, no resources


def evaluate(
    source: str, *, pod: Any = None, node: Any = None, cluster: Any = None, variables: Any = None
) -> Any:
    program = compile_expression(source, ENV, cost_limit=BUDGET)
    act = {
        "pod": pod or PODS[0],
        "node": node or NODES[0],
        "cluster": cluster,
        "variables": variables or {},
    }
    return both_paths(program, act)


def error_of(source: str, **inputs: Any) -> str:
    with pytest.raises(CelEvalError) as raised:
        evaluate(source, **inputs)
    return raised.value.message


# -- resources ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "node", "expected"),
    [
        # node-a: allocatable cpu 4000, requested 1000; gpu-node-1: 95000 and 40000, gpus 8 and 6
        ("node.allocatable.cpu - node.requested.cpu", NODES[0], 3000),
        ("node.allocatable.nvidia_com_gpu", NODES[0], 0),  # absent reads as 0
        ("node.allocatable.nvidia_com_gpu - node.requested.nvidia_com_gpu", GPU_NODE, 2),  # 8 - 6
        ("node.allocatable['nvidia.com/gpu']", GPU_NODE, 8),  # names are normalised
        ("node.allocatable['nvidia.com/gpu']", NODES[0], 0),
        ("node.allocatable[pod.name]", NODES[0], 0),  # a computed name: 'web-1' -> web_1, absent
        ("node.requested.cpu * 100 / node.allocatable.cpu", GPU_NODE, 42),  # 4000000 / 95000 = 42.1
        ("node.capacity.memory", EMPTY_NODE, 0),
        ("has(node.allocatable.nvidia_com_gpu)", GPU_NODE, True),  # has() tests presence
        ("has(node.allocatable.nvidia_com_gpu)", NODES[0], False),
        ("'nvidia_com_gpu' in node.allocatable", NODES[0], False),
        ("size(node.allocatable)", NODES[0], 3),  # cpu, memory, pods
        (
            "node.allocatable.filter(r, node.allocatable[r] > 200).size()",
            NODES[0],
            2,
        ),  # cpu, memory
        ("node.allocatable.exists(r, r == 'pods')", EMPTY_NODE, False),
    ],
)
def test_resource_maps_read_absent_resources_as_zero(source: str, node: Any, expected: Any) -> None:
    assert evaluate(source, node=node) == expected


def test_plain_dict_resources_also_read_absent_as_zero_on_the_exact_path() -> None:
    node = make_node(allocatable={"cpu": 2000}, requested={})
    program = compile_expression(
        "node.allocatable.memory + node.requested.cpu", ENV, cost_limit=BUDGET
    )
    assert program.evaluate({"node": node}, cost_limit=BUDGET) == 0
    with pytest.raises(
        KeyError
    ):  # the fast path may raise; the policy layer then runs the exact path
        fast_call(program, {"node": node})


# -- quantity library --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("quantity('1Gi') == quantity('1024Mi')", True),  # 2^30 both
        ("quantity('1G') == quantity('1Gi')", False),  # 10^9 vs 2^30
        ("isQuantity('1.5Gi')", True),
        ("isQuantity('1.5x')", False),
        ("quantity('500m').isInteger()", False),
        ("quantity('2k').asInteger()", 2000),
        ("quantity('1.5').asApproximateFloat()", 1.5),
        ("quantity('-3').sign()", -1),
        ("quantity('1Gi').add(quantity('512Mi')) == quantity('1536Mi')", True),
        ("quantity('1').add(2) == quantity('3')", True),
        ("quantity('1').sub(quantity('1500m')).sign()", -1),  # 1 - 1.5 = -0.5
        ("quantity('100m').isLessThan(quantity('0.2'))", True),
        ("quantity('2').isGreaterThan(quantity('2000m'))", False),
        ("quantity('1Ki').compareTo(quantity('1k'))", 1),  # 1024 > 1000
        ("quantity(pod.object.metadata.name + 'm').isInteger()", None),  # 'web-1m' is no quantity
    ],
)
def test_the_quantity_library_compares_exact_values(source: str, expected: Any) -> None:
    if expected is None:
        assert "invalid quantity" in error_of(source)
        return
    result = evaluate(source)
    assert result == expected and type(result) is type(expected)


def test_a_quantity_is_a_quantity_value() -> None:
    result = evaluate("quantity('250m')")
    assert isinstance(result, Quantity) and result.value * 1000 == 250
    assert "cannot convert quantity '1500m' to an int64" in error_of(
        "quantity('1500m').asInteger()"
    )


# -- lists library (Kubernetes) ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("[1, 2, 2, 5].isSorted()", True),
        ("[3, 1].isSorted()", False),
        ("['a', 'b'].isSorted()", True),
        ("[1, 2, 3].sum()", 6),
        ("[1.5, 2.5].sum()", 4.0),
        ("[1u, 2u].sum()", UInt(3)),
        ("[].sum()", 0),
        ("[3, -1, 2].min()", -1),
        ("[3, -1, 2].max()", 3),
        ("['b', 'a'].min()", "a"),
        ("[1, 2, 1].indexOf(1)", 0),
        ("[1, 2, 1].lastIndexOf(1)", 2),
        ("['a'].indexOf('z')", -1),
        ("node.taints.map(t, t.effect).indexOf('NoExecute')", -1),  # node-a has no taints
    ],
)
def test_the_lists_library(source: str, expected: Any) -> None:
    result = evaluate(source)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("[].min()", "min() called on an empty list"),
        ("[9223372036854775807, 1].sum()", "integer overflow"),  # 2^63 - 1 + 1 overflows
        ("[1, 'a'].max()", "no matching overload for 'max'"),
    ],
)
def test_the_lists_library_reports_errors(source: str, message: str) -> None:
    assert message in error_of(source)


# -- regex library and strings ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("'abc 123 def 456'.find('[0-9]+')", "123"),
        ("'abc'.find('[0-9]+')", ""),
        ("'abc 123 def 456'.findAll('[0-9]+')", ["123", "456"]),
        ("'a1b2c3'.findAll('[0-9]', 2)", ["1", "2"]),
        ("'axb'.findAll('x*')", ["", "x", ""]),  # Go skips the empty match right after "x"
        ("'tacocat'.substring(4)", "cat"),  # examples from the CEL strings extension docs
        ("'tacocat'.substring(0, 4)", "taco"),
        ("'tacocat'.substring(4, 7)", "cat"),  # end == size() is allowed (cel-cpp 0.1.3 errs)
        ("'tacocat'.substring(7, 7)", ""),
        ("'hello mellow'.indexOf('ello', 2)", 7),
        ("'hello mellow'.lastIndexOf('ello', 6)", 1),
        ("'TacoCÆt Xii'.lowerAscii()", "tacocÆt xii"),
        ("'  \\ttrim\\n '.trim()", "trim"),
        ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
        ("'hello hello'.split(' ', 0)", []),
        ("['a', 'b'].join(', ')", "a, b"),
        ("'ab\\nc'.matches('b$')", False),  # RE2: $ is the end of text, not before a newline
        ("'ab\\nc'.matches('(?m)b$')", True),
        ("'Ab'.matches('(?i)ab')", True),
        ("'é'.matches('\\\\w')", False),  # RE2's \\w is ASCII
        ("'x\\u000by'.matches('x\\\\sy')", False),  # RE2's \\s excludes \\v
        ("matches('node-12', '^node-[0-9]+$')", True),
    ],
)
def test_string_and_regex_functions(source: str, expected: Any) -> None:
    assert evaluate(source) == expected


# -- math -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("math.greatest(0, math.least(100, 250))", 100),  # clamp 250 into 0..100
        ("math.greatest(0, math.least(100, -4))", 0),
        ("math.greatest([3, 9, 4])", 9),
        ("math.least(2.5, 1.5, 3.5)", 1.5),
        ("math.abs(-7)", 7),
        ("math.ceil(1.2)", 2.0),
        ("math.floor(-1.2)", -2.0),
        ("math.round(2.5)", 3.0),  # half away from zero, not to even
        ("math.round(-2.5)", -3.0),
        ("math.trunc(-1.7)", -1.0),
        ("math.sign(-4)", -1),
        ("math.isInf(1.0 / 0.0)", True),
        ("math.isFinite(1.0)", True),
    ],
)
def test_math_functions(source: str, expected: Any) -> None:
    result = evaluate(source)
    assert result == expected and type(result) is type(expected)


# -- cluster helpers -------------------------------------------------------------------------------------
class FakeCluster:
    """Counts from a fixed table, recording calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def count_pods(self, namespace: str, selector: dict[str, str]) -> int:
        self.calls.append(("count_pods", namespace, dict(selector)))
        return 4 if selector.get("pod-group") == "g1" else 0

    def count_pods_on_node(self, node_name: str, namespace: str, selector: dict[str, str]) -> int:
        self.calls.append(("count_pods_on_node", node_name, namespace, dict(selector)))
        return 2 if node_name == "node-a" else 0

    def count_pods_in_domain(
        self, key: str, value: str, namespace: str, selector: dict[str, str]
    ) -> int:
        self.calls.append(("count_pods_in_domain", key, value, namespace, dict(selector)))
        return 7 if (key, value) == ("zone", "a") else 1

    def node_count(self) -> int:
        return 5


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # gang admission (seed 002): admit when the group has its minimum, here 4 of 4
        ("cluster.countPods(pod.namespace, {'pod-group': pod.labels['pod-group']}) >= 4", True),
        ("cluster.countPodsOnNode(node.name, '', {'app': 'trainer'})", 2),
        ("cluster.countPodsInDomain('zone', node.labels.zone, '', pod.labels)", 7),
        (
            "100 - cluster.countPodsInDomain('zone', node.labels.zone, '', pod.labels) * 100 / cluster.nodeCount()",
            -40,
        ),
    ],
)
def test_cluster_helpers_call_the_cluster_view(source: str, expected: Any) -> None:
    cluster = FakeCluster()
    assert evaluate(source, pod=PODS[1], cluster=cluster) == expected
    assert cluster.calls or "nodeCount" in source


def test_cluster_helpers_pass_the_arguments_in_order() -> None:
    cluster = FakeCluster()
    evaluate("cluster.countPodsInDomain('zone', 'b', 'ml', {'app': 'x'})", cluster=cluster)
    assert cluster.calls[0] == ("count_pods_in_domain", "zone", "b", "ml", {"app": "x"})


# -- variables, inputs and value types ------------------------------------------------------------------------
def test_variables_are_read_from_the_activation() -> None:
    variables = {"freeCpu": 3000, "ratio": 0.25, "tags": ["a", "b"]}
    assert evaluate("variables.freeCpu >= pod.requests.cpu", variables=variables) is True
    assert evaluate("variables.ratio * 4.0", variables=variables) == 1.0
    assert evaluate("variables.tags.join('+')", variables=variables) == "a+b"


def test_a_failed_variable_fails_where_it_is_read_and_is_absorbed_like_any_error() -> None:
    program = compile_expression("false && variables.freeCpu > 0", ENV, cost_limit=BUDGET)
    failed = {"freeCpu": CelEvalError("division by zero")}
    assert program.evaluate({"variables": failed}, cost_limit=BUDGET) is False
    program = compile_expression("variables.freeCpu > 0", ENV, cost_limit=BUDGET)
    with pytest.raises(CelEvalError, match="division by zero"):
        program.evaluate({"variables": failed}, cost_limit=BUDGET)


def test_tuples_are_accepted_where_lists_are_expected() -> None:
    node = make_node(taints=({"key": "a", "value": "", "effect": "NoSchedule"},))
    assert evaluate("node.taints.exists(t, t.effect == 'NoSchedule')", node=node) is True
    assert evaluate("node.taints + node.taints", node=node) == [node["taints"][0]] * 2
    assert (
        evaluate(
            "dyn(node.taints) == [{'key': 'a', 'value': '', 'effect': 'NoSchedule'}]", node=node
        )
        is True
    )


def test_uint_and_type_values_stay_distinct_from_int() -> None:
    assert type(evaluate("1u + 2u")) is UInt
    assert evaluate("type(1u) == uint") is True
    assert evaluate("type(1u) == int") is False
    assert evaluate("type(node) == type(pod)") is False  # Node and Pod
    assert evaluate("type(node.labels)") == TypeValue("map")
    assert repr(evaluate("dyn(7u)")) == "7u"


def test_a_missing_input_is_an_evaluation_error() -> None:
    program = compile_expression("node.name", ENV, cost_limit=BUDGET)
    with pytest.raises(CelEvalError, match="no value for input 'node'"):
        program.evaluate({"pod": make_pod()}, cost_limit=BUDGET)


# -- runtime errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "node", "message"),
    [
        ("node.requested.cpu * 100 / node.allocatable.cpu", EMPTY_NODE, "division by zero"),
        ("node.podCount % node.allocatable.cpu", EMPTY_NODE, "modulus by zero"),
        ("node.allocatable.cpu * 2", NODES[4], "integer overflow"),  # (2^63 - 1) * 2
        (
            "node.allocatable.cpu - node.requested.cpu",
            NODES[4],
            "integer overflow",
        ),  # (2^63-1) - (1-2^63)
        ("node.podCount + 1", NODES[4], "integer overflow"),
        ("-(node.requested.cpu - 1)", NODES[4], "integer overflow"),  # -(-2^63)
        ("node.labels.zone", EMPTY_NODE, "no such key: 'zone'"),
        ("node.labels['team']", NODES[0], "no such key: 'team'"),
        ("node.object.spec.missing", NODES[0], "no such key: 'missing'"),
        ("node.taints[0]", NODES[0], "index out of range: index 0, size 0"),
        ("[1, 2][node.podCount - 5]", NODES[0], "index out of range: index -2"),
        ("int(node.annotations.ratio)", NODES[3], "cannot convert string '0.75' to int"),
        (
            "node.object.metadata.name + 1",
            NODES[0],
            "no matching overload for '+' applied to (string, int)",
        ),
        (
            "node.object.spec.podCIDR.all(c, true)",
            NODES[0],
            "macros iterate over a list or a map, not string",
        ),
        (
            "node.object.metadata.name.size() > 2 && node.object.spec.x",
            NODES[0],
            "no such key: 'x'",
        ),
        ("uint(node.podCount) - 5u", NODES[0], "unsigned integer overflow"),  # 3 - 5
    ],
)
def test_runtime_errors_say_what_went_wrong(source: str, node: Any, message: str) -> None:
    assert message in error_of(source, node=node)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1.0 / 0.0", math.inf),  # doubles follow IEEE
        ("-1.0 / 0.0", -math.inf),
        ("7 / -2", -3),  # ints truncate toward zero
        ("-7 % 3", -1),  # the remainder takes the dividend's sign
        ("-9223372036854775807 - 1", -(2**63)),
    ],
)
def test_arithmetic_follows_cel(source: str, expected: Any) -> None:
    result = evaluate(source)
    assert result == expected and type(result) is type(expected)
