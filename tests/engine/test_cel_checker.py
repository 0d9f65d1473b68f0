"""Type checking: names, fields, resources, overloads, expected result types, and that every
issue is reported at once with its position."""

from __future__ import annotations

import pytest

from policies.engine.cel import CelCompileError, Env, Issue, compile_expression, policy_env, types

BUDGET = 1_000_000
ENV = policy_env({"freeCpu": types.INT, "zone": types.STRING, "gpus": types.list_of(types.INT)})


def issues_of(source: str, env: Env = ENV, **kwargs: object) -> list[Issue]:
    with pytest.raises(CelCompileError) as raised:
        compile_expression(source, env, cost_limit=BUDGET, **kwargs)
    return raised.value.issues


def only_issue(source: str, **kwargs: object) -> Issue:
    issues = issues_of(source, **kwargs)
    assert len(issues) == 1, issues
    return issues[0]


@pytest.mark.parametrize(
    ("source", "column", "message"),
    [
        # unknown fields name the type and suggest the nearest field, at the field's position
        (
            "node.alocatable.cpu",
            6,
            "undefined field 'alocatable' on Node; did you mean 'allocatable'?",
        ),
        (
            "pod.nodeselector",
            5,
            "undefined field 'nodeselector' on Pod; did you mean 'nodeSelector'?",
        ),
        (
            "node.taints[0].efect == 'NoSchedule'",
            16,
            "undefined field 'efect' on Taint; did you mean 'effect'?",
        ),
        (
            "pod.tolerations.all(t, t.operater == 'Exists')",
            26,
            "undefined field 'operater' on Toleration; did you mean 'operator'?",
        ),
        ("variables.fre > 0", 11, "undefined field 'fre' on Variables; did you mean 'freeCpu'?"),
        ("node.colour", 6, "undefined field 'colour' on Node"),
        # unknown identifiers
        ("nod.name", 1, "undeclared reference 'nod'; did you mean 'node'?"),
        ("pods.name", 1, "undeclared reference 'pods'; did you mean 'pod'?"),
        ("node.taints.all(t, x.effect == '')", 20, "undeclared reference 'x'"),
        ("math", 1, "'math' is a namespace of functions"),
        # resources: standard names, extended names with '_', typos of standard names
        ("pod.requests.cpuu > 0", 14, "unknown resource 'cpuu'; did you mean 'cpu'?"),
        (
            "node.allocatable.ephemeral_storag",
            18,
            "unknown resource 'ephemeral_storag'; did you mean 'ephemeral_storage'?",
        ),
        ("node.allocatable.memroy", 18, "unknown resource 'memroy'; did you mean 'memory'?"),
        ("node.allocatable.widgets", 18, "unknown resource 'widgets': standard resources are cpu"),
        ("node.allocatable['cpuu']", 18, "unknown resource 'cpuu'; did you mean 'cpu'?"),
        ("node.allocatable[1]", 18, "resource names are strings, got int"),
        ("has(pod.limits.cpuu)", 1, "unknown resource 'cpuu'; did you mean 'cpu'?"),
        # functions and methods
        (
            "pod.name.startWith('web')",
            10,
            "unknown method 'startWith' on string; did you mean 'startsWith'?",
        ),
        (
            "pod.name.frobnicate()",
            10,
            "unknown method 'frobnicate' on string (string methods: charAt, contains",
        ),
        ("sizee(pod.name)", 1, "unknown function 'sizee'; did you mean 'size'?"),
        ("math.gratest(1, 2)", 6, "unknown function 'math.gratest'; did you mean 'math.greatest'?"),
        ("pod.name.quantity()", 10, "'quantity' is a function, not a method: write quantity(...)"),
        ("startsWith(pod.name, 'a')", 1, "'startsWith' is a method: write value.startsWith(...)"),
        (
            "pod.name.startsWith(1)",
            10,
            "no matching overload for 'startsWith' applied to (string, int); expected string.startsWith(string)",
        ),
        ("size(1)", 1, "no matching overload for 'size' applied to (int)"),
        (
            "cluster.countPods('default')",
            9,
            "no matching overload for 'countPods' applied to (Cluster, string)",
        ),
        (
            "cluster.pods",
            9,
            "Cluster has no fields (its methods: countPods, countPodsInDomain, countPodsOnNode, nodeCount)",
        ),
        ("quantity('1Gi').value", 17, "Quantity has no fields"),
        ("node.name.size", 11, "cannot select field 'size' from a value of type string"),
        # int, uint and double never mix
        (
            "node.podCount * 1.5",
            15,
            "no matching overload for '*' applied to (int, double); CEL never mixes int, uint and double",
        ),
        ("node.podCount > 0.5", 15, "no matching overload for '>' applied to (int, double)"),
        ("1u + 1", 4, "no matching overload for '+' applied to (uint, int)"),
        ("variables.freeCpu == 1u", 19, "no matching overload for '==' applied to (int, uint)"),
        # other operator misuse
        ("pod.name + 1", 10, "no matching overload for '+' applied to (string, int)"),
        ("pod.name == null", 10, "no matching overload for '==' applied to (string, null_type)"),
        ("pod.labels['app'] < 1", 19, "no matching overload for '<' applied to (string, int)"),
        ("'a' in pod.name", 5, "no matching overload for 'in' applied to (string, string)"),
        ("-pod.name", 1, "no matching overload for unary '-' applied to (string)"),
        ("pod.name[0]", 9, "no matching overload for index '[]' applied to (string, int)"),
        ("node.podCount && true", 1, "operands of '&&' must be bool, got int"),
        ("true || pod.name", 9, "operands of '||' must be bool, got string"),
        ("node.podCount ? 1 : 2", 1, "the condition of '?:' must be bool, got int"),
        ("true ? 1 : 'one'", 6, "the branches of '?:' have different types: int and string"),
        # macros
        ("pod.name.all(c, true)", 1, "all() needs a list or a map, got string"),
        ("node.taints.all(t, t.key)", 20, "the condition of all() must be bool, got string"),
        ("[1, 2].map(x, x, x)", 15, "the filter of map() must be bool, got int"),
        # map literals
        ("{[1]: 2}", 2, "map keys must be int, uint, bool or string, got list(int)"),
        ("{'a': 1, 'a': 2}", 10, "duplicate map key 'a'"),
        # regular expressions are checked when the pattern is a literal
        ("pod.name.matches('(?<=a)b')", 18, "invalid perl operator: (?<="),
        ("pod.name.matches('(a)\\\\1')", 18, "invalid escape sequence: \\1"),
        ("pod.name.findAll('[a-')", 18, "invalid regular expression"),
    ],
)
def test_it_reports_type_errors_at_their_position(source: str, column: int, message: str) -> None:
    issue = only_issue(source)
    assert issue.kind == "type"
    assert message in issue.message, issue.message
    assert (issue.line, issue.column) == (1, column)


def test_it_reports_every_type_error_at_once_in_source_order() -> None:
    source = "nod.name == 'a' &&\n  pod.nme == 'x' &&\n  node.podCount + 1.0 > 2"
    issues = issues_of(source)
    assert [(i.line, i.column) for i in issues] == [(1, 1), (2, 7), (3, 17)]
    assert "undeclared reference 'nod'" in issues[0].message
    assert "undefined field 'nme' on Pod" in issues[1].message
    assert "applied to (int, double)" in issues[2].message
    assert str(issues_of(source)[0]).startswith("1:1: undeclared reference 'nod'")


@pytest.mark.parametrize(
    ("source", "expect", "message"),
    [
        ("node.podCount", (types.BOOL,), "expected bool, got int"),
        ("pod.name", (types.INT, types.DOUBLE), "expected int or double, got string"),
        ("node.podCount > 1 ? 'a' : 'b'", (types.BOOL,), "expected bool, got string"),
        ("[1, 2]", (types.INT,), "expected int, got list(int)"),
        ("1u", (types.INT, types.DOUBLE), "expected int or double, got uint"),
    ],
)
def test_it_rejects_a_result_of_the_wrong_static_type(
    source: str, expect: tuple[types.Type, ...], message: str
) -> None:
    issue = only_issue(source, expect=expect)
    assert (issue.message, issue.line, issue.column, issue.kind) == (message, 1, 1, "type")


@pytest.mark.parametrize(
    ("source", "expect"),
    [
        ("node.podCount > 3", (types.BOOL,)),
        ("pod.object.spec.enabled", (types.BOOL,)),  # dyn: the caller checks the runtime value
        ("double(node.podCount) / 2.0", (types.INT, types.DOUBLE)),
        ("variables.gpus", (types.list_of(types.DYN),)),
        ("'a'", None),
    ],
)
def test_it_accepts_results_of_an_expected_type_or_dyn(
    source: str, expect: tuple[types.Type, ...] | None
) -> None:
    compile_expression(source, ENV, cost_limit=BUDGET, expect=expect)


@pytest.mark.parametrize(
    ("source", "type_text"),
    [
        ("node.podCount", "int"),
        ("1u", "uint"),
        ("2.0", "double"),
        ("pod.labels", "map(string, string)"),
        ("node.taints", "list(Taint)"),
        ("node.taints[0]", "Taint"),
        ("node.allocatable", "Resources"),
        ("node.allocatable.nvidia_com_gpu", "int"),
        ("node.allocatable['hugepages-2Mi']", "int"),
        ("pod.object", "dyn"),
        ("pod.object.spec.containers[0]", "dyn"),
        ("[1, 'a']", "list(dyn)"),
        ("{'a': 1}", "map(string, int)"),
        ("[]", "list(dyn)"),
        ("true ? 1 : dyn('a')", "dyn"),
        ("type(1)", "type(int)"),
        ("quantity('1Gi')", "Quantity"),
        ("cluster.nodeCount()", "int"),
        ("node.taints.map(t, t.key)", "list(string)"),
        ("node.labels.filter(k, k != '')", "list(string)"),
        ("math.greatest(1, 2.5)", "dyn"),
        ("math.greatest([1, 2])", "int"),
        ("math.least(1.0, 2.0)", "double"),
        ("'a,b'.split(',')", "list(string)"),
        ("variables.zone", "string"),
        ("null", "null_type"),
        ("b'x'", "bytes"),
    ],
)
def test_it_infers_static_types(source: str, type_text: str) -> None:
    assert str(compile_expression(source, ENV, cost_limit=BUDGET).type) == type_text


@pytest.mark.parametrize(
    ("source", "references"),
    [
        ("node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu", {"node", "pod"}),
        ("variables.freeCpu >= pod.requests.cpu", {"variables.freeCpu", "pod"}),
        ("has(variables.zone) && variables.gpus.size() > 0", {"variables.zone", "variables.gpus"}),
        ("cluster.nodeCount() > 3", {"cluster"}),
        ("[1, 2].all(node, node > 0)", set()),  # a macro variable shadows the input
        ("1 + 1", set()),
    ],
)
def test_it_lists_the_inputs_an_expression_references(source: str, references: set[str]) -> None:
    assert compile_expression(source, ENV, cost_limit=BUDGET).references == frozenset(references)


def test_an_env_accepts_extra_variables_for_ad_hoc_expressions() -> None:
    env = Env().with_variable("x", types.INT).with_variable("names", types.list_of(types.STRING))
    program = compile_expression("names.exists(n, size(n) == x)", env, cost_limit=BUDGET)
    assert program.evaluate({"x": 3, "names": ["ab", "abc"]}, cost_limit=BUDGET) is True
    assert program.references == frozenset({"x", "names"})


@pytest.mark.parametrize("name", ["in", "if", "1x", "a-b", ""])
def test_it_refuses_invalid_variable_names(name: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        policy_env({name: types.INT})


def test_type_objects_print_nicely_and_know_assignability() -> None:
    assert str(types.map_of(types.STRING, types.list_of(types.INT))) == "map(string, list(int))"
    assert str(types.NODE) == "Node"
    assert types.INT.is_assignable_to(types.DYN)
    assert types.DYN.is_assignable_to(types.INT)
    assert not types.INT.is_assignable_to(types.DOUBLE)
    assert types.list_of(types.INT).is_assignable_to(types.list_of(types.DYN))
    assert types.RESOURCES.is_assignable_to(types.map_of(types.STRING, types.INT))
    assert not types.UINT.is_assignable_to(types.INT)
    point = types.object_type("Point", {"x": types.INT})
    assert point == types.object_type("Point", {"x": types.INT}) and str(point) == "Point"
