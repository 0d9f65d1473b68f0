"""The score pipeline's arithmetic (DESIGN.md section 4), worked by hand."""

import pytest

from policies.engine.scoring import extender_score, normalize_minmax, normalize_none, weighted_total


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (42, 42.0),  # inside 0..100: the value itself
        (-5, 0.0),  # clamped up to 0
        (250, 100.0),  # clamped down to 100
        (99.5, 99.5),  # doubles stay doubles
        (0, 0.0),
        (100, 100.0),
    ],
)
def test_none_normalization_clamps_to_0_100(raw, expected):
    assert normalize_none(raw) == expected


@pytest.mark.parametrize(
    ("raws", "expected"),
    [
        # min 13, max 15: (13-13)*100/2 = 0, (14-13)*100/2 = 50, (15-13)*100/2 = 100
        ([13, 14, 15], [0.0, 50.0, 100.0]),
        # negative values are fine: min -10, max 10: (0+10)*100/20 = 50
        ([-10, 0, 10], [0.0, 50.0, 100.0]),
        # a node without a value (rejected or errored) scores 0 and does not move min/max
        ([2, None, 4], [0.0, 0.0, 100.0]),
        # all equal: equally good, all 100
        ([7, 7, 7], [100.0, 100.0, 100.0]),
        ([None, None], [0.0, 0.0]),
        ([], []),
    ],
)
def test_minmax_normalization_scales_over_the_candidates(raws, expected):
    assert normalize_minmax(raws) == expected


@pytest.mark.parametrize(
    ("normalized", "weights", "expected"),
    [
        # (80*2 + 20*1) / 3 = 180/3 = 60
        ([80.0, 20.0], [2, 1], 60.0),
        # (100*1 + 0*1 + 50*2) / 4 = 200/4 = 50
        ([100.0, 0.0, 50.0], [1, 1, 2], 50.0),
        # a weight of 0 shows the score without letting it count: 30*1 / 1 = 30
        ([30.0, 90.0], [1, 0], 30.0),
        # every weight 0: no information, total 0
        ([30.0, 90.0], [0, 0], 0.0),
        # no scores at all
        ([], [], 0.0),
        # float noise is rounded away: (10.1*1 + 79.9*1)/2 = 45 exactly
        ([10.1, 79.9], [1, 1], 45.0),
    ],
)
def test_total_is_the_weighted_mean(normalized, weights, expected):
    assert weighted_total(normalized, weights) == expected


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (0.0, 0),
        (4.99, 0),  # 0.499 rounds down
        (5.0, 1),  # 0.5 rounds up (half up, not Python's banker's rounding)
        (45.0, 5),  # 4.5 -> 5
        (44.9, 4),
        (95.0, 10),
        (100.0, 10),
    ],
)
def test_extender_score_is_total_over_10_rounded_half_up(total, expected):
    assert extender_score(total) == expected
    assert type(extender_score(total)) is int  # the protocol rejects 7.0
