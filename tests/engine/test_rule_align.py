"""Rule blocks and their alignment (policies/engine/rule_align.py): two documents' lines are
compared rule by rule, never one rule's line with another rule's."""

from __future__ import annotations

from policies.engine.rule_align import aligned_ranges, rule_blocks

OLD = """# a comment
name: p
schedulerNames: [s]
filters:
  - name: f
    expression: 'true'
scores:
  - name: a
    expression: x
    weight: 1
"""

NEW = OLD.replace("weight: 1", "weight: 2") + "  - name: b\n    expression: y\n    weight: 1\n"


def test_a_document_is_cut_at_each_top_level_key_and_each_named_item():
    lines = OLD.splitlines()
    blocks = rule_blocks(lines)
    assert [key for key, _, _ in blocks] == [
        ("", ""),
        ("", "name"),
        ("", "schedulerNames"),
        ("", "filters"),
        ("filters", "f"),
        ("", "scores"),
        ("scores", "a"),
    ]
    # consecutive and covering every line
    assert blocks[0][1] == 0 and blocks[-1][2] == len(lines)
    assert all(blocks[i][2] == blocks[i + 1][1] for i in range(len(blocks) - 1))
    assert lines[blocks[-1][1] : blocks[-1][2]] == [
        "  - name: a",
        "    expression: x",
        "    weight: 1",
    ]


def test_a_changed_weight_and_an_added_score_pair_each_rule_with_itself():
    old, new = OLD.splitlines(), NEW.splitlines()
    ranges = aligned_ranges(old, new)
    # score a against score a (the changed weight inside), then score b against nothing
    assert (7, 10, 7, 10) in ranges
    assert ranges[-1] == (10, 10, 10, 13)
    # the ranges cover both texts in order
    assert sum(hi - lo for lo, hi, _, _ in ranges) == len(old)
    assert sum(hi - lo for _, _, lo, hi in ranges) == len(new)


def test_a_removed_rule_and_a_renamed_one_are_compared_with_what_faces_them():
    old = OLD.splitlines()
    renamed = OLD.replace("- name: f", "- name: g").splitlines()
    ranges = aligned_ranges(old, renamed)
    assert (4, 6, 4, 6) in ranges  # filters/f against filters/g: still line by line
    without = OLD.replace("  - name: f\n    expression: 'true'\n", "").splitlines()
    assert (4, 6, 4, 4) in aligned_ranges(old, without)


def test_text_that_is_not_a_policy_is_still_covered():
    for old, new in (([], []), ([], ["x"]), (["  - a", "b"], ["c"]), (["::"], [])):
        ranges = aligned_ranges(old, new)
        assert sum(hi - lo for lo, hi, _, _ in ranges) == len(old)
        assert sum(hi - lo for _, _, lo, hi in ranges) == len(new)
