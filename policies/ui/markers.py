"""Editor markers: validation errors and evaluation errors at their place in the document, and
as the JSON the editor reads (`markers_json`).

The validator gives each CEL error a position inside its expression (line, column) and its place
in the document (doc_line, doc_column), exact inside multi-line scalars too
(policies/engine/positions.py). Errors the validator could not place (evaluation errors) are
mapped here through the same module, so the markers, the results list and the API agree.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from django.utils.safestring import mark_safe

from policies.engine.document import FieldError, PolicyInvalid, parse_text
from policies.engine.positions import document_position

_VARIABLE_ERROR = re.compile(r"^variable ([A-Za-z_]\w*):")
_JSON_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


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
            better = parsed and document_position(
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
        start = document_position(lines=lines, parsed=parsed, path=path, line=1, column=1)
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
