"""A queued shadow tally is validated before it becomes a row (policies/rollout/records.py):
counts of known outcomes only, each a whole number from 0 to 10**9; anything else is refused
with a ValueError naming the count, which decisions_store logs and skips."""

from __future__ import annotations

import pytest

from policies.rollout.records import shadow_tally_row


def _tally(**counts) -> dict:
    return {
        "policy": "room",
        "version": 2,
        "activeVersion": 1,
        "at": 1_700_000_000.0,
        "counts": counts,
    }


def test_counts_up_to_a_billion_are_kept():
    row = shadow_tally_row(_tally(same=10**9, moved=0, error=3))
    assert (row.same, row.moved, row.error, row.policy_version, row.active_version) == (
        10**9,
        0,
        3,
        2,
        1,
    )


@pytest.mark.parametrize(
    "counts",
    [
        {"same": 10**9 + 1},  # past the bound
        {"same": -1},
        {"same": True},  # a bool is an int to isinstance, not to the tally
        {"same": 1.0},
        {"same": "1"},
        {"made-up": 1},
    ],
)
def test_a_count_out_of_bounds_or_of_another_type_is_refused(counts):
    with pytest.raises(ValueError, match="a tally's count"):
        shadow_tally_row(_tally(**counts))


def test_a_tally_without_counts_or_policy_is_refused():
    with pytest.raises(TypeError):
        shadow_tally_row({**_tally(), "counts": [1]})
    with pytest.raises(TypeError):
        shadow_tally_row({**_tally(same=1), "policy": 7})
