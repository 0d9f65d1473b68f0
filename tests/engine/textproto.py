"""A small reader for the protobuf text format, enough for cel-spec's SimpleTestFile documents
(tests/simple/testdata/*.textproto). Test-only code: no schema, so every field is a list of its
occurrences; a message is a dict, a string is `bytes` (text-format strings are byte strings;
decode them where the field is a proto `string`), any other scalar is its token text
(`42`, `-1.5e3`, `inf`, `true`, `NULL_VALUE`)."""

from __future__ import annotations

import re
from typing import Any

Message = dict[str, list[Any]]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<name>\[[A-Za-z0-9_./]+\]|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[-+]?(?:0[xX][0-9A-Fa-f]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFuU]?|inf|nan)
      |-[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[{}<>:,;\[\]])
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\v",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
    "?": b"?",
}


class TextprotoError(ValueError):
    pass


def unescape(body: str) -> bytes:
    """A text-format string literal's body (without quotes) as bytes: C escapes, octal and hex
    escapes are bytes, \\u and \\U escapes are code points in UTF-8."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = body[i + 1]
        if e in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[e]
            i += 2
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert m is not None
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif e in "xX":
            m = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2 :])
            if m is None:
                raise TextprotoError(f"bad \\x escape in {body!r}")
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        elif e in "uU":
            n = 4 if e == "u" else 8
            digits = body[i + 2 : i + 2 + n]
            if not re.fullmatch(f"[0-9A-Fa-f]{{{n}}}", digits):
                raise TextprotoError(f"bad \\{e} escape in {body!r}")
            out += chr(int(digits, 16)).encode("utf-8", "surrogatepass")
            i += 2 + n
        else:
            raise TextprotoError(f"unknown escape \\{e} in {body!r}")
    return bytes(out)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise TextprotoError(f"line {line}: unexpected {text[pos : pos + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append((kind, m.group(), pos))
        pos = m.end()
    return tokens


def parse(text: str) -> Message:
    """The message a text-format document describes."""
    tokens = _tokens(text)
    i = 0

    def at(k: int) -> tuple[str, str, int]:
        return tokens[k] if k < len(tokens) else ("end", "", len(text))

    def fail(k: int, what: str) -> TextprotoError:
        _, value, pos = at(k)
        line = text.count("\n", 0, pos) + 1
        return TextprotoError(f"line {line}: expected {what}, got {value!r}")

    def message(close: str | None) -> Message:
        nonlocal i
        fields: Message = {}
        while True:
            kind, value, _ = at(i)
            if close is None and kind == "end":
                return fields
            if value == close:
                i += 1
                return fields
            if kind != "name":
                raise fail(i, "a field name")
            name = value
            i += 1
            colon = at(i)[1] == ":"
            if colon:
                i += 1
            fields.setdefault(name, []).extend(field_values(colon))
            if at(i)[1] in (",", ";"):
                i += 1

    def field_values(colon: bool) -> list[Any]:
        nonlocal i
        if at(i)[1] == "[" and colon:  # a list of values: `f: [1, 2]`
            i += 1
            values = []
            while at(i)[1] != "]":
                values.append(one_value())
                if at(i)[1] == ",":
                    i += 1
            i += 1
            return values
        return [one_value()]

    def one_value() -> Any:
        nonlocal i
        kind, value, _ = at(i)
        if value in ("{", "<"):
            i += 1
            return message("}" if value == "{" else ">")
        if kind == "string":
            parts = []
            while at(i)[0] == "string":  # adjacent literals concatenate
                parts.append(unescape(at(i)[1][1:-1]))
                i += 1
            return b"".join(parts)
        if kind in ("number", "name"):
            i += 1
            return value
        raise fail(i, "a value")

    return message(None)
