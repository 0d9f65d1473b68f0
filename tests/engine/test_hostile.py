"""The hostile-policy corpus (issue 15): inputs a viewer can send to validate or preview.

Each case is rejected at validation with a positioned error, or evaluates within its budget with
the verdict CEL specifies, on both the generated-code and the exact path; none raises.
"""

from __future__ import annotations

import traceback

import pytest

from policies.engine.policy import compile_policy, validate_policy

from ..clocks import StepClock, cpu_bound
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


# --- documents: bounded before any work, names by fullmatch, encodable strings -----------------


def alias_bomb(levels: int, fan: int = 9) -> str:
    """`levels` anchors each listing the previous one `fan` times: fan**levels values."""
    lines = [f"a0: &a0 [{', '.join(['x'] * fan)}]"]
    for k in range(1, levels):
        lines.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message", "where"),
    [
        (HEADER + "tests: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64", (3, None)),
        (
            '{"name": "t", "schedulerNames": ["schedweb"], "x": ' + "[" * 5000 + "]" * 5000 + "}",
            "nested deeper than 64",
            (1, None),
        ),
        (HEADER + alias_bomb(9), "expands to more than 100000 values", (None, None)),
        (HEADER + "tests: " + "9" * 5000 + "\n", "integer out of range", (3, 8)),
        (HEADER + "tests: 0x" + "f" * 5000 + "\n", "integer out of range", (3, 8)),
        (
            HEADER + "filters: []\nfilters:\n  - name: f\n    expression: 'true'\n",
            "duplicate key 'filters' ('filters' is first defined at line 3, column 1)",
            (4, 1),
        ),
    ],
)
def test_a_hostile_document_is_rejected_quickly_with_a_position(text, message, where):
    with cpu_bound(2):  # tens of milliseconds here; the alias bomb alone would take minutes
        [error] = validate_policy(text)
    assert message in error.message
    line, column = where
    if line is not None:
        assert error.doc_line == line
    if column is not None:
        assert error.doc_column == column


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ("variables:\n  - name: \"a\\n\"\n    expression: '1'\n", "variables[0].name"),
        ("filters:\n  - name: \"f\\n\"\n    expression: 'true'\n", "filters[0].name"),
    ],
)
def test_a_name_with_a_trailing_newline_is_rejected(body, path):
    errors = validate_policy(HEADER + body)
    assert path in {e.path for e in errors}


def test_the_policy_name_and_scheduler_names_are_checked_whole():
    errors = validate_policy('name: "t\\n"\nschedulerNames: ["schedweb\\n"]\n')
    assert {"name", "schedulerNames[0]"} <= {e.path for e in errors}


@pytest.mark.parametrize(
    "source",
    [
        # YAML's double-quoted "\ud800" escape yields the lone surrogate
        HEADER + 'filters:\n  - name: f\n    expression: "false"\n    message: "\\"\\ud800\\""\n',
        {
            "name": "t",
            "schedulerNames": ["schedweb"],
            "filters": [{"name": "f", "expression": "false", "message": '"\ud800"'}],
        },
    ],
)
def test_a_lone_surrogate_is_rejected_at_validation(source):
    [error] = validate_policy(source)
    assert error.path == "filters[0].message" and "U+D800" in error.message


# --- regular expressions: RE2, linear time, bounded patterns -----------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        '("' + "a" * 28 + '" + node.name).matches("^(a+)+$")',
        '("' + "a" * 28 + '").matches("^(a+)+$")',  # constant: folded at compile time
        '("' + "a" * 28 + '" + node.name).find("(a|aa)+$") != ""',
        '("' + "a" * 28 + '" + node.name).findAll("(a*)*b").size() > 0',
    ],
)
def test_a_catastrophic_pattern_evaluates_in_linear_time(expression):
    with cpu_bound(2):  # milliseconds in RE2; Python's backtracking re took 531 s (issue 15)
        result = verdicts(filter_policy(expression))
    assert result[True] == result[False]


def test_a_pattern_longer_than_the_bound_is_a_positioned_error():
    [error] = validate_policy(filter_policy('node.name.matches("' + "a" * 2001 + '")'))
    assert (
        "longer than 2000 characters" in error.message and error.column == 19
    )  # the pattern literal


# --- sizes: values and messages are bounded ----------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        # "n1" -> 3 x 200 + 2 = 602 characters -> 603 x 200 + 602 = 121202 -> 24 million
        'node.name.replace("", "' + "x" * 200 + '").replace("", "' + "y" * 200 + '")'
        '.replace("", "' + "w" * 200 + '") == ""',
        # 10 x 9000-character strings joined 12 times over: 1.08 M characters
        "[node.name].map(x, [" + ", ".join(['"' + "z" * 900 + '"'] * 10) + "]"
        ".map(y, [y, y, y, y, y, y, y, y, y, y, y, y].join())"
        '.map(y, [y, y, y, y, y, y, y, y, y, y, y, y].join()).join()).join() == ""',
    ],
)
def test_a_value_over_the_size_limit_is_a_cel_error_on_both_paths(expression):
    policy = compile_policy(filter_policy(expression), cost_limit=10**9)
    for fast in (True, False):
        evaluation = policy.evaluate(pod_view(), NODES, fast=fast)
        assert "over the limit 1000000" in evaluation.errors[0][0].message


def test_a_filter_message_is_clipped_to_1024_characters():
    text = filter_policy("false") + "    message: 'node.name + \"" + "m" * 5000 + "\"'\n"
    for fast in (True, False):
        [message, _] = compile_policy(text).evaluate(pod_view(), NODES, fast=fast).messages
        assert len(message) == 1024 and message.startswith("n1mmm")


# --- the runtime cost tracker and the policy budget ---------------------------------------------


def shared_tree(depth: int, fan: int) -> list:
    """fan ** depth leaves, each level one list shared fan times: a few objects in memory."""
    tree: list = [0] * fan
    for _ in range(depth - 1):
        tree = [tree] * fan
    return tree


def test_equality_walking_a_shared_tree_stops_at_the_budget_on_both_paths():
    from policies.engine.cel import CodegenContext, compile_expression, policy_env
    from policies.engine.cel import types as t
    from policies.engine.cel.errors import CelCostError

    program = compile_expression(
        "variables.t == variables.t", policy_env({"t": t.DYN}), cost_limit=1_000_000
    )
    tree = shared_tree(6, 17)  # 24 million leaves: a whole walk would take minutes
    from policies.engine.cel.codegen import _TooLarge

    with cpu_bound(2):
        with pytest.raises(CelCostError, match="cost budget exceeded"):
            program.evaluate({"variables": {"t": tree}}, cost_limit=1_000_000)
        ctx = CodegenContext({"variables.t": "t"})
        code = program.emit(ctx)
        with pytest.raises(_TooLarge):  # the fast path hands the node to the exact path
            eval(code, {**ctx.globals, "t": tree})


def test_equality_over_a_large_tree_of_variables_is_refused_at_validation():
    # 20**5 leaves built by five variables; each carries its size bound into the next and into
    # the filter, so the estimate sees the walk (it once saw five dyn-sized values)
    variables = ["  - name: l1\n    expression: '[" + ", ".join(["0"] * 20) + "]'\n"]
    for level in range(2, 6):
        items = ", ".join([f"variables.l{level - 1}"] * 20)
        variables.append(f"  - name: l{level}\n    expression: '[{items}]'\n")
    text = (
        HEADER
        + "variables:\n"
        + "".join(variables)
        + "filters:\n  - name: f\n    expression: variables.l5 == variables.l5\n"
    )
    [error] = validate_policy(text)
    assert (error.path, error.kind, error.line, error.column) == (
        "filters[0].expression",
        "cost",
        1,
        1,
    )
    assert "exceeds the budget 1000000" in error.message


def test_the_policy_total_cost_is_bounded_at_validation():
    # One expression under the per-expression budget (286 979), 64 times over.
    expression = "node.labels.all(k, node.labels.all(k2, k + k2 != ''))"
    single = compile_policy(filter_policy(expression)).filters[0].program.cost
    assert single < 1_000_000
    text = (
        HEADER
        + "filters:\n"
        + "".join(f"  - name: f{i}\n    expression: {expression!r}\n" for i in range(64))
    )
    errors = validate_policy(text)
    assert [e.kind for e in errors] == ["cost"]
    assert "policy's estimated cost" in errors[0].message and errors[0].doc_line is not None


def test_a_large_folded_string_is_not_written_into_generated_source():
    big = "a" * 3000
    text = HEADER + (
        "filters:\n  - name: f\n    expression: node.name != 'n1'\n"
        f'    message: \'"{big}" + "b"\'\n'
    )
    policy = compile_policy(text)
    assert big not in policy._fast.source
    for fast in (True, False):
        assert policy.evaluate(pod_view(), NODES, fast=fast).passed == [False, True]


def test_a_bare_variables_is_not_a_map_literal_in_generated_source():
    names = [f"v{i}_" + "x" * 200 for i in range(30)]
    text = (
        HEADER
        + "variables:\n"
        + "".join(f"  - name: {n}\n    expression: node.name\n" for n in names)
        + "filters:\n  - name: f\n    expression: size([variables]) == 1\n"
    )
    policy = compile_policy(text)
    assert len(policy._fast.source) < 20_000
    for fast in (True, False):
        assert policy.evaluate(pod_view(), NODES, fast=fast).passed == [True, True]


def test_constant_folding_runs_under_the_budget_once_per_subtree():
    nested = "[" * 40 + "1" + "]" * 40
    text = filter_policy(f"size({nested}) == 1")
    with cpu_bound(1):  # once per subtree: milliseconds; once per level and path: 2**40 folds
        assert verdicts(text) == {True: [True, True], False: [True, True]}


def test_count_pods_with_a_new_label_key_per_call_is_bounded():
    from policies.cluster.sources import cluster_load

    state = cluster_load("demo").state
    calls = " + ".join(f'cluster.countPods("", {{"key{i}": "v"}})' for i in range(40))
    policy = compile_policy(filter_policy(f"{calls} >= 0"))
    nodes = state.nodes()
    with cpu_bound(2):
        for fast in (True, False):
            evaluation = policy.evaluate(pod_view(), nodes, state, fast=fast)
            assert "label keys" in evaluation.errors[0][0].message


def test_the_exact_path_frees_a_node_s_values_without_the_garbage_collector():
    import gc
    import weakref

    policy = compile_policy(
        HEADER
        + "variables:\n  - name: big\n    expression: node.labels.map(k, k + k)\n"
        + "filters:\n  - name: f\n    expression: size(variables.big) >= 0\n"
    )
    gc.disable()
    try:
        activation = policy._activation(pod_view(), NODES[0], None)
        lazy = activation["variables"]
        assert lazy["big"] is not None
        ref = weakref.ref(lazy)
        del activation, lazy
        assert ref() is None
    finally:
        gc.enable()


# --- the wall-clock deadline of previews and validation (deadline.py) -----------------------
# Each test gives the deadline a clock it controls (StepClock: one second per look), so "past
# the deadline" means "looked at the clock N times", on any machine at any load.

_L60 = "[" + ", ".join(str(i) for i in range(60)) + "]"
# within every budget, but ~20 ms per node on the exact path: 36 nodes x 4 filters
SLOW = f"{_L60}.all(x, {_L60}.all(y, x + y + node.name.size() >= 0))"


def slow_policy(expression: str = SLOW, filters: int = 4) -> str:
    return (
        HEADER
        + "filters:\n"
        + "".join(f"  - name: f{k}\n    expression: {expression!r}\n" for k in range(filters))
    )


def raised_in(error: BaseException) -> set[str]:
    """The names of the functions `error` passed through."""
    return {frame.name for frame in traceback.extract_tb(error.__traceback__)}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    "expression",
    [
        SLOW,
        f"({SLOW}) || true",  # a timeout is not a CEL error: || does not absorb it
        f"[1, 2].exists(i, ({SLOW}) && i == 3) || true",
    ],
)
def test_a_deadline_stops_a_slow_evaluation_on_both_paths(fast, expression):
    from policies.cluster.sources import cluster_load
    from policies.engine.cel.deadline import EvaluationTimeout, deadline

    demo = cluster_load("demo")
    policy = compile_policy(slow_policy(expression, filters=8))
    clock = StepClock()
    with pytest.raises(EvaluationTimeout, match=r"longer than 20 s"), deadline(20, clock=clock):
        policy.evaluate(pod_view(), demo.nodes(), demo.state, fast=fast)
    # set at look 1 (t=1, due at 21), stopped at the first look past it (t=22); the whole
    # evaluation looks 37 times on the generated-code path and 1153 times on the exact path
    assert clock.looks == 22


def test_a_deadline_reaches_variables_and_no_deadline_lets_the_evaluation_finish():
    from policies.cluster.sources import cluster_load
    from policies.engine.cel.deadline import EvaluationTimeout, deadline

    demo = cluster_load("demo")
    l200 = "[" + ", ".join(str(i) for i in range(200)) + "]"
    # 40 000 steps on one node, within the budget: the interpreter looks at the clock every
    # CHECK_EVERY cost units, dozens of times inside this one variable
    slow = f"{l200}.all(x, {l200}.all(y, x + y + node.name.size() >= 0))"
    text = (
        HEADER
        + f"variables:\n  - name: v\n    expression: {slow!r}\n"
        + "filters:\n  - name: f\n    expression: 'variables.v || true'\n"
    )
    policy = compile_policy(text)
    one_node = demo.nodes()[:1]
    # the exact path: outside the variable one node costs 3 looks (the deadline, the node, the
    # rule); the 10th look can only be the interpreter's, inside the variable's comprehension
    clock = StepClock()
    with pytest.raises(EvaluationTimeout) as stopped, deadline(10, clock=clock):
        policy.evaluate(pod_view(), one_node, demo.state, fast=False)
    assert "tick" in raised_in(stopped.value) and clock.looks == 12
    # the generated code looks before each node, whose variables it then computes
    clock = StepClock()
    with pytest.raises(EvaluationTimeout), deadline(10, clock=clock):
        policy.evaluate(pod_view(), demo.nodes(), demo.state, fast=True)
    assert clock.looks == 12  # 36 nodes would be 37 looks
    with deadline(None):
        for fast in (True, False):
            assert all(policy.evaluate(pod_view(), one_node, demo.state, fast=fast).passed)


def test_a_deadline_stops_constant_folding_at_compile_time():
    from policies.engine.cel.deadline import EvaluationTimeout, deadline

    c40 = "[" + ", ".join(str(i) for i in range(40)) + "]"
    folded = f"{c40}.all(x, {c40}.all(y, {c40}.all(z, x + y + z >= 0)))"  # 64 000 steps
    plain = filter_policy("node.name == 'a'")
    clock = StepClock()
    with deadline(10**6, clock=clock):
        compile_policy(plain)
    # folding looks at the clock as it evaluates: 64 000 steps look more often than a whole
    # compile of a plain filter does
    with pytest.raises(EvaluationTimeout) as stopped, deadline(clock.looks + 5, clock=StepClock()):
        compile_policy(filter_policy(folded))
    assert "tick" in raised_in(stopped.value)
    assert compile_policy(filter_policy(folded))  # without one it compiles


# Documents within every limit that are slow to compile with no evaluation or folding at all
# (every term reads the node): 256 KiB of `&&` chains, and 64 rules nested 90 levels deep.
_CHAIN = " && ".join(["node.name == 'a'"] * 480)
_NESTED = "(node.podCount > 1 ? " * 90 + "true" + " : false)" * 90
SLOW_TO_COMPILE = {
    "256 KiB of && chains": HEADER
    + "filters:\n"
    + "".join(f"  - name: f{k}\n    expression: {_CHAIN!r}\n" for k in range(25)),
    "64 rules nested 90 deep": HEADER
    + "filters:\n"
    + "".join(f"  - name: f{k}\n    expression: {_NESTED!r}\n" for k in range(64)),
}


@pytest.mark.parametrize("case", sorted(SLOW_TO_COMPILE))
def test_a_deadline_stops_compiling_a_large_document(case):
    from policies.engine.cel.deadline import EvaluationTimeout, deadline

    text = SLOW_TO_COMPILE[case]
    assert len(text) <= 256 * 1024
    # the whole compile takes seconds and looks at the clock hundreds of times (385 and 650):
    # the deadline stops it at the first look past 10
    clock = StepClock()
    with pytest.raises(EvaluationTimeout, match=r"longer than 10 s"), deadline(10, clock=clock):
        validate_policy(text)
    assert clock.looks == 12
    one_rule = text[: text.index("  - name: f1\n")]
    assert validate_policy(one_rule) == []  # within the limits: valid, only slow in bulk


# --- the issue's blow-ups on the 36-node demo cluster: rejected, or under 2 s and 200 MB -------


def _q(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _z(n: int, width: int = 900) -> str:
    return _q(['"' + "z" * width + '"'] * n)


# nested map(...join()): 10 x 900 characters, 12 copies joined per level, 5 levels ~ 2 GB
_JOIN = "[node.name].map(x, " + _z(10)
for _ in range(5):
    _JOIN += ".map(y, " + _q(["y"] * 12) + ".join())"
_JOIN += ".join()).join().size() > 0"

# an 8-million-item list built by doubling (125 x 2**16), then copied by 15 more variables
_COPIES = ["  - name: d0\n    expression: '" + _q(["node.name"] * 125) + "'\n"]
_COPIES += [
    f"  - name: d{k}\n    expression: 'variables.d{k - 1} + variables.d{k - 1}'\n"
    for k in range(1, 17)
]
_COPIES += ["  - name: c0\n    expression: variables.d16\n"]
_COPIES += [
    f"  - name: c{k}\n    expression: 'variables.c{k - 1} + [node.name]'\n" for k in range(1, 16)
]

OVER = "over the limit 1000000"
# case -> (document, outcome): "rejected" at validation, else a text every node's error has
CORPUS = {
    "nested map join, 1 GB per node": (filter_policy(_JOIN), "rejected"),
    "replace with an empty pattern, quadratic": (
        filter_policy(
            "".join(f'.replace("", "{c * 200}")' for c in "xywv").join(["node.name", ""])
            + ".size() > 0"
        ),
        "rejected",
    ),
    "replace with an empty pattern in a comprehension": (
        filter_policy(
            _q(['"' + "a" * 1000 + '"'] * 5)
            + '.all(s, node.name.replace("", s).replace("", s).size() > 0)'
        ),
        OVER,
    ),
    "a 100 MB filter message": (
        filter_policy("false")
        + "    message: 'node.name + "
        + _z(5, 1000)
        + "".join(".map(x, " + _q(["x"] * 20) + ".join())" for _ in range(4))
        + ".join()'\n",
        "rejected",
    ),
    "15 variables copying an 8-million-item list": (
        HEADER
        + "variables:\n"
        + "".join(_COPIES)
        + "filters:\n  - name: f\n    expression: size(variables.c15) > 0\n",
        "rejected",  # each variable carries its size bound: the estimate sees the growth
    ),
    "15 variables, the copy compared with itself": (
        HEADER
        + "variables:\n"
        + "".join(_COPIES)
        + "filters:\n  - name: f\n    expression: variables.c15 == variables.c15\n",
        "rejected",  # each variable carries its size bound: the estimate sees the growth
    ),
    "a string doubled by 30 variables": (
        HEADER
        + "variables:\n  - name: s0\n    expression: node.name\n"
        + "".join(
            f"  - name: s{k}\n    expression: variables.s{k - 1} + variables.s{k - 1}\n"
            for k in range(1, 31)
        )
        + "filters:\n  - name: f\n    expression: size(variables.s30) > 0\n",
        "rejected",  # each variable carries its size bound: the estimate sees the growth
    ),
}


def _within_limits(text: str, nodes, state, outcome: str | None = None) -> None:
    """`text` is refused with positioned errors, or evaluates on both paths in under 2 s and
    200 MB (tracemalloc peak), every node with a verdict and no exception escaping.
    `outcome`: "rejected", or a text each node's error must contain (None: either way)."""
    import tracemalloc

    errors = validate_policy(text)
    assert (outcome == "rejected") == bool(errors) or outcome is None, errors
    if errors:
        for error in errors:
            assert error.doc_line is not None, error
            assert error.kind != "cost" or (error.line, error.column) != (None, None), error
        return
    policy = compile_policy(text)
    for fast in (True, False):
        tracemalloc.start()
        try:
            with cpu_bound(2):
                evaluation = policy.evaluate(pod_view(), nodes, state, fast=fast)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 200 * 1024 * 1024, (fast, peak)
        assert len(evaluation.passed) == len(nodes)
        for message in evaluation.messages:
            assert message is None or len(message) <= 1024
        if outcome is not None:
            assert len(evaluation.errors) == len(nodes)
            assert all(outcome in e[0].message for e in evaluation.errors.values())


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_the_issue_s_blow_ups_stay_within_2_s_and_200_mb_on_the_demo_cluster(case):
    from policies.cluster.sources import cluster_load

    demo = cluster_load("demo")
    assert len(demo.nodes()) == 36
    text, outcome = CORPUS[case]
    _within_limits(text, demo.nodes(), demo.state, outcome)


@pytest.fixture(scope="module")
def crowded_demo():
    """The demo cluster's 36 nodes with 20 000 more pods, labelled, spread over them."""
    from policies.cluster.demo import demo_objects
    from policies.cluster.state import ClusterState

    nodes, pods = demo_objects()
    names = [n["metadata"]["name"] for n in nodes]
    for i in range(20_000):
        pods.append(
            {
                "metadata": {
                    "name": f"p{i}",
                    "namespace": f"ns{i % 20}",
                    "uid": f"uid-p{i}",
                    "labels": {"app": f"a{i % 50}", f"k{i % 100}": "v"},
                },
                "spec": {"nodeName": names[i % len(names)], "containers": []},
                "status": {"phase": "Running"},
            }
        )
    state = ClusterState.from_objects(nodes, pods).freeze()
    assert state.pod_count() > 20_000
    return state


@pytest.mark.parametrize(
    "expression",
    [
        " + ".join(f'cluster.countPods("", {{"key{i}": "v"}})' for i in range(40)) + " >= 0",
        'cluster.countPods("", {node.name: "v"}) >= 0',  # a new key for every node
        " + ".join(f'cluster.countPods("ns{i}", {{"k{i}": "v"}})' for i in range(20)) + " >= 0",
        'cluster.countPodsOnNode(node.name, "", {"app": "a1"}) >= 0',
        " + ".join(f'cluster.countPodsOnNode(node.name, "", {{"k{i}": "v"}})' for i in range(30))
        + " >= 0",
    ],
)
def test_count_pods_on_a_20000_pod_cluster_stays_within_2_s_and_200_mb(crowded_demo, expression):
    _within_limits(filter_policy(expression), crowded_demo.nodes(), crowded_demo)
