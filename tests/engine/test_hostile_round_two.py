"""Issue 27's hostile policies in the engine: every operation charged by what it reads and
produces, findAll bounded, a budget that finishes an evaluation under failurePolicy, aliases
counted after expansion, YAML 1.1 readings warned about, absurd quantities refused, text
escaped. The corpus itself (hostile_corpus.py) also runs through the entry points
(tests/web/test_hostile_entry_points.py)."""

from __future__ import annotations

import tracemalloc

import pytest

from policies.engine.cel import CodegenContext, compile_expression, policy_env
from policies.engine.cel.codegen import _TooLarge
from policies.engine.cel.cost import BoundSizes
from policies.engine.cel.deadline import EvaluationTimeout, budget, deadline
from policies.engine.cel.errors import CelCostError
from policies.engine.cel.functions import find_all, find_all_metered
from policies.engine.cel.interpreter import Frame
from policies.engine.cel.library import FUNCTIONS
from policies.engine.document import parse_text
from policies.engine.policy import BUDGET_RULE, compile_policy, validate_policy
from policies.engine.printable import printable
from policies.engine.quantity import QuantityError, parse_quantity

from ..clocks import StepClock, cpu_bound
from .hostile_corpus import CORPUS, HEADER, HUGE_LABEL, document, numbers
from .inputs import node_view, pod_view
from .test_hostile import raised_in

ENV = policy_env()
MB = 1024 * 1024


def _nodes_for(case: str) -> list[dict]:
    labels = {"huge": HUGE_LABEL} if "larger than declared" in case else {}
    return [node_view(f"n{i}", labels=labels) for i in range(3)]


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_each_hostile_case_is_refused_with_a_position_or_bounded_on_both_paths(case):
    text, outcome, where = CORPUS[case]
    with cpu_bound(2):  # on f860bf1 these ran for seconds to minutes (hostile_corpus.py)
        errors = validate_policy(text)
    if outcome == "rejected":
        kind, fragment = where
        assert errors, "accepted"
        assert (errors[0].kind, fragment in errors[0].message) == (kind, True), errors[0]
        assert errors[0].doc_line is not None
        if kind in ("cost", "type"):
            assert (errors[0].line, errors[0].column) != (None, None)
        return
    assert errors == []
    policy = compile_policy(text)
    for fast in (True, False):
        tracemalloc.start()
        try:
            # the budget, on a clock that moves one second per look, is what bounds "budget"
            with cpu_bound(2), budget(30, clock=StepClock()):
                evaluation = policy.evaluate(pod_view(), _nodes_for(case), fast=fast)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 256 * MB, (fast, peak)
        if outcome == "budget":
            assert evaluation.stopped and "not judged" in evaluation.stopped
        else:
            assert evaluation.stopped is None
        if outcome == "cost":
            assert all("cost budget exceeded" in e[0].message for e in evaluation.errors.values())
            assert len(evaluation.errors) == 3
        if outcome == "ok":
            assert evaluation.errors == {}


# --- what each operation is charged, at compile time and at run time ---------------------------


def _measured(source: str, activation: dict) -> tuple[int, int]:
    """(estimate, cost the exact path counted) of `source` on `activation`."""
    program = compile_expression(source, ENV, cost_limit=10**12)
    frame = Frame(activation, 10**12, program._nslots)
    program._eval(frame)
    return program.cost, frame.cost


@pytest.mark.parametrize(
    ("source", "cost"),
    [
        # 1 + the operands (2 + 2) + their common length, ceil(min(253, 253) / 10) = 26
        ("node.name == pod.name", 1 + 2 + 2 + 26),
        ("node.name < pod.name", 1 + 2 + 2 + 26),
        # a map lookup reads its 253-character key (26); then `== 'x'`: 1 + 1 + ceil(1 / 10)
        ("node.labels[pod.name] == 'x'", (1 + 2 + 2 + 26) + 1 + 1 + 1),
        ("pod.name in node.labels", 1 + 2 + 2 + 26),
        # `in` a list: the map (1 + 2 + 64 x (1 + 2)), then 64 elements x (1 + 26)
        ("pod.name in node.taints.map(t, t.key)", 1 + 2 + (1 + 2 + 64 * 3) + 64 * 27),
    ],
)
def test_comparisons_are_charged_what_they_read_and_the_estimate_covers_the_count(source, cost):
    # inputs at their declared worst: 253-character names, 64 taints with keys as long, none
    # equal to the pod's name (so `in` compares with each)
    long = "n" * 253
    taints = [{"key": long[:-1] + str(i % 10), "effect": "NoSchedule"} for i in range(64)]
    node = node_view(long, labels={long: "x"}, taints=taints)
    estimate, counted = _measured(source, {"node": node, "pod": pod_view(name=long)})
    assert estimate == counted == cost


def test_the_same_formula_gives_the_estimate_and_the_run_time_charge():
    # findAll("") on "abc" searches from 0, 1, 2 and 3, each reading what is left (1 unit
    # each), then 4 matches of 0 characters: 4 + 4 + 0 = 8 at run time; the estimate allows
    # the matches 3 characters in all (ceil(3 / 10) = 1): 9
    [overload] = [ov for ov in FUNCTIONS["findAll"] if len(ov.params) == 2]
    bounds = [compile_expression(s, ENV, cost_limit=100).bound for s in ("'abc'", "''")]
    assert overload.cost(BoundSizes(bounds, overload.params)) == 9
    assert find_all_metered("abc", "") == (["", "", "", ""], 8)


def test_a_pattern_computed_at_run_time_is_charged_its_compile_once_unless_it_varies():
    from policies.engine.cel.regex import COMPILE_UNITS

    source = "node.labels.exists(k, k.matches(pod.name))"  # the same pattern in every step
    activation = {
        "node": node_view("n1", labels={"a": "1", "b": "2"}),
        "pod": pod_view(name="^a-pattern-only-this-test-compiles$"),
    }
    estimate, first = _measured(source, activation)
    _, again = _measured(source, activation)  # now in the cache: no compile, no charge
    assert first - again == COMPILE_UNITS and first <= estimate
    # a pattern that differs in every step is charged in every step: 64 labels
    varying = compile_expression(
        "node.labels.exists(k, pod.name.matches(k))", ENV, cost_limit=10**12
    )
    assert varying.cost > 64 * COMPILE_UNITS > estimate


def test_find_all_matches_as_go_and_stops_before_a_search_past_its_budget():
    assert find_all("axb", "x*") == ["", "x", ""]  # the empty match after "x" is skipped
    assert find_all("é日a", "") == ["", "", "", ""]
    assert find_all("a1b22c333", "[0-9]+", 2) == ["1", "22"]
    # 1 M a's against `a.*?b|a`: each search reads to the end, 100 000 units; the budget
    # stops it after ten searches (about 13 minutes per node before issue 27)
    with cpu_bound(2), pytest.raises(CelCostError, match="findAll"):
        find_all_metered("a" * 1_000_000, "a.*?b|a", budget=1_000_000)


@pytest.mark.parametrize("fast", [True, False])
def test_a_deadline_stops_find_all_inside_its_loop_on_both_paths(fast):
    # 100 000 matches in one call, within a generous cost budget: only the clock stops it,
    # and findAll looks at it every 64 searches
    text = (
        HEADER
        + "filters:\n  - name: f\n    expression: 'node.labels.x.findAll(\"a\").size() > 0'\n"
    )
    policy = compile_policy(text, cost_limit=10**12, policy_cost_limit=10**12)
    node = node_view("n1", labels={"x": "a" * 100_000})
    clock = StepClock()
    with (
        cpu_bound(2),
        pytest.raises(EvaluationTimeout) as stopped,
        deadline(20, clock=clock),
    ):
        policy.evaluate(pod_view(), [node], fast=fast)
    assert "find_all_metered" in raised_in(stopped.value)


def test_generated_code_hands_a_string_longer_than_declared_to_the_exact_path():
    program = compile_expression("node.name == pod.name", ENV, cost_limit=10**6)
    ctx = CodegenContext({"node": "node", "pod": "pod"})
    fast = eval(f"lambda node, pod: {program.emit(ctx)}", ctx.globals)
    assert fast(node_view("a"), pod_view(name="a")) is True
    with pytest.raises(_TooLarge):  # 300 characters where 253 are declared
        fast(node_view("n" * 300), pod_view(name="n" * 300))
    assert program.evaluate(
        {"node": node_view("n" * 300), "pod": pod_view(name="n" * 300)}, cost_limit=10**6
    )


@pytest.mark.parametrize(
    "source",
    [
        "node.name == 'abc'",  # a literal side: at most 3 characters are read
        'node.labels["topology.kubernetes.io/zone"] == "zone-a"',  # a literal key
        "'zone' in node.labels",
        "node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu",
    ],
)
def test_generated_code_checks_no_size_where_a_side_is_a_constant(source):
    program = compile_expression(source, ENV, cost_limit=10**6)
    ctx = CodegenContext({"node": "node", "pod": "pod"})
    code = program.emit(ctx)
    assert "toolarge" not in code and "within" not in code, code


# --- the budget: an evaluation finishes under failurePolicy ---------------------------------------

_L60 = numbers(60)
_SLOW = f"{_L60}.all(x, {_L60}.all(y, x + y + node.name.size() >= 0))"


@pytest.mark.parametrize("failure_policy", ["Ignore", "Fail"])
@pytest.mark.parametrize(("fast", "memo"), [(True, False), (True, True), (False, False)])
def test_a_budget_finishes_the_evaluation_under_failure_policy(failure_policy, fast, memo):
    from policies.cluster.sources import cluster_load

    demo = cluster_load("demo")
    filters = [(f"f{k}", _SLOW) for k in range(4)]
    policy = compile_policy(document(filters=filters, failure_policy=failure_policy))
    nodes = demo.nodes()
    whole = policy.evaluate(pod_view(), nodes, demo.state, fast=fast)
    with budget(12, clock=StepClock()):
        evaluation = policy.evaluate(pod_view(), nodes, demo.state, fast=fast, memo=memo)
    undecided = [i for i, errors in evaluation.errors.items() if errors[0].rule == BUDGET_RULE]
    assert 0 < len(undecided) <= len(nodes)
    assert evaluation.stopped == (
        f"the evaluation ran past its budget of 12 s: {len(undecided)} of 36 nodes not judged, "
        f"under failurePolicy {failure_policy}"
    )
    for i in range(len(nodes)):
        if i in undecided:  # Ignore: passes without a score; Fail: rejected, unresolvable
            assert evaluation.passed[i] is (failure_policy == "Ignore")
            assert evaluation.unresolvable[i] is (failure_policy == "Fail")
            assert evaluation.total[i] == 0.0
        else:  # what it judged stands
            assert evaluation.passed[i] == whole.passed[i]
            assert evaluation.total[i] == whole.total[i]


def test_an_earlier_deadline_inside_a_budget_still_stops_the_request():
    policy = compile_policy(document(filters=[("f", _SLOW)]))
    with (
        budget(100, clock=StepClock()),
        pytest.raises(EvaluationTimeout) as stopped,
        deadline(5),
    ):
        policy.evaluate(pod_view(), [node_view(f"n{i}") for i in range(36)], fast=False)
    assert stopped.value.soft is False


def test_a_budget_that_runs_out_while_compiling_raises_as_a_soft_timeout():
    with pytest.raises(EvaluationTimeout) as stopped, budget(3, clock=StepClock()):
        compile_policy(document(filters=[("f", _SLOW)]))
    assert stopped.value.soft is True


# --- documents: aliases, YAML 1.1, quantities ------------------------------------------------------


def test_aliases_within_the_limits_after_expansion_are_accepted():
    expression = " && ".join(["node.name.size() >= 0"] * 100)  # 2.5 KB, 64 times: 160 KB
    text = HEADER + f"filters:\n  - name: f0\n    expression: &e '{expression}'\n"
    text += "".join(f"  - name: f{i}\n    expression: *e\n" for i in range(1, 64))
    assert validate_policy(text) == []


def test_aliases_past_the_document_size_after_expansion_are_refused_with_a_position():
    expression = " && ".join(["node.name.size() >= 0"] * 200)  # 5 KB, 64 times: 320 KB
    text = HEADER + f"filters:\n  - name: f0\n    expression: &e '{expression}'\n"
    text += "".join(f"  - name: f{i}\n    expression: *e\n" for i in range(1, 64))
    assert len(text) < 16 * 1024
    with cpu_bound(2):
        [error] = validate_policy(text)
    assert "expands to more than 256 KiB of text" in error.message
    # the filters list (its first "-"), where the total passes the limit
    assert (error.doc_line, error.doc_column) == (4, 3)


@pytest.mark.parametrize(
    ("value", "path", "reading"),
    [
        ("on", "filters[0].unresolvable", "the boolean true in YAML 1.1"),
        ("no", "filters[0].unresolvable", "the boolean false in YAML 1.1"),
        ("010", "scores[0].weight", "010 is 8 in YAML 1.1 (this reader) and 10 in YAML 1.2"),
        ("1_0", "scores[0].weight", "1_0 is 10 in YAML 1.1 (this reader) and the string"),
        ("1:10", "scores[0].weight", "1:10 is 70 in YAML 1.1"),
        ("0b1010", "scores[0].weight", "0b1010 is 10 in YAML 1.1"),
    ],
)
def test_an_unquoted_scalar_yaml_1_1_reads_otherwise_is_a_positioned_warning(value, path, reading):
    field = path.rsplit(".", 1)[1]
    text = HEADER + (
        "filters:\n  - name: f\n    expression: 'true'\nscores:\n  - name: s\n    expression: '1'\n"
    )
    section = "filters" if path.startswith("filters") else "scores"
    marker = f"  - name: {section[0]}\n"
    text = text.replace(marker, marker + f"    {field}: {value}\n")
    policy = compile_policy(text)  # valid: a warning, not an error (document.py says why)
    [warning] = policy.warnings
    assert (warning.kind, warning.path, reading in warning.message) == ("warning", path, True)
    assert warning.doc_line == text.splitlines().index(f"    {field}: {value}") + 1
    assert warning.doc_column == 5 + len(field) + 2


@pytest.mark.parametrize("value", ["'on'", "true", "false", "10", "0x1F", "'010'", "1.5", "0"])
def test_quoted_and_yaml_1_2_scalars_are_not_warned_about(value):
    parsed = parse_text(HEADER + f"description: x\nx: {value}\n")
    assert parsed.warnings == []


def test_a_warning_also_comes_with_the_errors_it_explains():
    from policies.engine.document import PolicyInvalid

    with pytest.raises(PolicyInvalid) as raised:
        compile_policy("name: on\nschedulerNames: [schedweb]\nfilters: []\n")
    assert any(w.path == "name" for w in raised.value.warnings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9" * 5000, "5000 digits, at most 64"),
        ("-0." + "1" * 70, "70 digits, at most 64"),
        ("1e" + "9" * 5000, "exponent out of range"),
    ],
)
def test_a_quantity_with_absurd_digits_is_refused_in_words(text, message):
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text)
    assert message in str(raised.value) and "Exceeds the limit" not in str(raised.value)
    assert len(str(raised.value)) < 200


def test_leading_zeros_do_not_count_as_digits():
    assert parse_quantity("0" * 5000 + "1") == 1


def test_a_quantity_read_from_the_cluster_fails_in_words_on_both_paths():
    policy = compile_policy(document(filters=[("f", "quantity(node.labels.q).isInteger()")]))
    node = node_view("n1", labels={"q": "9" * 5000})
    for fast in (True, False):
        [[error]] = policy.evaluate(pod_view(), [node], fast=fast).errors.values()
        assert "5000 digits, at most 64" in error.message


# --- text: control, format and bidi characters escaped -------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        ("\x1b[31mred\x00", "\\x1b[31mred\\x00"),
        ("a\u202eb\u2066c", "a\\u202eb\\u2066c"),
        ("line\nbreak\ttab", "line\\nbreak\\ttab"),
        ("\U000e0041 tag", "\\U000e0041 tag"),
        ("ünïcödé 日本", "ünïcödé 日本"),
    ],
)
def test_printable_escapes_what_would_act_on_a_terminal_or_reorder_a_page(raw, shown):
    assert printable(raw) == shown


def test_messages_errors_and_field_errors_leave_the_engine_escaped():
    text = document(
        filters=[
            ("f", "false", {"message": '"\\u001b[2J\\u202e" + node.name'}),
            ("g", 'int("\\u0000") > 0'),
        ]
    )
    policy = compile_policy(text)
    for fast in (True, False):
        evaluation = policy.evaluate(pod_view(), [node_view("n1")], fast=fast)
        assert evaluation.messages == ["\\x1b[2J\\u202en1"]
    fail_open = compile_policy(document(filters=[("g", 'int("\\u0000") > 0')]))
    [[error]] = fail_open.evaluate(pod_view(), [node_view("n1")]).errors.values()
    assert "\x00" not in error.message and "\\x00" in error.message
    # YAML's "\e" is ESC: an unknown field named with an ANSI sequence
    unknown = HEADER + "filters:\n  - name: f\n    expression: 'true'\n\"\\e[31m\": 1\n"
    [field_error] = validate_policy(unknown)
    assert "\x1b" not in field_error.message and "\\x1b[31m" in field_error.message


def test_a_long_message_full_of_control_characters_is_clipped_before_it_is_escaped():
    # 166 501 characters, each escaped to four: escaped whole, 200 nodes took 11 s
    text = document(
        filters=[("f", "false", {"message": '"\\u0001".replace("", "\\u0002") + ' + _ONE_M})]
    )
    policy = compile_policy(text, cost_limit=10**9, policy_cost_limit=10**9)
    nodes = [node_view(f"n{i}") for i in range(200)]
    with cpu_bound(2):
        for fast in (True, False):
            evaluation = policy.evaluate(pod_view(), nodes, fast=fast)
            assert {len(m) for m in evaluation.messages} == {1024}
            assert evaluation.messages[0].startswith("\\x02\\x01\\x02")


_ONE_M = numbers(111) + '.map(i, "' + "\\u0003" * 1500 + '").join()'
