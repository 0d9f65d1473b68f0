"""Test cases written into a policy document's `tests:` section, keeping the rest of the text.

`policy export` puts the test cases recorded in schedweb (the playground's "Add as test case")
into the exported file, so `policy test` in a Git workflow runs them and an import elsewhere
keeps them. The document is edited as text, not re-dumped, so its comments and layout survive:
a block `tests:` section gets the new items at its end, an empty flow one (`tests: []`) becomes a
block, and a document without one gets the section appended.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

_TOP_LEVEL_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")
_TESTS_KEY = re.compile(r"^tests\s*:(?P<rest>.*)$")


class TestsSectionError(ValueError):
    """The document's `tests:` section has a shape this edit does not handle (flow style with
    items): the cases must be merged by hand."""


def _items(cases: Sequence[dict[str, Any]], indent: str) -> list[str]:
    """The cases as block-sequence items, `indent` deeper than `tests:`."""
    text = yaml.safe_dump(list(cases), sort_keys=False, allow_unicode=True, width=100)
    return [indent + line if line else line for line in text.rstrip("\n").split("\n")]


def with_tests(text: str, cases: Sequence[dict[str, Any]]) -> str:
    """`text` with `cases` ({name, pod (mapping), cluster, expect}) added to its `tests:`."""
    if not cases:
        return text
    lines = text.rstrip("\n").split("\n")
    at = next((i for i, line in enumerate(lines) if _TESTS_KEY.match(line)), None)
    if at is None:
        return "\n".join([*lines, "tests:", *_items(cases, "  ")]) + "\n"
    rest = _TESTS_KEY.match(lines[at]).group("rest").split(" #", 1)[0].strip()
    if rest == "[]":
        lines[at] = "tests:"
    elif rest:
        raise TestsSectionError(
            f"line {at + 1}: the tests: section is in flow style; move its items into block "
            "style (- name: ...) to export the recorded test cases with it"
        )
    end = at + 1
    while end < len(lines) and not _TOP_LEVEL_KEY.match(lines[end]):
        end += 1
    while end > at + 1 and not lines[end - 1].strip():  # blank lines stay after the section
        end -= 1
    # the new items line up with the existing ones (YAML allows `- ` at the key's own column)
    first = next(
        (
            line
            for line in lines[at + 1 : end]
            if line.strip() and not line.lstrip().startswith("#")
        ),
        "  -",
    )
    items = _items(cases, " " * (len(first) - len(first.lstrip(" "))))
    return "\n".join([*lines[:end], *items, *lines[end:]]) + "\n"


TestsSectionError.__test__ = False  # not a pytest class, despite its name
