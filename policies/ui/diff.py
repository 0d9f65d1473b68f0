"""Side-by-side rows of a line diff aligned by rule, with changed characters marked inside
replaced lines.

Long runs of unchanged lines are folded to CONTEXT lines around each change (the page shows a
"N unchanged lines" row that expands them).
"""

from __future__ import annotations

import difflib
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from policies.engine.rule_align import aligned_ranges

CONTEXT = 3


def _marked(text: str, spans: list[tuple[int, int]]) -> SafeString:
    """`text` escaped, with the [start, end) spans wrapped in <mark>."""
    out, at = [], 0
    for start, end in spans:
        out.append(escape(text[at:start]))
        out.append(f"<mark>{escape(text[start:end])}</mark>")
        at = end
    out.append(escape(text[at:]))
    return mark_safe("".join(out))  # safe: every piece of text is escaped above


def _intraline(old: str, new: str) -> tuple[SafeString, SafeString]:
    """Both lines with the characters that differ marked (when the lines are alike)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    if matcher.ratio() < 0.4:  # mostly different: marking everything helps nobody
        return _marked(old, []), _marked(new, [])
    old_spans, new_spans = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            if i2 > i1:
                old_spans.append((i1, i2))
            if j2 > j1:
                new_spans.append((j1, j2))
    return _marked(old, old_spans), _marked(new, new_spans)


def _row(kind: str, ln: int | None, old: Any, rn: int | None, new: Any) -> dict[str, Any]:
    return {"kind": kind, "left_no": ln, "left": old, "right_no": rn, "right": new}


def _line_rows(a: list[str], b: list[str], a0: int, b0: int) -> list[dict[str, Any]]:
    """Unfolded rows of a line diff of `a` against `b`, numbered from a0 + 1 and b0 + 1."""
    rows: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [
                _row("equal", a0 + i1 + k + 1, a[i1 + k], b0 + j1 + k + 1, b[j1 + k])
                for k in range(i2 - i1)
            ]
            continue
        old_lines, new_lines = a[i1:i2], b[j1:j2]
        pairs = min(len(old_lines), len(new_lines)) if tag == "replace" else 0
        for k in range(pairs):
            left, right = _intraline(old_lines[k], new_lines[k])
            rows.append(_row("replace", a0 + i1 + k + 1, left, b0 + j1 + k + 1, right))
        for k in range(pairs, len(old_lines)):
            rows.append(_row("delete", a0 + i1 + k + 1, old_lines[k], None, ""))
        for k in range(pairs, len(new_lines)):
            rows.append(_row("insert", None, "", b0 + j1 + k + 1, new_lines[k]))
    return rows


def _folded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of equal rows longer than the context around the changes folded into one row."""
    out: list[dict[str, Any]] = []
    index = 0
    while index < len(rows):
        if rows[index]["kind"] != "equal":
            out.append(rows[index])
            index += 1
            continue
        end = index
        while end < len(rows) and rows[end]["kind"] == "equal":
            end += 1
        equal = rows[index:end]
        head = CONTEXT if index > 0 else 0
        tail = CONTEXT if end < len(rows) else 0
        if len(equal) > head + tail + 2:
            hidden = equal[head : len(equal) - tail]
            out += [*equal[:head], {"kind": "fold", "count": len(hidden), "rows": hidden}]
            out += equal[len(equal) - tail :]
        else:
            out += equal
        index = end
    return out


def side_by_side(*, old: str, new: str) -> dict[str, Any]:
    """{rows, added, removed, changed}: rows are equal | replace | delete | insert | fold
    (a fold row carries the hidden equal rows in `rows`). Aligned by rule
    (policies/engine/rule_align.py): lines are compared only within the same rule's blocks."""
    a, b = old.splitlines(), new.splitlines()
    rows: list[dict[str, Any]] = []
    for a_lo, a_hi, b_lo, b_hi in aligned_ranges(a, b):
        rows += _line_rows(a[a_lo:a_hi], b[b_lo:b_hi], a_lo, b_lo)
    kinds = [row["kind"] for row in rows]
    return {
        "rows": _folded(rows),
        "added": kinds.count("insert"),
        "removed": kinds.count("delete"),
        "changed": kinds.count("replace"),
    }
