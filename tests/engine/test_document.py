"""Policy document parsing and structural validation: every error at once, keyed by field path."""

import pytest

from policies.engine.document import PolicyInvalid, locate, parse_text
from policies.engine.spec_build import build_spec

VALID = """\
name: demo
schedulerNames: [schedweb]
filters:
  - name: enough-cpu
    expression: node.allocatable.cpu >= pod.requests.cpu
scores:
  - name: least
    expression: 100 - node.requested.cpu * 100 / node.allocatable.cpu
    weight: 2
    normalize: minmax
"""


def errors_of(text: str) -> dict[str, str]:
    try:
        parsed = parse_text(text)
    except PolicyInvalid as exc:
        return {e.path: e.message for e in exc.errors}
    _spec, errors = build_spec(parsed.data, parsed.positions)
    return {e.path: e.message for e in errors}


def test_a_valid_document_builds_a_spec_with_defaults():
    parsed = parse_text(VALID)
    spec, errors = build_spec(parsed.data, parsed.positions)
    assert errors == []
    assert spec.name == "demo"
    assert spec.failure_policy == "Ignore"
    assert spec.filters[0].unresolvable is True
    assert spec.filters[0].message is None
    assert (spec.scores[0].weight, spec.scores[0].normalize) == (2, "minmax")


def test_json_documents_are_accepted():
    text = '{"name": "j", "schedulerNames": ["s"], "scores": [{"name": "a", "expression": "1"}]}'
    parsed = parse_text(text)
    spec, errors = build_spec(parsed.data, parsed.positions)
    assert errors == [] and spec.name == "j"


def test_an_empty_document_is_an_error():
    assert errors_of("") == {"": "the document is empty"}
    assert errors_of("   \n# only a comment\n") == {"": "the document is empty"}


def test_yaml_that_is_not_a_mapping_is_an_error():
    assert errors_of("- a\n- b\n") == {
        "": "the document must be a mapping (name: ..., filters: ...), got a list"
    }
    assert "got a string" in errors_of("just words")[""]


def test_a_yaml_syntax_error_names_line_and_column():
    with pytest.raises(PolicyInvalid) as exc:
        parse_text("name: x\nfilters: [\n  - a: b\n")
    error = exc.value.errors[0]
    assert error.kind == "yaml"
    assert error.message.startswith("YAML syntax error")
    assert error.doc_line is not None and error.doc_line >= 2


def test_every_structural_error_is_reported_at_once():
    errors = errors_of(
        """\
name: Bad_Name
schedulerNames: []
failurePolicy: Sometimes
filterz: []
filters:
  - name: dup
    expression: "true"
    unresolvable: maybe
  - name: dup
scores:
  - name: s
    expression: "1"
    weight: -3
    normalize: zscore
    colour: red
"""
    )
    assert errors == {
        "name": "name 'Bad_Name' must be at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        "schedulerNames": "schedulerNames must be a non-empty list of names, got an empty list",
        "failurePolicy": "failurePolicy must be Ignore or Fail, got 'Sometimes'",
        "filterz": "unknown field 'filterz'; did you mean 'filters'?",
        "filters[0].unresolvable": "unresolvable must be true or false, got string",
        "filters[1].expression": "expression is required",
        "filters[1].name": "duplicate rule name 'dup' (already used by filters[0])",
        "scores[0].weight": "weight must not be negative, got -3",
        "scores[0].normalize": "normalize must be one of none, minmax; got 'zscore'",
        "scores[0].colour": "unknown field 'colour'",
    }


def test_a_policy_without_filters_or_scores_is_refused():
    assert errors_of("name: x\nschedulerNames: [s]\n") == {
        "": "a policy needs at least one filter, score or queue"
    }


def test_rule_names_are_unique_across_filters_and_scores():
    errors = errors_of(
        "name: x\nschedulerNames: [s]\nfilters: [{name: a, expression: 'true'}]\nscores: [{name: a, expression: '1'}]\n"
    )
    assert errors == {"scores[0].name": "duplicate rule name 'a' (already used by filters[0])"}


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        ("101", "weight must be at most 100, got 101"),
        ("1.5", "weight must be an integer from 0 to 100, got number"),
        ("true", "weight must be an integer from 0 to 100, got boolean"),
        ("'3'", "weight must be an integer from 0 to 100, got string"),
    ],
)
def test_weights_are_integers_from_0_to_100(weight, message):
    errors = errors_of(
        f"name: x\nschedulerNames: [s]\nscores: [{{name: a, expression: '1', weight: {weight}}}]\n"
    )
    assert errors == {"scores[0].weight": message}


def test_variable_names_must_be_identifiers():
    errors = errors_of(
        "name: x\nschedulerNames: [s]\nvariables: [{name: free-cpu, expression: '1'}]\nscores: [{name: a, expression: '1'}]\n"
    )
    assert "must be an identifier" in errors["variables[0].name"]


def test_an_oversized_document_is_refused_before_parsing():
    errors = errors_of("name: x\n" + "#" * 300_000)
    assert errors == {"": "the document is larger than 256 KiB"}


def test_positions_map_an_expression_column_to_the_document():
    text = 'name: x\nfilters:\n  - name: a\n    expression: node.alocatable.cpu > 1\n  - name: b\n    expression: "pod.x"\n'
    parsed = parse_text(text)
    # `expression: ` starts at column 17 of line 4; CEL column 6 is `alocatable`
    assert locate(parsed.positions, "filters[0].expression", 1, 6) == (4, 22)
    assert text.splitlines()[3][21:31] == "alocatable"
    # a double-quoted scalar shifts by the quote
    assert locate(parsed.positions, "filters[1].expression", 1, 5) == (6, 22)
    assert text.splitlines()[5][21] == "x"


def test_positions_follow_literal_blocks_line_by_line():
    text = "name: x\nscores:\n  - name: a\n    expression: |\n      1 +\n        nod.x\n"
    parsed = parse_text(text)
    line, _ = locate(parsed.positions, "scores[0].expression", 2, 3)
    assert line == 6
