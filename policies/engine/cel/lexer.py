"""Tokens of CEL source text, with the offset of each token for error positions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .deadline import deadline_check
from .values import UInt, bounded_int

KEYWORDS = frozenset(("true", "false", "null", "in"))
# Reserved by the CEL spec: not usable as identifiers, function names or field names.
RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)

_NUMBER = re.compile(
    r"(?P<float>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<hex>0[xX][0-9a-fA-F]+)(?P<hexu>[uU])?"
    r"|(?P<int>[0-9]+)(?P<intu>[uU])?"
)
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_SPACE = re.compile(r"(?:[ \t\r\n\f]+|//[^\n]*)+")
_STRING_START = re.compile(r"(?P<prefix>[rR][bB]?|[bB][rR]?)?(?P<quote>'''|\"\"\"|'|\")")
_PUNCT = (
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "<",
    ">",
    "!",
    "+",
    "-",
    "*",
    "/",
    "%",
    "?",
    ":",
    ".",
    ",",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
)
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "?": "?",
    '"': '"',
    "'": "'",
    "`": "`",
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: (
        str  # "int", "uint", "double", "string", "bytes", "ident", "eof", or the punctuation itself
    )
    value: Any
    pos: int  # offset of the first character
    end: int


class LexError(Exception):
    """A token that cannot be read; `pos` is the offset to report."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def tokenize(source: str) -> list[Token]:
    """All tokens of `source` followed by an "eof" token, or LexError at the first bad one."""
    tokens: list[Token] = []
    pos, n = 0, len(source)
    while True:
        m = _SPACE.match(source, pos)
        if m:
            pos = m.end()
        if pos >= n:
            tokens.append(Token("eof", None, n, n))
            return tokens
        c = source[pos]
        m = _STRING_START.match(source, pos)
        if m and (m.group("prefix") is None or c in "rRbB"):
            token = _read_string(source, pos, m)
        elif c.isdigit() or (c == "." and pos + 1 < n and source[pos + 1].isdigit()):
            token = _read_number(source, pos)
        elif c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z"):
            m = _IDENT.match(source, pos)
            assert m is not None
            token = Token("ident", m.group(), pos, m.end())
        else:
            for p in _PUNCT:
                if source.startswith(p, pos):
                    token = Token(p, p, pos, pos + len(p))
                    break
            else:
                if c == "&" or c == "|":
                    raise LexError(f"unexpected character '{c}'; did you mean '{c}{c}'?", pos)
                if c == "=":
                    raise LexError("unexpected character '='; did you mean '=='?", pos)
                raise LexError(f"unexpected character {c!r}", pos)
        tokens.append(token)
        pos = token.end
        if not len(tokens) & 1023:  # a request's wall-clock guard covers compiling too
            deadline_check()


def _read_number(source: str, pos: int) -> Token:
    m = _NUMBER.match(source, pos)
    assert m is not None
    end = m.end()
    if end < len(source) and (source[end].isalnum() or source[end] == "_"):
        tail = re.match(r"[_a-zA-Z0-9.]*", source[end:])
        text = source[pos : end + (tail.end() if tail else 0)]
        raise LexError(f"invalid number literal '{text}'", pos)
    if m.group("float") is not None:
        return Token("double", float(m.group("float")), pos, end)
    if m.group("hex") is not None:
        value = bounded_int(m.group("hex")[2:], 16)
        kind = "uint" if m.group("hexu") else "int"
    else:
        value = bounded_int(m.group("int"), 10)
        kind = "uint" if m.group("intu") else "int"
    if kind == "uint":
        if value > 2**64 - 1:
            raise LexError("uint literal out of range (max 18446744073709551615u)", pos)
        return Token("uint", UInt(value), pos, end)
    # Range of ints is checked by the parser, which knows whether a '-' precedes the literal.
    return Token("int", value, pos, end)


def _read_string(source: str, start: int, m: re.Match[str]) -> Token:
    prefix = (m.group("prefix") or "").lower()
    quote = m.group("quote")
    raw, is_bytes = "r" in prefix, "b" in prefix
    pos = m.end()
    n = len(source)
    out: list[str] = []
    byte_out = bytearray()

    def emit_text(text: str) -> None:
        if is_bytes:
            byte_out.extend(text.encode("utf-8", "surrogatepass"))
        else:
            out.append(text)

    while True:
        if pos >= n or (len(quote) == 1 and source[pos] in "\r\n"):
            raise LexError("unterminated string literal", start)
        if source.startswith(quote, pos):
            pos += len(quote)
            break
        c = source[pos]
        if c != "\\":
            emit_text(c)
            pos += 1
            continue
        if raw:
            # Raw strings keep backslashes; an escaped quote does not end the literal.
            if pos + 1 < n and source[pos + 1] == quote[0]:
                emit_text(source[pos : pos + 2])
                pos += 2
            else:
                emit_text(c)
                pos += 1
            continue
        if pos + 1 >= n:
            raise LexError("unterminated string literal", start)
        e = source[pos + 1]
        if e in _SIMPLE_ESCAPES:
            emit_text(_SIMPLE_ESCAPES[e])
            pos += 2
        elif e in "xX":
            digits = source[pos + 2 : pos + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{2}", digits):
                raise LexError("invalid escape: \\x needs two hex digits", pos)
            code = int(digits, 16)
            if is_bytes:
                byte_out.append(code)
            else:
                out.append(chr(code))
            pos += 4
        elif e in "uU":
            width = 4 if e == "u" else 8
            if is_bytes:
                raise LexError(f"invalid escape: \\{e} is not allowed in bytes literals", pos)
            digits = source[pos + 2 : pos + 2 + width]
            if not re.fullmatch(rf"[0-9a-fA-F]{{{width}}}", digits):
                raise LexError(f"invalid escape: \\{e} needs {width} hex digits", pos)
            code = int(digits, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise LexError(f"invalid escape: \\{e}{digits} is not a Unicode scalar value", pos)
            out.append(chr(code))
            pos += 2 + width
        elif e.isdigit():
            digits = source[pos + 1 : pos + 4]
            if not re.fullmatch(r"[0-3][0-7]{2}", digits):
                raise LexError("invalid escape: octal escapes need three digits \\000-\\377", pos)
            code = int(digits, 8)
            if is_bytes:
                byte_out.append(code)
            else:
                out.append(chr(code))
            pos += 4
        else:
            shown = "\\" + e if e.isprintable() else f"\\{e!r}"
            raise LexError(f"invalid escape sequence '{shown}'", pos)
    if is_bytes:
        return Token("bytes", bytes(byte_out), start, pos)
    return Token("string", "".join(out), start, pos)
