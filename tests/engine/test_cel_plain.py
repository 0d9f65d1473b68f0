"""Type errors in plain words (policies/engine/cel/plain.py): each says what went wrong and the
usual fix; the checker's cel-go wording stays beside it (FieldError.cel_message)."""

from __future__ import annotations

import pytest

from policies.engine.cel.plain import plain_message
from policies.engine.document import PolicyInvalid
from policies.engine.policy import compile_policy


def _error(expression: str):
    document = (
        "name: t\nschedulerNames: [s]\nfilters:\n  - name: f\n"
        f"    expression: {expression!r}\n"  # a Python repr is a YAML quoted scalar here
    )
    with pytest.raises(PolicyInvalid) as info:
        compile_policy(document)
    [error] = info.value.errors
    return error


@pytest.mark.parametrize(
    ("expression", "plain", "cel"),
    [
        (
            "pod.labels['tier'] < 3",
            "'<' cannot compare a string with an int; convert one side: int(\"42\") reads a "
            "number from a string, string(42) writes one (a label value is always a string)",
            "no matching overload for '<' applied to (string, int); expected <(int, int)",
        ),
        (
            "node.podCount > 0.5",
            "'>' cannot compare an int with a double; CEL never converts numbers implicitly "
            "(1 == 1.0 is an error): wrap one side in double(...), int(...) or uint(...)",
            "no matching overload for '>' applied to (int, double); CEL never mixes",
        ),
        (
            "1u + 1 > 0u",
            "'+' cannot combine a uint and an int; CEL never converts numbers implicitly",
            "no matching overload for '+' applied to (uint, int)",
        ),
        (
            "pod.name + 1 == 'x'",
            "'+' cannot combine a string and an int; '+' joins two strings: wrap the other side "
            "in string(...)",
            "no matching overload for '+' applied to (string, int)",
        ),
        (
            "pod.name == null",
            "a string is never null in CEL: to check that a field or key is there, use "
            "has(pod.labels.app) or 'app' in pod.labels",
            "no matching overload for '==' applied to (string, null_type)",
        ),
        (
            "pod.name.startsWith(1)",
            "string.startsWith(...) cannot take an int; it takes string.startsWith(string)",
            "no matching overload for 'startsWith' applied to (string, int)",
        ),
        (
            "size(1) > 0",
            "size(...) cannot take an int; it takes size(string) or size(bytes) or "
            "size(list(A)) or size(map(A, B))",
            "no matching overload for 'size' applied to (int)",
        ),
        (
            "cluster.countPods('default') > 0",
            "Cluster.countPods(...) cannot take a string; it takes "
            "Cluster.countPods(string, map(string, string))",
            "no matching overload for 'countPods' applied to (Cluster, string)",
        ),
        (
            "pod.labels == 1",
            "'==' cannot compare a map with an int; both sides must have the same type",
            "no matching overload for '==' applied to (map(string, string), int)",
        ),
        (
            "'a' in pod.name",
            "'in' cannot look for a string in a string; 'in' looks in a list or a map's keys: "
            "for text, use .contains(...)",
            "no matching overload for 'in' applied to (string, string)",
        ),
        (
            "size([1] + ['a']) > 0",
            "'+' cannot combine a list of int and a list of string; both sides must have the "
            "same type (numbers of one kind, strings or lists)",
            "no matching overload for '+' applied to (list(int), list(string))",
        ),
        (
            "pod.name[0] == 'a'",
            "a string cannot be indexed with an int",
            "no matching overload for index '[]' applied to (string, int)",
        ),
        ("-pod.name == 'a'", "unary '-' does not apply to a string", "for unary '-'"),
    ],
)
def test_a_type_error_reads_plainly_with_cels_own_words_beside_it(expression, plain, cel):
    error = _error(expression)
    assert error.kind == "type"
    assert error.message.startswith(plain), error.message
    assert error.cel_message is not None and cel in error.cel_message
    assert error.to_dict()["celMessage"] == error.cel_message
    assert error.line is not None and error.doc_line == 5  # the position is the same


@pytest.mark.parametrize(
    "expression", ["node.alocatable.cpu > 0", "sizee(pod.name) > 1", "pod.name.size > 1"]
)
def test_an_error_that_is_already_plain_keeps_its_words_and_no_second_text(expression):
    error = _error(expression)
    assert error.cel_message is None and error.to_dict()["celMessage"] is None
    assert "no matching overload" not in error.message


@pytest.mark.parametrize(
    "message",
    [
        "",
        "no matching overload",
        "no matching overload for '<' applied to",
        "no matching overload for '<' applied to (" + "(" * 5000,
        "no matching overload for 'f' applied to (" + "a, " * 20000 + ")",
    ],
)
def test_plain_message_never_fails_on_odd_or_huge_text(message):
    plain = plain_message(message)
    assert plain is None or isinstance(plain, str)
