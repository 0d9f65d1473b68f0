"""A policy document's lines cut into rule blocks, and two documents' blocks paired by rule, so
that a text diff compares each rule with itself.

A plain line diff (LCS) pairs whatever lines are equal: change `weight: 1` to `2` in one score
and add another score that ends in `weight: 1`, and it matches the old `weight: 1` with the new
score's, reporting the first score's whole tail as inserted (issue 29). Here each top-level key
(`name:`, `filters:`, `queue:`, ...) and each `- name: X` item under a section starts a block
keyed by (section, name); the blocks are aligned by key first (an LCS over keys), and lines are
diffed only inside a pair of blocks with the same key, or inside a run of unpaired blocks (a
renamed rule is then still compared line by line with its old self). Text only: no YAML is
parsed, so a document that does not parse is still diffed."""

from __future__ import annotations

import difflib
import re

_TOP = re.compile(r"([A-Za-z_][\w-]*)\s*:")
_ITEM = re.compile(r"\s*-\s+name\s*:\s*['\"]?([^'\"\s#]+)")

Block = tuple[tuple[str, str], int, int]  # (section, name), first line, end line (exclusive)


def rule_blocks(lines: list[str]) -> list[Block]:
    """`lines` cut into consecutive blocks covering every line: a top-level key starts one
    keyed ("", key), a `- name: X` item one keyed (section, X); anything before the first key
    (a leading comment) is its own block keyed ("", "")."""
    blocks: list[Block] = []
    section, key, start = "", ("", ""), 0
    for index, line in enumerate(lines):
        top = _TOP.match(line)
        item = None if top else _ITEM.match(line)
        if top is None and item is None:
            continue
        if index > start:
            blocks.append((key, start, index))
        start = index
        if top is not None:
            section, key = top[1], ("", top[1])
        else:
            key = (section, item[1])
    if len(lines) > start:
        blocks.append((key, start, len(lines)))
    return blocks


def aligned_ranges(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """(old_start, old_end, new_start, new_end) line ranges, in order and covering both texts,
    each to be line-diffed on its own: a rule's block against the same rule's, or a run of
    blocks with no partner against the run facing it (either may be empty)."""
    a, b = rule_blocks(old), rule_blocks(new)
    matcher = difflib.SequenceMatcher(None, [k for k, _, _ in a], [k for k, _, _ in b], False)
    ranges = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            ranges += [
                (a[i][1], a[i][2], b[j][1], b[j][2]) for i, j in zip(range(i1, i2), range(j1, j2))
            ]
            continue
        old_lo = a[i1][1] if i2 > i1 else (a[i1 - 1][2] if i1 else 0)
        old_hi = a[i2 - 1][2] if i2 > i1 else old_lo
        new_lo = b[j1][1] if j2 > j1 else (b[j1 - 1][2] if j1 else 0)
        new_hi = b[j2 - 1][2] if j2 > j1 else new_lo
        ranges.append((old_lo, old_hi, new_lo, new_hi))
    return ranges
