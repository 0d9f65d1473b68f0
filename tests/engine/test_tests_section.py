"""Recorded test cases written into a document's `tests:` section as text (policy export)."""

from __future__ import annotations

import pytest
import yaml

from policies.engine.tests_section import TestsSectionError, with_tests

HEAD = "# keep me\nname: p\nschedulerNames: [s]\nfilters:\n  - name: f  # and me\n    expression: 'true'\n"
CASE = {
    "name": "new",
    "pod": {"metadata": {"name": "a"}},
    "cluster": "demo",
    "expect": {"applies": True},
}


def names(text: str) -> list[str]:
    return [t["name"] for t in yaml.safe_load(text)["tests"]]


@pytest.mark.parametrize(
    ("section", "after"),
    [
        ("", ""),  # no section: appended
        ("tests: []\n", ""),  # empty flow: becomes a block
        ("tests:\n  - name: old\n    pod: {}\n", ""),  # block, items indented
        ("tests:\n- name: old\n  pod: {}\n", ""),  # block, items at the key's column
        ("tests:\n  - name: old\n    pod: {}\n\n", "description: after\n"),  # a key follows
    ],
)
def test_the_cases_join_the_section_and_the_rest_of_the_text_is_kept(section, after):
    text = HEAD + section + after
    out = with_tests(text, [CASE])
    assert out.startswith(HEAD)
    assert names(out) == (["old"] if "old" in section else []) + ["new"]
    assert yaml.safe_load(out)["tests"][-1] == CASE
    if after:
        assert out.endswith(after) and yaml.safe_load(out)["description"] == "after"


def test_a_flow_section_with_items_is_refused_with_its_line():
    with pytest.raises(TestsSectionError, match="line 7: the tests: section is in flow style"):
        with_tests(HEAD + "tests: [{name: old, pod: {}}]\n", [CASE])


def test_no_cases_leave_the_text_as_it_is():
    assert with_tests(HEAD, []) == HEAD
