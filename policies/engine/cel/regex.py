"""RE2 regular expressions for CEL's `matches`, `find` and `findAll`: validation, a size bound
and a compiled-pattern cache, on Google's RE2 binding (`re2`, PyPI google-re2).

CEL specifies RE2 syntax and semantics. Matching runs in time linear in the text, so a pattern
like `^(a+)+$` cannot backtrack (Python's `re` took 531 s on 28 a's, issue 15). Patterns are
bounded in length (MAX_PATTERN_CHARS) and compiled with a bounded program memory (MAX_MEMORY);
literal patterns are checked at compile time, others when they are used (and charged their compile,
COMPILE_UNITS, by the cost model: cost.Estimator, interpreter). Matching is unanchored,
like RE2's PartialMatch. Texts that UTF-8 cannot encode (lone surrogates) raise
UnicodeEncodeError, which the evaluator reports as a CEL error.
"""

from __future__ import annotations

import re2

from .values import clip

MAX_PATTERN_CHARS = 2_000
# RE2's memory for the compiled program and its DFA cache (RE2's default is 8 MiB). Compiling
# is the costly part of a pattern: `[\p{Greek}\p{Han}]{400}` (56 404 instructions) took 17 ms
# here under 1 MiB; under 8 MiB, a 140-character pattern reached 160 000 instructions and
# 40 ms. 1 MiB keeps the worst compile near 20 ms; a literal pattern over it is refused at
# validation, with its position.
MAX_MEMORY = 1 << 20
# What compiling a pattern computed at run time is charged (cost units, about 0.2 us each: the
# worst compile above). Literal patterns compile once, when the expression is checked.
COMPILE_UNITS = 100_000
_OPTIONS = re2.Options()
_OPTIONS.max_mem = MAX_MEMORY
_OPTIONS.log_errors = False  # RE2 would print every rejected pattern to stderr
_CACHE: dict[str, re2._Regexp] = {}
_CACHE_LIMIT = 512


def is_compiled(pattern: str) -> bool:
    """Whether `pattern` is in the cache (using it costs no compile)."""
    return pattern in _CACHE


class RegexError(ValueError):
    """A pattern RE2 rejects, or one longer than MAX_PATTERN_CHARS."""


def compile_regex(pattern: str) -> re2._Regexp:
    """The compiled RE2 `pattern`, cached; RegexError if invalid or too long."""
    compiled = _CACHE.get(pattern)
    if compiled is not None:
        return compiled
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(
            f"regular expression '{clip(pattern)}' is longer than {MAX_PATTERN_CHARS} characters"
        )
    if _has_any_byte_escape(pattern):
        # \C matches one byte, which can split a character; Go's regexp (cel-go) rejects it.
        raise RegexError(f"invalid regular expression '{clip(pattern)}': \\C is not supported")
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args else "invalid"
        raise RegexError(f"invalid regular expression '{clip(pattern)}': {reason}") from None
    except UnicodeEncodeError:
        raise RegexError(
            f"invalid regular expression '{clip(pattern)}': not valid UTF-8 text"
        ) from None
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[pattern] = compiled
    return compiled


def _has_any_byte_escape(pattern: str) -> bool:
    i = pattern.find("\\")
    while 0 <= i < len(pattern) - 1:
        if pattern[i + 1] == "C":
            return True
        i = pattern.find("\\", i + 2)
    return False
