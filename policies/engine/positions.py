"""Exact document positions inside multi-line YAML scalars.

The validator knows where an error is inside an expression (line, column); for one-line plain
and quoted scalars `document.locate` turns that into a document position directly. Inside block
scalars (`|`, `>-`) and multi-line plain scalars the value is re-folded from its source lines
here, segment by segment, and the mapping is trusted only when re-folding those lines reproduces
the parsed value exactly (otherwise `locate`'s estimate stands). One mapping for the API's
docLine/docColumn, the results list and the editor's markers, so they always agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .document import ParsedDocument, Position

_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass(frozen=True)
class _Segment:
    """`length` characters of the scalar's value starting at `start` come from document
    line `line`, column `column` onwards (1-based)."""

    start: int
    line: int
    column: int
    length: int


def _value_at(data: Any, path: str) -> Any:
    current = data
    for part in _PATH_PART.finditer(path):
        key, index = part.group(1), part.group(2)
        try:
            current = current[int(index)] if index is not None else current[key]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return current


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_segments(lines: list[str], pos: Position) -> tuple[str, list[_Segment]] | None:
    """Value and segments of a `|` or `>` block scalar whose indicator is at `pos`."""
    body: list[tuple[int, str | None]] = []  # (document line, text without indentation)
    indent = None
    for number in range(pos.line + 1, len(lines) + 1):
        text = lines[number - 1]
        if not text.strip():
            body.append((number, None))
            continue
        if indent is None:
            indent = _indent(text)
        if _indent(text) < indent:
            break
        body.append((number, text))
    if indent is None:
        return None
    while body and body[-1][1] is None:
        body.pop()
    # Joins (YAML 1.2, 8.1.3): a literal keeps every line break; a folded scalar turns the
    # break between two normal lines into a space, keeps k blank lines as k breaks, and keeps
    # the breaks around more-indented lines.
    value, segments = "", []
    previous = None  # "normal" | "more" (more indented), of the last content line
    blanks = 0
    for number, text in body:
        if text is None:
            blanks += 1
            continue
        kind = "more" if _indent(text) > indent else "normal"
        if previous is None:
            value += "\n" * blanks
        elif pos.style == "|" or "more" in (kind, previous):
            value += "\n" * (blanks + 1)
        else:
            value += "\n" * blanks if blanks else " "
        blanks = 0
        content = text[indent:]
        segments.append(_Segment(len(value), number, indent + 1, len(content)))
        value += content
        previous = kind
    return value, segments


def _plain_segments(lines: list[str], pos: Position) -> tuple[str, list[_Segment]] | None:
    """Value and segments of a plain scalar starting at `pos` that may span lines."""
    first = lines[pos.line - 1]
    head = first[pos.column - 1 :]
    head = re.split(r"\s#", head, maxsplit=1)[0].rstrip()
    key_line = first.lstrip(" ")
    key_indent = _indent(first) + (len(key_line) - len(key_line.lstrip("- ")))
    value = head
    segments = [_Segment(0, pos.line, pos.column, len(head))]
    pending_breaks = 0
    for number in range(pos.line + 1, len(lines) + 1):
        text = lines[number - 1]
        if not text.strip():
            pending_breaks += 1
            continue
        if _indent(text) <= key_indent or text.lstrip().startswith("#"):
            break
        content = re.split(r"\s#", text.strip(), maxsplit=1)[0].rstrip()
        value += "\n" * pending_breaks if pending_breaks else " "
        pending_breaks = 0
        segments.append(_Segment(len(value), number, _indent(text) + 1, len(content)))
        value += content
    return value, segments


def document_position(
    *, lines: list[str], parsed: ParsedDocument, path: str, line: int, column: int
) -> tuple[int, int] | None:
    """(doc_line, doc_column) of (line, column) inside the scalar at `path`, or None when the
    scalar's source lines do not re-fold to its parsed value (then `locate`'s estimate stands)."""
    pos = parsed.positions.get(path)
    if pos is None:
        return None
    if pos.style in ("|", ">"):
        shaped = _block_segments(lines, pos)
    elif pos.style is None:
        shaped = _plain_segments(lines, pos)
    else:
        return None  # quoted: the validator's position is exact on one line
    actual = _value_at(parsed.data, path)
    if shaped is None or not isinstance(actual, str):
        return None
    value, segments = shaped
    if value.rstrip("\n") != actual.rstrip("\n"):
        return None  # a YAML feature this mapping does not model: keep the validator's
    value_lines = value.split("\n")
    if line > len(value_lines):
        return None
    offset = sum(len(v) + 1 for v in value_lines[: line - 1]) + column - 1
    for segment in segments:
        if offset < segment.start:  # in a joining space or break: the next segment's start
            return segment.line, segment.column
        if offset <= segment.start + segment.length:
            return segment.line, segment.column + offset - segment.start
    return None
