"""RE2 patterns on Python's re: what is translated, what is rejected, and matching behaviour
that differs between the two engines."""

from __future__ import annotations

import pytest

from policies.engine.cel.regex import RegexError, compile_regex, translate


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
        ("(?=a)", "look-ahead is not supported by RE2"),
        ("(?!a)", "look-ahead is not supported by RE2"),
        ("(?<=a)b", "look-behind is not supported by RE2"),
        ("(?<!a)b", "look-behind is not supported by RE2"),
        ("(a)\\1", "backreferences (\\1) are not supported by RE2"),
        ("(?P<x>a)(?P=x)", "backreferences ((?P=name)) are not supported by RE2"),
        ("(?>a)", "atomic groups are not supported by RE2"),
        ("a++", "possessive quantifiers are not supported by RE2"),
        ("(?(1)a|b)", "conditionals are not supported by RE2"),
        ("\\pL", "Unicode classes (\\p) are not supported here"),
        ("\\Z", "escape \\Z is not supported by RE2"),
        ("a(?i)b", "flag groups like (?i) must open the pattern"),
        ("(?x)a b", "unknown flag 'x'"),
        ("(?U)a+", "the ungreedy flag (U) is not supported here"),
        ("a{1001}", "repetition count 1001 exceeds 1000"),
        ("[a-", "missing ']'"),
        ("(a", "missing ')'"),
        ("a)", "unbalanced ')'"),
        ("[[:nope:]]", "invalid character class"),
        ("\\u0041", "invalid escape \\u"),
        ("x**", "multiple repeat"),
    ],
)
def test_it_rejects_what_re2_rejects_with_a_reason(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as raised:
        compile_regex(pattern)
    assert message in str(raised.value)
    assert pattern in str(raised.value)


def test_it_caches_compiled_patterns() -> None:
    assert compile_regex("^cached-[a-z]+$") is compile_regex("^cached-[a-z]+$")


def test_it_leaves_plain_syntax_alone() -> None:
    assert translate("^a(b|c)*[x-z]?$") == "^a(b|c)*[x-z]?\\Z"
