"""The preview table ranks ties as the draft-vs-published comparison does (issue 16)."""

from __future__ import annotations

from policies.ui.preview import _rows
from tests.engine.test_compare import _ev


def test_the_preview_table_gives_equal_totals_one_rank():
    # a and b tie at 80: both rank 1, c is third (the comparison's competition ranks)
    rows, _ = _rows(_ev({"a": 80.0, "b": 80.0, "c": 50.0}), None)
    assert {r["node"]: r["rank"] for r in rows} == {"a": 1, "b": 1, "c": 3}
