"""docs/policies.md stays true: its policies compile, its input tables type-check, its CEL
examples give the values they claim, and its `evaluate` output is what the command prints.

The policy examples go through `compile_policy`, the function `manage.py evaluate` calls. No
database: the demo cluster is built in memory.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.cel import (
    CelCompileError,
    CelEvalError,
    compile_expression,
    policy_env,
    types,
)
from policies.engine.cel.checker import STANDARD_RESOURCES
from policies.engine.helpers import ClusterFunctions
from policies.engine.policy import DEFAULT_COST_LIMIT, compile_policy, validate_policy
from policies.textformat import format_evaluation

from .inputs import node_view, pod_view

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "policies.md"
EXAMPLE_PODS = ROOT / "policies" / "examples" / "pods"
TEXT = DOC.read_text(encoding="utf-8")

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
# A row of an input table (one whose second column is "CEL type"): | `pod.requests` | `Resources` |
_FIELD_ROW = re.compile(r"^\|\s*`((?:pod|node)\.[^`]+)`\s*\|\s*`([^`]+)`\s*\|")


def _blocks(language: str) -> list[tuple[int, str]]:
    """(line number, body) of every fenced block in `language`."""
    return [
        (TEXT.count("\n", 0, m.start()) + 1, m.group(2))
        for m in _FENCE.finditer(TEXT)
        if m.group(1) == language
    ]


def _policy_blocks() -> list[tuple[str, str]]:
    """(name, text) of every yaml block that is a policy: top-level name and filters, scores,
    queue or gang."""
    found = []
    for line, body in _blocks("yaml"):
        data = yaml.safe_load(body)
        if (
            isinstance(data, dict)
            and "name" in data
            and ({"filters", "scores", "queue", "gang"} & set(data))
        ):
            found.append((f"{data['name']} (line {line})", body))
    return found


def _input_fields() -> list[tuple[str, str]]:
    """(field, CEL type) of every row of the tables headed `| ... | CEL type | ... |`."""
    fields: list[tuple[str, str]] = []
    in_table = typed = False
    for line in TEXT.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not in_table:
            in_table = True
            typed = len(cells) > 1 and cells[1] == "CEL type"
            continue
        match = _FIELD_ROW.match(line)
        if typed and match:
            fields.append(match.groups())
    return fields


POLICIES = _policy_blocks()
FIELDS = _input_fields()


def _cel_lines() -> list[tuple[str, str, str | None]]:
    """(id, expression, expectation) of every line of every cel block; expectation is the text
    after `// =>`, or None when the line only has to compile."""
    lines = []
    for start, body in _blocks("cel"):
        for offset, raw in enumerate(body.splitlines(), start=1):
            if not raw.strip():
                continue
            expression, arrow, expected = raw.partition("// =>")
            lines.append(
                (f"line {start + offset}", expression.strip(), expected.strip() if arrow else None)
            )
    return lines


CEL_LINES = _cel_lines()


def test_the_doc_has_the_examples_this_test_relies_on():
    names = {name.split(" ")[0] for name, _ in POLICIES}
    assert {
        "batch-placement",
        "worked-example",
        "short-names",
        "queue-by-team",
        "seed-002",
    } <= names
    assert len(FIELDS) >= 40
    assert len(CEL_LINES) >= 80


# --- policy documents ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "text"), POLICIES, ids=[n for n, _ in POLICIES])
def test_every_policy_example_is_a_valid_complete_document(name, text):
    assert validate_policy(text) == []
    compiled = compile_policy(text)
    assert compiled.name == yaml.safe_load(text)["name"]


@pytest.mark.parametrize(
    ("name", "text"),
    [(n, t) for n, t in POLICIES if "tests" in yaml.safe_load(t)],
    ids=[n for n, t in POLICIES if "tests" in yaml.safe_load(t)],
)
def test_every_documented_test_case_passes_with_policy_test(name, text, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("policy", "test", str(path), stdout=out, stderr=err)
    except SystemExit as exc:  # 1: a case failed, 2: the document is invalid
        pytest.fail(f"policy test exited with {exc.code}:\n{out.getvalue()}{err.getvalue()}")
    total = len(yaml.safe_load(text)["tests"])
    assert f"{total} of {total} test cases passed" in out.getvalue()


# --- inputs -------------------------------------------------------------------------------


def _expression(field: str) -> str:
    """`pod.tolerations[].key` (each element's key) -> `pod.tolerations[0].key`."""
    return field.replace("[]", "[0]")


@pytest.mark.parametrize(("field", "documented"), FIELDS, ids=[f for f, _ in FIELDS])
def test_every_documented_input_field_type_checks_with_its_documented_type(field, documented):
    text = yaml.safe_dump(
        {
            "name": "field-check",
            "schedulerNames": ["schedweb"],
            "variables": [{"name": "v", "expression": _expression(field)}],
            "filters": [{"name": "uses-it", "expression": "type(variables.v) != null_type"}],
        }
    )
    compiled = compile_policy(text)
    assert str(compiled.variables["v"].program.type) == documented


def test_every_pod_and_node_field_of_the_engine_is_documented():
    documented = {field for field, _ in FIELDS}
    expected = {f"pod.{f}" for f in types.POD.fields} | {f"node.{f}" for f in types.NODE.fields}
    expected |= {f"pod.tolerations[].{f}" for f in types.TOLERATION.fields}
    expected |= {f"node.taints[].{f}" for f in types.TAINT.fields}
    expected |= {f"node.allocatable.{r}" for r in STANDARD_RESOURCES}
    assert sorted(expected - documented) == []


# --- CEL examples ---------------------------------------------------------------------------


def _typed(value: Any) -> Any:
    """A value with its exact type attached all the way down (3 != 3.0 != 3u here)."""
    if isinstance(value, list | tuple):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("map", sorted((_typed(k), _typed(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def _run(expression: str) -> Any:
    env = policy_env()
    program = compile_expression(expression, env, cost_limit=DEFAULT_COST_LIMIT)
    pod = pod_view()
    activation = {
        "pod": pod,
        "node": node_view("n1"),
        "cluster": ClusterFunctions(None, pod),
        "variables": {},
    }
    return program.evaluate(activation, cost_limit=DEFAULT_COST_LIMIT)


@pytest.mark.parametrize(
    ("where", "expression", "expected"), CEL_LINES, ids=[f"{w}: {e}" for w, e, _ in CEL_LINES]
)
def test_every_cel_example_gives_what_the_doc_says(where, expression, expected):
    if expected is None:
        compile_expression(expression, policy_env(), cost_limit=DEFAULT_COST_LIMIT)
    elif expected.startswith("invalid:"):
        with pytest.raises(CelCompileError) as info:
            compile_expression(expression, policy_env(), cost_limit=DEFAULT_COST_LIMIT)
        assert expected.removeprefix("invalid:").strip() in str(info.value)
    elif expected.startswith("error:"):
        with pytest.raises(CelEvalError) as info:
            _run(expression)
        assert expected.removeprefix("error:").strip() in str(info.value)
    else:
        assert _typed(_run(expression)) == _typed(_run(expected))


# --- the worked example ------------------------------------------------------------------------


def _example_pod(namespace: str, name: str):
    for path in sorted(EXAMPLE_PODS.glob("*.yaml")):
        pod = pod_view_from_text(path.read_text(encoding="utf-8"))
        if (pod["namespace"], pod["name"]) == (namespace, name):
            return pod
    raise AssertionError(f"no example pod {namespace}/{name} in {EXAMPLE_PODS}")


def _policy_named(name: str) -> str:
    for label, text in POLICIES:
        if label.split(" ")[0] == name:
            return text
    raise AssertionError(f"no policy named {name} in the doc")


_HEADER = re.compile(r"^policy (\S+) · pod ([^/\s]+)/(\S+) · cluster (\S+) \(")
EVALUATE_OUTPUTS = [body for _, body in _blocks("text") if _HEADER.match(body)]


@pytest.mark.parametrize("shown", EVALUATE_OUTPUTS)
def test_the_evaluate_output_shown_is_what_the_command_prints(shown):
    policy_name, namespace, pod_name, source = _HEADER.match(shown).groups()
    compiled = compile_policy(_policy_named(policy_name))
    pod = _example_pod(namespace, pod_name)
    cluster = cluster_load(source)
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    printed = format_evaluation(evaluation, pod=pod, cluster=cluster.describe()).splitlines()
    position = 0
    for line in shown.splitlines():
        if line.strip() == "...":
            continue
        assert line in printed[position:], f"not printed (in this order): {line!r}"
        position = printed.index(line, position) + 1


def test_the_worked_example_table_has_the_engines_totals_and_extender_scores():
    compiled = compile_policy(_policy_named("worked-example"))
    pod = _example_pod("web", "web-6d5f8b7c9d-x2k4p")
    cluster = cluster_load("demo")
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    by_node = {r.node: r for r in evaluation.rows()}
    # | a-small-3 | ... | (178+100)/3 = 92.666667 | floor(9.27+0.5) = **9** |
    rows = re.findall(r"^\| (\S+) \|.*= ([0-9.]+) \| [^|]*\*\*(\d+)\*\* \|$", TEXT, re.MULTILINE)
    assert len(rows) == 3
    for node, total, extender in rows:
        assert by_node[node].total == float(total)
        assert by_node[node].extender_score == int(extender)


# --- the generated code agrees with the interpreter ----------------------------------------------

_EXAMPLES = ROOT / "policies" / "examples"


def _every_policy() -> list[tuple[str, str]]:
    shipped = [(p.stem, p.read_text(encoding="utf-8")) for p in sorted(_EXAMPLES.glob("*.yaml"))]
    return shipped + [(f"doc: {name}", text) for name, text in POLICIES]


@pytest.mark.parametrize(("name", "text"), _every_policy(), ids=[n for n, _ in _every_policy()])
def test_every_shipped_and_documented_policy_gets_the_same_answer_from_both_paths(name, text):
    """The fused Python each policy compiles to (shared field reads, score tables) against the
    exact interpreter, for every example pod over the demo cluster: same verdicts, messages,
    errors, raw, normalized and extender scores."""
    compiled = compile_policy(text)
    cluster = cluster_load("demo")
    pods = [
        pod_view_from_text(p.read_text(encoding="utf-8"))
        for p in sorted(EXAMPLE_PODS.glob("*.yaml"))
    ]
    nodes = cluster.nodes()
    for pod in pods:
        for scheduler in {pod["schedulerName"], *compiled.spec.scheduler_names}:
            pod = {**pod, "schedulerName": scheduler}
            fast = compiled.evaluate(pod, nodes, cluster.state)
            exact = compiled.evaluate(pod, nodes, cluster.state, fast=False)
            assert [r.to_dict() for r in fast.rows()] == [r.to_dict() for r in exact.rows()], pod[
                "name"
            ]


def test_the_kube_scheduler_walkthrough_has_the_models_numbers():
    # docs/policies.md "Around the policy": a-small-3's plugin scores, weights, extender and
    # final total are what the scheduler model computes for the worked example's pod
    from policies.schedmodel.pipeline import cycle_run

    compiled = compile_policy(_policy_named("worked-example"))
    cluster = cluster_load("demo")
    pod = pod_view_from_text((EXAMPLE_PODS / "web.yaml").read_text())
    cycle = cycle_run(pod=pod, nodes=cluster.nodes(), state=cluster.state, policy=compiled)
    node = next(n for n in cycle.to_dict()["nodes"] if n["node"] == "a-small-3")
    section = TEXT.split("### Around the policy", 1)[1].split("\n## ", 1)[0]
    rows = {
        m.group(1): (m.group(2), m.group(3), m.group(4))
        for m in re.finditer(
            r"^\| (\w+) \| (\d+|skipped) \([^|]*\|\s*(\d*)\s*\| (\d+) \|$", section, re.M
        )
    }
    for score in node["pluginScores"]:
        assert rows[score["plugin"]] == (
            "skipped" if score.get("skipped") else str(score["score"]),
            str(score["weight"]),
            str(score["weighted"]),
        ), score["plugin"]
    assert int(rows["extender"][0]) == node["extenderScore"]
    assert int(rows["extender"][2]) == node["extenderContribution"]
    assert f"| **{node['finalTotal']}** |" in section
    assert cycle.pick == ["a-small-3"]
