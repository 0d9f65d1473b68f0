"""The preview table ranks ties as the draft-vs-published comparison does (issue 16)."""

from __future__ import annotations

from policies.ui.preview import _competition_ranks


def test_the_preview_table_gives_equal_totals_one_rank():
    # a and b tie at 80: both rank 1, c is third (the comparison's competition ranks)
    assert _competition_ranks({"a": 80, "b": 80, "c": 50}) == {"a": 1, "b": 1, "c": 3}
