""" "Did you mean" suggestions by edit distance."""

from __future__ import annotations

from collections.abc import Iterable


def distance(a: str, b: str) -> int:
    """Levenshtein edit distance (insertions, deletions, substitutions)."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def closest(name: str, candidates: Iterable[str], *, limit: int = 2) -> str | None:
    """The candidate nearest to `name` within `limit` edits (case differences are free; ties
    go to the longer common prefix), else one that `name` abbreviates ("fre" -> "freeCpu")."""
    best, best_key = None, (limit + 1, 0)
    abbreviated = None
    for c in candidates:
        d = 0 if c.lower() == name.lower() else distance(name, c)
        key = (d, -_common_prefix(name, c))
        if d <= limit and key < best_key:
            best, best_key = c, key
        if abbreviated is None and len(name) >= 3 and c.lower().startswith(name.lower()):
            abbreviated = c
    return best or abbreviated


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """ "; did you mean 'x'?" or "" when nothing is close."""
    limit = 1 if len(name) <= 3 else 2
    match = closest(name, candidates, limit=limit)
    return f"; did you mean '{match}'?" if match else ""
