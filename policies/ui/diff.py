"""Side-by-side rows of a line diff, with changed characters marked inside replaced lines.

Long runs of unchanged lines are folded to CONTEXT lines around each change (the page shows a
"N unchanged lines" row that expands them).
"""

from __future__ import annotations

import difflib
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

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


def side_by_side(*, old: str, new: str) -> dict[str, Any]:
    """{rows, added, removed, changed}: rows are equal | replace | delete | insert | fold
    (a fold row carries the hidden equal rows in `rows`)."""
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    rows: list[dict[str, Any]] = []
    added = removed = changed = 0
    opcodes = matcher.get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            equal = [
                _row("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]) for k in range(i2 - i1)
            ]
            head = CONTEXT if index > 0 else 0
            tail = CONTEXT if index < len(opcodes) - 1 else 0
            if len(equal) > head + tail + 2:
                rows += equal[:head]
                hidden = equal[head : len(equal) - tail]
                rows.append({"kind": "fold", "count": len(hidden), "rows": hidden})
                rows += equal[len(equal) - tail :]
            else:
                rows += equal
            continue
        old_lines, new_lines = a[i1:i2], b[j1:j2]
        pairs = min(len(old_lines), len(new_lines)) if tag == "replace" else 0
        for k in range(pairs):
            left, right = _intraline(old_lines[k], new_lines[k])
            rows.append(_row("replace", i1 + k + 1, left, j1 + k + 1, right))
            changed += 1
        for k in range(pairs, len(old_lines)):
            rows.append(_row("delete", i1 + k + 1, old_lines[k], None, ""))
            removed += 1
        for k in range(pairs, len(new_lines)):
            rows.append(_row("insert", None, "", j1 + k + 1, new_lines[k]))
            added += 1
    return {"rows": rows, "added": added, "removed": removed, "changed": changed}
