"""Parsing: every class of syntax error with its line and column, limits, literals, precedence."""

from __future__ import annotations

import pytest

from policies.engine.cel import CelCompileError, Issue, compile_expression, policy_env, types
from policies.engine.cel.values import UInt

ENV = policy_env()
BUDGET = 1_000_000


def syntax_issue(source: str) -> Issue:
    with pytest.raises(CelCompileError) as raised:
        compile_expression(source, ENV, cost_limit=BUDGET)
    issues = raised.value.issues
    assert len(issues) == 1, issues  # parsing stops at the first syntax error
    assert issues[0].kind == "syntax"
    return issues[0]


def value_of(source: str) -> object:
    return compile_expression(source, ENV, cost_limit=BUDGET).evaluate({}, cost_limit=BUDGET)


@pytest.mark.parametrize(
    ("source", "line", "column", "fragment"),
    [
        # unterminated strings: reported where the literal starts
        ('"abc', 1, 1, "unterminated string"),
        ("pod.name == 'web", 1, 13, "unterminated string"),
        ("pod.name == 'a' &&\n  node.name == 'b", 2, 16, "unterminated string"),
        ("'line\nbreak'", 1, 1, "unterminated string"),
        ('"""never closed', 1, 1, "unterminated string"),
        # missing operands
        ("1 +", 1, 4, "missing operand after '+'"),
        ("node.podCount >", 1, 16, "missing operand after '>'"),
        ("1 + * 2", 1, 5, "missing operand before '*'"),
        ("&& true", 1, 1, "missing operand before '&&'"),
        ("pod.name == 'a' && ", 1, 20, "missing operand after '&&'"),
        ("true ? 1", 1, 9, "expected ':'"),
        # unbalanced brackets: an unclosed one is reported where it opens
        ("(1 + 2", 1, 1, "unbalanced '('"),
        ("1 + 2)", 1, 6, "unbalanced ')'"),
        ("size(pod.name", 1, 5, "unbalanced '('"),
        ("[1, 2", 1, 1, "unbalanced '['"),
        ("{'a': 1", 1, 1, "unbalanced '{'"),
        ("node.labels['zone'", 1, 12, "unbalanced '['"),
        ("(\n  1 +\n  2", 1, 1, "unbalanced '('"),
        ("1 +\n\n  )", 3, 3, "missing operand after '+'"),
        # bad escapes: reported at the backslash
        (r'"\q"', 1, 2, r"invalid escape sequence '\q'"),
        (r'"ab\x4"', 1, 4, r"\x needs two hex digits"),
        (r'"\u00e"', 1, 2, r"\u needs 4 hex digits"),
        (r'"\uD800"', 1, 2, "not a Unicode scalar value"),
        (r"b'\u00e9'", 1, 3, "not allowed in bytes literals"),
        (r'"\400"', 1, 2, "octal escapes"),
        # reserved words
        ("if", 1, 1, "'if' is a reserved word"),
        ("pod.name == package", 1, 13, "'package' is a reserved word"),
        ("let(1)", 1, 1, "'let' is a reserved word"),
        # operators CEL does not have, and other malformed input
        ("1 = 2", 1, 3, "did you mean '=='?"),
        ("true & false", 1, 6, "did you mean '&&'?"),
        ("true | false", 1, 6, "did you mean '||'?"),
        ("node..name", 1, 6, "expected a field or method name"),
        ("node.in", 1, 6, "expected a field or method name"),
        ("pod.name # comment", 1, 10, "unexpected character '#'"),
        ("f(1)(2)", 1, 5, "expected an operator or the end"),
        ("1 2", 1, 3, "expected an operator or the end"),
        ("Pod{name: 'x'}", 1, 4, "object construction"),
        ("", 1, 1, "empty expression"),
        ("   \n  ", 1, 1, "empty expression"),
        # number literals
        ("9223372036854775808", 1, 1, "int literal out of range"),
        ("-9223372036854775809", 1, 2, "int literal out of range"),
        ("--9223372036854775808", 1, 3, "int literal out of range"),  # only one '-' joins it
        ("18446744073709551616u", 1, 1, "uint literal out of range"),
        ("1e", 1, 1, "invalid number literal '1e'"),
        ("0x", 1, 1, "invalid number literal '0x'"),
        ("1.", 1, 3, "expected a field or method name"),
        # macros
        ("node.taints.all(1, true)", 1, 17, "must be a simple variable name"),
        ("has(pod)", 1, 5, "has() takes one field selection"),
        ("has(pod.labels['app'])", 1, 15, "has() takes one field selection"),
    ],
)
def test_it_reports_syntax_errors_with_line_and_column(
    source: str, line: int, column: int, fragment: str
) -> None:
    issue = syntax_issue(source)
    assert (issue.line, issue.column) == (line, column), issue
    assert fragment in issue.message


def test_it_rejects_a_source_longer_than_ten_thousand_characters() -> None:
    source = "1 + " * 2500 + "1"  # 10 001 characters
    issue = syntax_issue(source)
    assert issue.message == "expression is too long: 10001 characters (the limit is 10000)"


@pytest.mark.parametrize(
    "source",
    [
        "(" * 101 + "1" + ")" * 101,  # parentheses
        "[" * 101 + "]" * 101,  # lists
        "size(" * 101 + "'a'" + ")" * 101,  # calls
        "node" + ".name" * 100,  # a selection chain 101 nodes deep
        "1" + " + 1" * 100,  # a left-leaning sum 101 levels deep
        "-(" * 101 + "1" + ")" * 101,
    ],
)
def test_it_rejects_nesting_deeper_than_one_hundred_levels_without_recursion_error(
    source: str,
) -> None:
    issue = syntax_issue(source)
    assert "nested too deeply (more than 100 levels)" in issue.message


def test_it_accepts_nesting_of_ninety_levels() -> None:
    # 90 parentheses around a sum of two literals: the sum is 1 level, well inside the limit
    assert value_of("(" * 90 + "1 + 2" + ")" * 90) == 3


def test_it_balances_long_and_chains_so_they_do_not_count_as_nesting() -> None:
    # 300 operands of && would be 299 levels deep left-leaning; balanced it is about 9
    source = " && ".join(["true"] * 300)
    assert value_of(source) is True


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 + 2 * 3", 7),  # * binds tighter than +
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),  # left-associative: (10 - 4) - 3
        ("100 / 10 / 5", 2),  # (100 / 10) / 5
        ("-2 * 3", -6),
        ("7 % 4 * 2", 6),  # (7 % 4) * 2
        ("true || false && false", True),  # && binds tighter: true || (false && false)
        ("!true == false", True),  # ! binds to its operand: (!true) == false
        ("1 < 2 == true", True),  # relations are left-associative: (1 < 2) == true
        ("1 + 1 in [2]", True),  # + binds tighter than in
        ("true ? 1 : false ? 2 : 3", 1),  # ?: is right-associative
        ("false ? 1 : false ? 2 : 3", 3),
        ("--5", 5),  # an even run of '-' cancels out, as in cel-go
        ("!!true", True),
        ("-9223372036854775808", -(2**63)),  # the minimum int is a literal
        ("- 9223372036854775808", -(2**63)),
        ("[1, 2, 3,][2]", 3),  # trailing commas
        ("{'a': 1,}['a']", 1),
        ("size('x') // a comment\n + 1", 2),
        ("0x1F", 31),
        ("007", 7),
        (".5 + 1.", None),  # "1." is not a CEL number
    ],
)
def test_it_parses_with_cel_precedence(source: str, expected: object) -> None:
    if expected is None:
        with pytest.raises(CelCompileError):
            value_of(source)
        return
    result = value_of(source)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r'"\x41\101\u00e9\U0001F600"', "AAé😀"),  # hex, octal, \u and \U escapes
        (r"'\a\b\f\n\r\t\v\\\'\"\`\?'", "\a\b\f\n\r\t\v\\'\"`?"),
        (r'r"\n\d"', r"\n\d"),  # raw strings keep backslashes
        ("'''two\nlines'''", "two\nlines"),
        ('"""it\'s "quoted" """', 'it\'s "quoted" '),
        (r'"\xff"', "ÿ"),  # in strings \x is a code point
        (r"b'\xff\101'", b"\xffA"),  # in bytes it is a byte
        ("b'é'", "é".encode()),  # non-ASCII text in bytes is UTF-8
        ("1u", UInt(1)),
        ("0xFFu", UInt(255)),
        ("1e3", 1000.0),
        ("2.5e-3", 0.0025),
        ("null", None),
    ],
)
def test_it_reads_literals(source: str, expected: object) -> None:
    result = value_of(source)
    assert result == expected and type(result) is type(expected)


def test_a_compile_error_lists_its_issues_readably() -> None:
    with pytest.raises(CelCompileError) as raised:
        compile_expression("pod.name ==", ENV, cost_limit=BUDGET, expect=(types.BOOL,))
    assert str(raised.value) == "1:12: missing operand after '=='"
