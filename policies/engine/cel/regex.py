"""RE2 regular expressions on Python's `re`: translation, validation and a compiled-pattern cache.

CEL's `matches`, `find` and `findAll` use RE2 syntax. Python's `re` is close but not equal, so
patterns are translated token by token and RE2-incompatible syntax is rejected with a clear
message (at compile time for literal patterns):
- rejected: look-around `(?=`, `(?!`, `(?<=`, `(?<!`; backreferences `\\1`, `(?P=name)`;
  conditionals; atomic groups and possessive quantifiers; `\\p{..}`/`\\pL` Unicode classes;
  `\\C`, `\\Z`; flags other than i, m, s (and RE2's U); repetition counts above 1000.
- translated: `$` (end of text unless multi-line, where Python would also match before a final
  newline) -> `(?!\\n)\\Z`-free `\\Z`; `\\z` -> `\\Z`; `\\d \\w \\s \\b \\B` -> ASCII classes as in RE2;
  `[[:alpha:]]`-style POSIX classes; `\\Q...\\E` literals.
Matching is unanchored, like RE2's PartialMatch.
"""

from __future__ import annotations

import re

_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_CLASS_ESCAPES = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_WORD = "[0-9A-Za-z_]"
_BOUNDARY = f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))"
_NON_BOUNDARY = f"(?:(?<={_WORD})(?={_WORD})|(?<!{_WORD})(?!{_WORD}))"
_MAX_REPEAT = 1000
_CACHE: dict[str, re.Pattern[str]] = {}
_CACHE_LIMIT = 512


class RegexError(ValueError):
    """A pattern RE2 would reject (or that this engine cannot run exactly as RE2)."""


def compile_regex(pattern: str) -> re.Pattern[str]:
    """The Python pattern equivalent to the RE2 `pattern`, cached; RegexError if invalid."""
    compiled = _CACHE.get(pattern)
    if compiled is not None:
        return compiled
    translated = translate(pattern)
    try:
        compiled = re.compile(translated)
    except re.error as e:
        raise RegexError(f"invalid regular expression '{pattern}': {e.msg}") from None
    except RecursionError:
        raise RegexError(f"regular expression '{pattern}' is nested too deeply") from None
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[pattern] = compiled
    return compiled


def translate(pattern: str) -> str:
    """Python `re` syntax for an RE2 pattern, or RegexError naming the unsupported construct."""
    return _Translator(pattern).run()


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        # Multi-line flag per open group; the outermost entry is the pattern's own state.
        self.multiline = [False]
        self.leading = True  # still at the start, where Python accepts global flags

    def fail(self, what: str) -> None:
        raise RegexError(f"invalid regular expression '{self.p}': {what}")

    def run(self) -> str:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == "\\":
                self.escape()
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
                continue
            elif c == ")":
                if len(self.multiline) == 1:
                    self.fail("unbalanced ')'")
                self.multiline.pop()
                self.out.append(")")
                self.i += 1
            elif c == "$":
                self.out.append("$" if self.multiline[-1] else "\\Z")
                self.i += 1
            elif c == "{":
                self.repeat()
            elif c in "*+?":
                self.out.append(c)
                self.i += 1
                if self.i < len(p) and p[self.i] == "+":
                    self.fail("possessive quantifiers are not supported by RE2")
            else:
                self.out.append(c)
                self.i += 1
            self.leading = False
        if len(self.multiline) != 1:
            self.fail("missing ')'")
        return "".join(self.out)

    def repeat(self) -> None:
        m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.p, self.i)
        if m is None or m.group(1) == "":
            # RE2 treats a '{' that does not start a valid repetition (like {,3}) as a literal.
            self.out.append("\\{")
            self.i += 1
            return
        low, _comma, high = m.groups()
        for number in (low, high):
            if number and int(number) > _MAX_REPEAT:
                self.fail(f"repetition count {number} exceeds {_MAX_REPEAT}")
        if high and int(high) < int(low):
            self.fail(f"bad repetition range {m.group()}")
        self.out.append(m.group())
        self.i = m.end()
        if self.i < len(self.p) and self.p[self.i] == "+":
            self.fail("possessive quantifiers are not supported by RE2")

    def escape(self) -> None:
        p = self.p
        if self.i + 1 >= len(p):
            self.fail("trailing backslash")
        e = p[self.i + 1]
        self.i += 2
        if e in _CLASS_ESCAPES:
            self.out.append(f"[{_CLASS_ESCAPES[e]}]")
        elif e in "DWS":
            self.out.append(f"[^{_CLASS_ESCAPES[e.lower()]}]")
        elif e == "b":
            self.out.append(_BOUNDARY)
        elif e == "B":
            self.out.append(_NON_BOUNDARY)
        elif e == "z":
            self.out.append("\\Z")
        elif e == "A":
            self.out.append("\\A")
        elif e == "Q":
            end = p.find("\\E", self.i)
            literal = p[self.i :] if end < 0 else p[self.i : end]
            self.out.append(re.escape(literal))
            self.i = len(p) if end < 0 else end + 2
        elif e.isdigit():
            if e == "0":
                self.out.append("\\x00")
            else:
                self.fail(f"backreferences (\\{e}) are not supported by RE2")
        elif e in "pP":
            self.fail("Unicode classes (\\p) are not supported here")
        elif e in "CZGKRXhHvVNkg":
            self.fail(f"escape \\{e} is not supported by RE2")
        elif e == "x":
            m = re.compile(r"\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2})").match(p, self.i)
            if m is None:
                self.fail("bad \\x escape")
            code = int(m.group(1) or m.group(2), 16)
            self.out.append(f"\\U{code:08x}" if code > 0xFFFF else f"\\u{code:04x}")
            self.i = m.end()
        elif e.isalpha() and e not in "afnrtv":
            self.fail(f"invalid escape \\{e}")
        else:
            self.out.append("\\" + e)

    def char_class(self) -> None:
        p = self.p
        self.i += 1
        parts = ["["]
        if self.i < len(p) and p[self.i] == "^":
            parts.append("^")
            self.i += 1
        first = True
        while True:
            if self.i >= len(p):
                self.fail("missing ']'")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and p.startswith("[:", self.i):
                end = p.find(":]", self.i + 2)
                name = p[self.i + 2 : end] if end > 0 else ""
                negated = name.startswith("^")
                if end < 0 or name.lstrip("^") not in _POSIX:
                    self.fail(f"invalid character class {p[self.i : end + 2]}")
                if negated:
                    self.fail("negated POSIX classes ([:^name:]) are not supported here")
                parts.append(_POSIX[name])
                self.i = end + 2
            elif c == "\\":
                if self.i + 1 >= len(p):
                    self.fail("trailing backslash")
                e = p[self.i + 1]
                self.i += 2
                if e in _CLASS_ESCAPES:
                    parts.append(_CLASS_ESCAPES[e])
                elif e in "DWSpP" or (e.isalpha() and e not in "afnrtvx"):
                    self.fail(f"escape \\{e} is not supported inside a character class")
                elif e == "x":
                    m = re.compile(r"\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2})").match(p, self.i)
                    if m is None:
                        self.fail("bad \\x escape")
                    code = int(m.group(1) or m.group(2), 16)
                    parts.append(f"\\U{code:08x}" if code > 0xFFFF else f"\\u{code:04x}")
                    self.i = m.end()
                else:
                    parts.append("\\" + e)
            elif c == "[":
                parts.append("\\[")
                self.i += 1
            else:
                parts.append(c)
                self.i += 1
        parts.append("]")
        self.out.append("".join(parts))

    def group(self) -> None:
        p = self.p
        if not p.startswith("(?", self.i):
            self.out.append("(")
            self.multiline.append(self.multiline[-1])
            self.i += 1
            self.leading = False
            return
        if p.startswith("(?P<", self.i) or p.startswith("(?<", self.i):
            m = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>").match(p, self.i)
            if m is None:
                if p.startswith("(?<=", self.i) or p.startswith("(?<!", self.i):
                    self.fail("look-behind is not supported by RE2")
                self.fail("bad named group")
            self.out.append(f"(?P<{m.group(1)}>")
            self.multiline.append(self.multiline[-1])
            self.i = m.end()
            self.leading = False
            return
        m = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])").match(p, self.i)
        if m is None:
            nxt = p[self.i + 2 : self.i + 3]
            if nxt in ("=", "!"):
                self.fail("look-ahead is not supported by RE2")
            if nxt == "P":
                self.fail("backreferences ((?P=name)) are not supported by RE2")
            if nxt == ">":
                self.fail("atomic groups are not supported by RE2")
            if nxt == "(":
                self.fail("conditionals are not supported by RE2")
            if nxt == "#":
                self.fail("comments are not supported by RE2")
            self.fail("bad group syntax")
        on, off, end = m.group(1), m.group(2) or "", m.group(3)
        for flag in on + off:
            if flag == "U":
                self.fail("the ungreedy flag (U) is not supported here")
            if flag not in "ims":
                self.fail(f"unknown flag '{flag}'")
        if not on and not off and end == ")":
            self.fail("empty flag group")
        multiline = self.multiline[-1]
        if "m" in on:
            multiline = True
        if "m" in off:
            multiline = False
        flags = on + ("-" + off if off else "")
        if end == ":":
            self.out.append(f"(?{flags}:")
            self.multiline.append(multiline)
        elif self.leading and not off and len(self.multiline) == 1:
            # Python accepts global flags only at the very start of the pattern.
            self.out.append(f"(?{on})")
            self.multiline[-1] = multiline
        else:
            self.fail("flag groups like (?i) must open the pattern; use a scoped (?i:...) group")
        self.i = m.end()
