"""RE2 patterns (google-re2): what is rejected, and matching behaviour where RE2 differs from
Python's re."""

from __future__ import annotations

import pytest

from policies.engine.cel.regex import RegexError, compile_regex

from ..clocks import cpu_bound


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^node-[0-9]+$", "node-12", True),
        ("b$", "ab\n", False),  # RE2's $ is the end of the text; Python's also matches before \n
        ("(?m)b$", "ab\nc", True),  # multi-line: end of a line, in both engines
        ("(?m:b$)", "ab\nc", True),
        ("\\d", "٣", False),  # Arabic-Indic three: RE2's \d is ASCII only
        ("\\w+", "é", False),
        ("\\s", "\v", False),  # RE2's \s is [\t\n\f\r ]
        ("\\s", "\t", True),
        ("\\bcat\\b", "a cat!", True),
        ("\\bcat\\b", "concat", False),
        ("\\Bcat", "concat", True),
        ("[[:alpha:]]+[[:digit:]]", "abc1", True),
        ("[[:upper:]]", "abc", False),
        ("\\Qa.b\\E", "axb", False),  # \Q...\E quotes metacharacters
        ("\\Qa.b\\E", "a.b", True),
        ("a{,3}", "a{,3}", True),  # not a repetition in RE2: literal text
        ("x{2,3}", "xx", True),
        ("(?i)abc", "ABC", True),
        ("(?P<word>ab)+", "abab", True),
        ("(?<word>ab)", "ab", True),
        ("\\x{41}\\x42", "AB", True),
        ("\\z", "", True),
        ("a.c", "a\nc", False),  # . does not match a newline without (?s)
        ("(?s)a.c", "a\nc", True),
    ],
)
def test_patterns_match_as_re2_does(pattern: str, text: str, matches: bool) -> None:
    assert (compile_regex(pattern).search(text) is not None) is matches


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(?=a)", "invalid perl operator: (?="),
        ("(?!a)", "invalid perl operator: (?!"),
        ("(?<=a)b", "invalid perl operator: (?<="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        ("(a)\\1", "invalid escape sequence: \\1"),
        ("(?P<x>a)(?P=x)", "invalid perl operator: (?P"),
        ("(?>a)", "invalid perl operator: (?>"),
        ("a++", "bad repetition operator: ++"),
        ("(?(1)a|b)", "invalid perl operator: (?("),
        ("\\Z", "invalid escape sequence: \\Z"),
        ("\\C", "\\C is not supported"),
        ("a\\\\\\C", "\\C is not supported"),
        ("(?x)a b", "invalid perl operator: (?x"),
        ("a{1001}", "invalid repetition size: {1001}"),
        ("[a-", "missing ]"),
        ("(a", "missing )"),
        ("a)", "unexpected )"),
        ("[[:nope:]]", "invalid character class range"),
        ("\\u0041", "invalid escape sequence: \\u"),
        ("x**", "bad repetition operator: **"),
        ("a" * 2001, "is longer than 2000 characters"),
    ],
)
def test_it_rejects_what_re2_rejects_with_a_reason(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as raised:
        compile_regex(pattern)
    assert message in str(raised.value)
    assert pattern[:64] in str(raised.value)


def test_it_caches_compiled_patterns() -> None:
    assert compile_regex("^cached-[a-z]+$") is compile_regex("^cached-[a-z]+$")


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("\\pL+", "é", True),  # Unicode classes, as RE2 has them
        ("a(?i)b", "aB", True),  # flags anywhere
        ("(?U)a+", "aaa", True),
        ("[[:^alpha:]]", "1", True),
    ],
)
def test_re2_syntax_python_lacks_is_accepted(pattern: str, text: str, matches: bool) -> None:
    assert (compile_regex(pattern).search(text) is not None) is matches


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    # Python's backtracking re took 531 s for 28 a's (issue 15); RE2 is linear in the text.
    with cpu_bound(1):  # a millisecond or two in RE2
        assert compile_regex("^(a+)+$").search("a" * 100_000 + "b") is None


def test_a_text_utf8_cannot_encode_raises_rather_than_matching() -> None:
    with pytest.raises(UnicodeEncodeError):
        compile_regex("a").search("\ud800")
