"""Editor markers: validation errors and evaluation errors at their place in the document, and
as the JSON the editor reads (`markers_json`).

The validator gives each CEL error a position inside its expression (line, column) and, where
it can, in the document (doc_line, doc_column). Its document position is exact for plain
one-line and quoted scalars; inside YAML block scalars (`|`, `>-`) and multi-line plain scalars
it can point at the scalar's start. Here the expression position is mapped through the scalar's
source lines instead, and the mapping is trusted only when re-folding those lines reproduces
the parsed value exactly (otherwise the validator's position stands).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.utils.safestring import mark_safe

from policies.engine.document import FieldError, PolicyInvalid, Position, parse_text

_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_VARIABLE_ERROR = re.compile(r"^variable ([A-Za-z_]\w*):")
_JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


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


def _document_position(
    *, lines: list[str], parsed: Any, path: str, line: int, column: int
) -> tuple[int, int] | None:
    """(doc_line, doc_column) of (line, column) inside the scalar at `path`, or None."""
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


def _parsed(text: str) -> Any:
    try:
        return parse_text(text)
    except PolicyInvalid:
        return None


def error_markers(
    *, text: str, errors: list[FieldError]
) -> tuple[list[dict[str, Any]], list[FieldError]]:
    """(markers for the editor, errors that have no place in the document)."""
    lines = text.split("\n")
    parsed = None
    markers, unplaced = [], []
    for error in errors:
        line, column = error.doc_line, error.doc_column
        if error.line is not None and error.column is not None and error.path:
            parsed = parsed or _parsed(text)
            better = parsed and _document_position(
                lines=lines, parsed=parsed, path=error.path, line=error.line, column=error.column
            )
            if better:
                line, column = better
        if not line:
            unplaced.append(error)
            continue
        markers.append(
            {
                "line": line,
                "column": column or 1,
                "message": error.message,
                "severity": "error",
                "source": error.path or error.kind,
            }
        )
    return markers, unplaced


def _rule_path(spec: Any, name: str, message: str) -> str | None:
    """The document path of the expression behind an evaluation error of rule `name`."""
    variable = _VARIABLE_ERROR.match(message)
    if variable:
        for i, rule in enumerate(spec.variables):
            if rule.name == variable.group(1):
                return f"variables[{i}].expression"
    for key, rules in (("filters", spec.filters), ("scores", spec.scores)):
        for i, rule in enumerate(rules):
            if rule.name == name:
                return f"{key}[{i}].expression"
    for i, rule in enumerate(spec.match_conditions):
        if rule.name == name:
            return f"matchConditions[{i}].expression"
    return None


def evaluation_markers(*, text: str, spec: Any, evaluation: Any) -> list[dict[str, Any]]:
    """Warnings at the rules that failed to evaluate on some nodes: which nodes, and why."""
    if not evaluation.errors:
        return []
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for index, node_errors in evaluation.errors.items():
        for error in node_errors:
            grouped[(error.rule, error.message)].append(evaluation.node_names[index])
    parsed = _parsed(text)
    if parsed is None:
        return []
    lines = text.split("\n")
    markers = []
    for (rule, message), nodes in sorted(grouped.items()):
        path = _rule_path(spec, rule, message)
        pos = parsed.positions.get(path) if path else None
        if pos is None:
            continue
        start = _document_position(lines=lines, parsed=parsed, path=path, line=1, column=1)
        line, column = start or (pos.line, pos.column + (1 if pos.style in ("'", '"') else 0))
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        markers.append(
            {
                "line": line,
                "column": column,
                "message": f"evaluation error on {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({shown}): {message}",
                "severity": "warning",
                "source": path,
            }
        )
    return markers


def markers_json(*, markers: list[dict[str, Any]]) -> str:
    """Markers as JSON that is safe inside <script type="application/json"> (what
    django.utils.html.json_script does, without the tag, so the tag can carry data attributes)."""
    text = json.dumps(markers).translate(_JSON_SCRIPT_ESCAPES)
    return mark_safe(text)  # safe: <, > and & are escaped above
