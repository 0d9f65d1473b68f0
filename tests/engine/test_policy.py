"""Compiling and evaluating whole policies: errors, the pipeline, failurePolicy, both paths."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest

from policies.engine.document import PolicyInvalid
from policies.engine.policy import compile_policy, validate_policy

from .inputs import ListCluster, node_view, pod_view


def policy(body: str, **kwargs):
    return compile_policy("name: t\nschedulerNames: [schedweb]\n" + textwrap.dedent(body), **kwargs)


def errors(body: str, **kwargs) -> list:
    return validate_policy(
        "name: t\nschedulerNames: [schedweb]\n" + textwrap.dedent(body), **kwargs
    )


# --- compile-time errors -------------------------------------------------------------------


def test_an_unknown_field_is_reported_with_a_suggestion_and_its_place():
    [error] = errors(
        """\
        filters:
          - name: cpu
            expression: node.alocatable.cpu > 0
        """
    )
    assert error.path == "filters[0].expression"
    assert error.rule == "cpu"
    assert error.kind == "type"
    assert "alocatable" in error.message and "did you mean 'allocatable'" in error.message
    assert (error.line, error.column) == (1, 6)
    # the document line of the expression: 3 header lines... `name`, `schedulerNames`, `filters`,
    # then `- name: cpu` is line 4 and the expression line 5; `expression: ` ends at column 17
    assert (error.doc_line, error.doc_column) == (5, 22)


@pytest.mark.parametrize(
    ("block", "where"),
    [
        # folded: the two lines join with a space; `nme` is on the document's line 7
        (">-\n      node.podCount >= 0 &&\n      node.nme == 'b'", (7, 12)),
        # folded, a more-indented line keeps its breaks
        (">-\n      node.podCount >= 0 &&\n        true &&\n      node.nme == 'b'", (8, 12)),
        # literal: every line break kept
        ("|\n      node.podCount >= 0 &&\n         node.nme == 'b'", (7, 15)),
        # a plain scalar over two lines
        ("node.podCount >= 0 &&\n      node.nme == 'b'", (6, 12)),
    ],
)
def test_an_error_inside_a_multi_line_expression_points_at_its_document_place(block, where):
    text = "name: t\nschedulerNames: [schedweb]\nfilters:\n  - name: f\n    expression: " + block
    [error] = validate_policy(text + "\n")
    assert "nme" in error.message
    assert (error.doc_line, error.doc_column) == where
    line, column = where
    assert text.split("\n")[line - 1][column - 1 :].startswith("nme")


def test_a_syntax_error_has_line_and_column():
    [error] = errors("scores:\n  - name: s\n    expression: 'node.podCount +'\n")
    assert error.kind == "syntax"
    assert error.line == 1 and error.column is not None


def test_a_filter_must_be_boolean():
    [error] = errors("filters:\n  - name: f\n    expression: node.podCount + 1\n")
    assert error.path == "filters[0].expression"
    assert "expected bool" in error.message and "int" in error.message


def test_a_score_must_be_numeric():
    [error] = errors("scores:\n  - name: s\n    expression: node.name\n")
    assert error.path == "scores[0].expression"
    assert "string" in error.message


def test_a_message_must_be_a_string():
    [error] = errors("filters:\n  - name: f\n    expression: 'true'\n    message: node.podCount\n")
    assert error.path == "filters[0].message"
    assert "expected string" in error.message


def test_int_and_double_do_not_mix():
    [error] = errors("scores:\n  - name: s\n    expression: node.podCount * 1.5\n")
    assert error.kind == "type"
    assert "int" in error.message and "double" in error.message


def test_an_expression_over_the_cost_budget_is_refused_at_compile_time():
    [error] = errors(
        "filters:\n  - name: f\n    expression: 'node.object.a.all(x, node.object.b.all(y, node.object.c.all(z, z == y)))'\n",
        cost_limit=10_000,
    )
    assert error.kind == "cost"
    assert "exceeds the budget 10000" in error.message


def test_every_rule_error_is_reported_at_once():
    found = errors(
        """\
        variables:
          - name: free
            expression: node.allocatable.cpuu
        filters:
          - name: a
            expression: nod.name == ""
        scores:
          - name: b
            expression: '"x"'
          - name: c
            expression: 1 +
        """
    )
    assert [e.path for e in found] == [
        "variables[0].expression",
        "filters[0].expression",
        "scores[0].expression",
        "scores[1].expression",
    ]


def test_a_variable_can_only_use_the_variables_before_it():
    [error] = errors(
        """\
        variables:
          - name: a
            expression: 1 + variables.b
          - name: b
            expression: "2"
        scores:
          - name: s
            expression: variables.a
        """
    )
    assert error.path == "variables[0].expression"
    assert "variables.b is defined later" in error.message
    # where `variables.b` starts: in the expression, and in the document (line 5 after the
    # helper's two header lines; the value starts at column 17)
    assert (error.line, error.column) == (1, 5)
    assert (error.doc_line, error.doc_column) == (5, 21)


def test_a_variable_referring_to_itself_is_placed_at_the_reference():
    [error] = errors(
        """        variables:
          - name: a
            expression: |
              node.podCount +
                variables.a
        scores:
          - name: s
            expression: variables.a
        """
    )
    assert error.message == "variable a refers to itself"
    assert (error.line, error.column) == (2, 3)


def test_a_match_condition_may_not_look_at_the_node():
    [error] = errors(
        "matchConditions:\n  - name: m\n    expression: node.podCount > 0\nscores:\n  - name: s\n    expression: '1'\n"
    )
    assert error.path == "matchConditions[0].expression"
    assert "not node or variables" in error.message


def test_structural_and_cel_errors_come_from_one_validator():
    with pytest.raises(PolicyInvalid) as exc:
        compile_policy("name: t\nscores: [{name: s, expression: '1', weight: -1}]\n")
    assert {e.path for e in exc.value.errors} == {"schedulerNames", "scores[0].weight"}


# --- evaluation ----------------------------------------------------------------------------

LEAST_ALLOCATED = """\
variables:
  - name: freeCpu
    expression: node.allocatable.cpu - node.requested.cpu
filters:
  - name: enough-cpu
    expression: variables.freeCpu >= pod.requests.cpu
    message: '"needs " + string(pod.requests.cpu) + "m CPU, " + string(variables.freeCpu) + "m free"'
  - name: not-cordoned
    expression: '!node.unschedulable'
    unresolvable: false
scores:
  - name: free-cpu
    expression: variables.freeCpu * 100 / node.allocatable.cpu
    weight: 3
  - name: few-pods
    expression: node.podCount
    normalize: minmax
"""


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_the_pipeline_works_the_arithmetic(fast):
    nodes = [
        node_view(
            "a", cpu=4000, requested_cpu=1000, pod_count=2
        ),  # free 3000 -> 3000*100/4000 = 75
        node_view("b", cpu=8000, requested_cpu=2000, pod_count=6),  # free 6000 -> 75
        node_view("c", cpu=2000, requested_cpu=1800, pod_count=1),  # free 200 < 500: rejected
        node_view("d", cpu=4000, requested_cpu=0, pod_count=4, unschedulable=True),  # cordoned
        node_view("e", cpu=1000, requested_cpu=0, pod_count=10),  # free 1000 -> 100
    ]
    ev = policy(LEAST_ALLOCATED).evaluate(pod_view(cpu=500), nodes, fast=fast)
    rows = {r.node: r for r in ev.rows()}
    assert [r.node for r in ev.rows() if r.passed] == ["a", "b", "e"]
    assert (rows["c"].failed_rule, rows["c"].message, rows["c"].unresolvable) == (
        "enough-cpu",
        "needs 500m CPU, 200m free",
        True,
    )
    assert (rows["d"].failed_rule, rows["d"].message, rows["d"].unresolvable) == (
        "not-cordoned",
        "rejected by filter not-cordoned",
        False,
    )
    # few-pods minmax over passing nodes a=2, b=6, e=10: (2-2)*100/8 = 0, (6-2)*100/8 = 50, 100
    # a: (75*3 + 0*1)/4 = 56.25 -> ext round(5.625) = 6
    # b: (75*3 + 50*1)/4 = 68.75 -> ext round(6.875) = 7
    # e: (100*3 + 100*1)/4 = 100 -> ext 10
    assert [(rows[n].total, rows[n].extender_score) for n in "abe"] == [
        (56.25, 6),
        (68.75, 7),
        (100.0, 10),
    ]
    assert rows["b"].scores[1].normalized == 50.0 and rows["b"].scores[1].weighted == 50.0
    assert rows["a"].scores[0].weighted == 225.0
    assert (rows["c"].total, rows["c"].extender_score) == (0.0, 0)
    assert ev.winners() == ["e"]


def test_pods_of_another_scheduler_pass_through():
    ev = policy(LEAST_ALLOCATED).evaluate(
        pod_view(scheduler_name="default-scheduler"), [node_view("a", cpu=10)]
    )
    assert ev.applies is False
    assert "default-scheduler" in ev.reason
    assert ev.passed == [True] and ev.extender == [0]


def test_a_false_match_condition_passes_the_pod_through():
    p = policy(
        "matchConditions:\n  - name: gpu-pods\n    expression: pod.requests.nvidia_com_gpu > 0\n"
        "filters:\n  - name: f\n    expression: 'false'\n"
    )
    plain = p.evaluate(pod_view(), [node_view("a")])
    assert (plain.applies, plain.reason, plain.passed) == (
        False,
        "matchCondition gpu-pods is false",
        [True],
    )
    gpu = p.evaluate(pod_view(gpus=1), [node_view("a")])
    assert (gpu.applies, gpu.passed) == (True, [False])


DIVIDES = """\
failurePolicy: {policy}
filters:
  - name: has-zone
    expression: node.labels["zone"] != "x"
scores:
  - name: per-pod
    expression: 100 / node.podCount
"""


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_ignore_lets_a_node_with_an_error_pass_with_that_score_0(fast):
    nodes = [node_view("ok", labels={"zone": "a"}, pod_count=4), node_view("bad", pod_count=0)]
    ev = policy(DIVIDES.format(policy="Ignore")).evaluate(pod_view(), nodes, fast=fast)
    rows = {r.node: r for r in ev.rows()}
    # ok: 100/4 = 25; bad: no zone label (filter error, ignored) and 100/0 (score error, ignored)
    assert rows["ok"].passed and rows["ok"].scores[0].raw == 25
    assert rows["bad"].passed and rows["bad"].scores[0].raw is None and rows["bad"].total == 0.0
    assert [e.rule for e in rows["bad"].errors] == ["has-zone", "per-pod"]
    assert "no such key" in rows["bad"].errors[0].message
    assert "division by zero" in rows["bad"].errors[1].message


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_fail_rejects_a_node_with_an_error_and_says_why(fast):
    nodes = [
        node_view("ok", labels={"zone": "a"}, pod_count=4),
        node_view("bad", labels={"zone": "a"}, pod_count=0),
    ]
    ev = policy(DIVIDES.format(policy="Fail")).evaluate(pod_view(), nodes, scores=False, fast=fast)
    rows = {r.node: r for r in ev.rows()}
    assert rows["ok"].passed
    assert not rows["bad"].passed
    assert rows["bad"].failed_rule == "per-pod"
    assert "division by zero" in rows["bad"].message


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "exact"])
def test_error_absorbing_or_passes_where_cel_says_true(fast):
    p = policy(
        'filters:\n  - name: f\n    expression: \'node.labels["zone"] == "a" || node.podCount >= 0\'\n'
    )
    ev = p.evaluate(
        pod_view(), [node_view("no-zone"), node_view("zone-b", labels={"zone": "b"})], fast=fast
    )
    assert ev.passed == [True, True]
    assert ev.errors == {}


def test_a_dyn_score_that_is_not_a_number_is_an_error_of_that_rule():
    p = policy("scores:\n  - name: s\n    expression: node.object.metadata.name\n")
    ev = p.evaluate(pod_view(), [node_view("a")])
    [row] = ev.rows()
    assert row.passed and row.scores[0].raw is None
    assert "must evaluate to a number" in row.errors[0].message


def test_a_non_finite_double_score_is_an_error():
    p = policy("scores:\n  - name: s\n    expression: double(node.podCount) / 0.0\n")
    [row] = p.evaluate(pod_view(), [node_view("a", pod_count=3)]).rows()
    assert row.scores[0].raw is None
    assert "not a finite number (inf)" in row.errors[0].message


def test_run_time_cost_overrun_is_an_evaluation_error():
    # the static estimate assumes dyn lists of at most 1000 elements, so this compiles...
    p = policy(
        "filters:\n  - name: f\n    expression: 'node.object.items.all(x, x >= 0)'\n",
        cost_limit=100_000,
    )
    node = node_view("big")
    node["object"] = {"items": list(range(200_000))}  # ...but 200 000 iterations pass the budget
    [row] = p.evaluate(pod_view(), [node]).rows()
    assert row.passed  # failurePolicy Ignore
    assert "cost" in row.errors[0].message


def test_skipping_scores_keeps_verdicts():
    p = policy(LEAST_ALLOCATED)
    nodes = [node_view("a", cpu=4000), node_view("c", cpu=100)]
    ev = p.evaluate(pod_view(), nodes, scores=False)
    assert ev.passed == [True, False] and ev.scored is False
    assert ev.rows()[0].scores == ()


def test_a_gang_waits_until_enough_members_exist_counting_the_asking_pod():
    p = policy(
        """\
        filters:
          - name: gang
            expression: >-
              !has(pod.labels.podGroup) ||
              cluster.countPods(pod.namespace, {"podGroup": pod.labels.podGroup}) >= int(pod.labels.minAvailable)
            message: '"pod group has " + string(cluster.countPods(pod.namespace, {"podGroup": pod.labels.podGroup})) + " of " + pod.labels.minAvailable'
        """
    )
    group = {"podGroup": "g1", "minAvailable": "3"}
    members = [pod_view(f"m{i}", labels=group) for i in range(2)]
    other_ns = pod_view("x", namespace="other", labels=group)
    asking = pod_view("m2", labels=group)
    nodes = [node_view("a")]
    # 2 members in the snapshot + the asking pod (not in it yet) = 3 >= 3
    assert p.evaluate(asking, nodes, ListCluster(nodes, [*members, other_ns])).passed == [True]
    # only 1 other member: 1 + 1 = 2 < 3, and the pod in another namespace does not count
    ev = p.evaluate(asking, nodes, ListCluster(nodes, [members[0], other_ns]))
    assert ev.passed == [False] and ev.messages == ["pod group has 2 of 3"]
    # the asking pod already in the snapshot is not counted twice: 2 < 3
    ev = p.evaluate(members[0], nodes, ListCluster(nodes, members))
    assert ev.passed == [False]


def test_counting_pods_per_node_and_per_zone():
    p = policy(
        """\
        scores:
          - name: on-node
            expression: 'cluster.countPodsOnNode(node.name, "", {"app": "web"})'
          - name: in-zone
            expression: 'cluster.countPodsInDomain("zone", node.labels.zone, "", {"app": "web"})'
          - name: nodes
            expression: cluster.nodeCount()
        """
    )
    nodes = [
        node_view("a", labels={"zone": "z1"}),
        node_view("b", labels={"zone": "z1"}),
        node_view("c", labels={"zone": "z2"}),
    ]
    pods = [
        pod_view("w1", labels={"app": "web"}, node_name="a"),
        pod_view("w2", labels={"app": "web"}, node_name="a"),
        pod_view("w3", labels={"app": "web"}, node_name="c"),
        pod_view("d1", labels={"app": "db"}, node_name="b"),
        pod_view("w4", labels={"app": "web"}),  # pending: on no node
    ]
    ev = p.evaluate(pod_view(), nodes, ListCluster(nodes, pods))
    # on-node: a 2, b 0, c 1; in-zone: z1 (a, b) 2, z2 (c) 1; 3 nodes
    assert ev.raw == [[2, 0, 1], [2, 2, 1], [3, 3, 3]]


def test_fast_and_exact_paths_agree_on_random_clusters():
    p = policy(
        LEAST_ALLOCATED
        + """\
  - name: zone
    expression: 'has(node.labels.zone) && node.labels.zone == "a" ? 100 : 0'
  - name: headroom
    expression: double(variables.freeCpu) / double(node.allocatable.cpu) * 100.0
    normalize: minmax
"""
    )
    rng = random.Random(7)
    for _ in range(20):
        nodes = []
        for i in range(40):
            cpu = rng.choice([0, 1000, 2000, 4000, 8000])
            labels = {"zone": rng.choice("ab")} if rng.random() < 0.7 else {}
            nodes.append(
                node_view(
                    f"n{i}",
                    cpu=cpu,
                    requested_cpu=rng.randint(0, cpu),
                    pod_count=rng.randint(0, 20),
                    labels=labels,
                    unschedulable=rng.random() < 0.1,
                )
            )
        pod = pod_view(cpu=rng.choice([0, 100, 500, 3000]))
        fast, exact = p.evaluate(pod, nodes), p.evaluate(pod, nodes, fast=False)
        assert [r.to_dict() for r in fast.rows()] == [r.to_dict() for r in exact.rows()]


def test_the_fused_code_reads_each_field_once_per_node_and_each_pod_field_once():
    p = policy(LEAST_ALLOCATED)
    source = p._fast.source
    loop = source[source.index("def _loop") : source.index("def _finish")]
    # node.allocatable.cpu appears in a variable and a score; it is read from the view once.
    assert loop.count("node['allocatable']") == 1
    assert loop.count("['cpu']") == 3  # allocatable, requested (per node) and pod requests
    assert loop.index("pod['requests']") < loop.index("for node in nodes")


def test_a_view_missing_a_declared_field_gets_the_exact_paths_answer():
    """Shared reads happen before the rules: a hand-made node without `labels` must still get
    exactly what the exact path says (an error on the rule that reads it), and no other node
    is affected."""
    p = policy(
        LEAST_ALLOCATED
        + """  - name: zone
    expression: 'node.labels.zone == "a" ? 100 : 0'
"""
    )
    nodes = [node_view(f"n{i}", cpu=4000, labels={"zone": "ab"[i % 2]}) for i in range(4)]
    del nodes[1]["labels"]
    pod = pod_view(cpu=100)
    fast, exact = p.evaluate(pod, nodes), p.evaluate(pod, nodes, fast=False)
    assert [r.to_dict() for r in fast.rows()] == [r.to_dict() for r in exact.rows()]
    assert set(fast.errors) == {1}
    assert [e.rule for e in fast.errors[1]] == ["zone"]


def test_the_engine_imports_neither_django_nor_kubernetes():
    code = (
        "import sys\n"
        "import policies.engine.policy, policies.engine.document, policies.engine.scoring\n"
        "import policies.engine.cel, policies.engine.quantity, policies.engine.inputs\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'kubernetes'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("rules", "path"),
    [
        # (expression, weight, normalize); path: how _finish computes the totals
        (
            [
                ("node.podCount", 3, "none"),
                ("node.podCount", 0, "minmax"),
                ("double(node.podCount)", 7, "minmax"),
            ],
            "per node",
        ),
        ([("node.podCount", 3, "none"), ("node.podCount", 7, "none")], "table"),
        ([("node.podCount", 1, "none"), ("node.podCount * 2", 2, "none")], "table"),
        ([("node.podCount", 100, "none"), ("node.podCount", 100, "none")], "table"),
        ([("node.podCount", 100, "none"), ("node.podCount", 100, "none")] * 2, "per node"),
        ([("double(node.podCount)", 3, "none"), ("node.podCount", 1, "none")], "per node"),
        ([("node.podCount", 0, "none"), ("node.podCount", 0, "minmax")], "no weights"),
    ],
)
def test_the_unrolled_score_pipeline_equals_the_reference_functions(rules, path):
    from policies.engine import scoring

    p = policy(
        "scores:\n"
        + "".join(
            f"  - {{name: s{k}, expression: '{e}', weight: {w}, normalize: {n}}}\n"
            for k, (e, w, n) in enumerate(rules)
        )
    )
    source = p._fast.source
    assert ("_T[s]" in source) == (path == "table")
    weights = [w for _, w, _ in rules]
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(0, 12)
        passed = [rng.random() < 0.8 for _ in range(n)]
        raw = [
            [
                rng.choice([None, rng.randint(-50, 150), rng.randint(0, 100)])
                if p.scores[k].program.type.kind == "int"
                else rng.choice([None, rng.randint(-50, 150), rng.uniform(-10, 130)])
                for _ in range(n)
            ]
            for k in range(len(rules))
        ]
        normalized, totals, ext = p._fast.finish(passed, raw)
        expected_n = [
            scoring.normalize_minmax([v if ok else None for v, ok in zip(column, passed)])
            if rule[2] == "minmax"
            else [
                0.0 if v is None or not ok else scoring.normalize_none(v)
                for v, ok in zip(column, passed)
            ]
            for rule, column in zip(rules, raw)
        ]
        expected_t = [
            scoring.weighted_total([c[i] for c in expected_n], weights) if ok else 0.0
            for i, ok in enumerate(passed)
        ]
        assert normalized == expected_n
        assert [type(v) for c in normalized for v in c] == [float] * sum(map(len, normalized))
        assert totals == expected_t
        assert ext == [scoring.extender_score(t) for t in expected_t]


def test_structural_errors_do_not_hide_cel_errors_elsewhere():
    found = validate_policy(
        "name: t\nschedulerNames: [schedweb]\nfailurePolicy: Never\n"
        "variables:\n  - {name: free-cpu, expression: node.podCount}\n  - {name: ok, expression: node.podCount +}\n"
        "scores:\n  - {name: s, expression: nod.podCount, weight: 500}\n"
    )
    assert [e.path for e in found] == [
        "failurePolicy",
        "variables[0].name",
        "scores[0].weight",
        "variables[1].expression",
        "scores[0].expression",
    ]
