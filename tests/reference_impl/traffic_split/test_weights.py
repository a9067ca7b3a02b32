"""Seed 001 4.3: weight_new = new_ready / (old_ready + new_ready), as HAProxy weights."""

from __future__ import annotations

import pytest

from servecert.reference_impl.traffic_split import weights


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [(4, 0, (256, 0)), (3, 1, (192, 64)), (2, 2, (128, 128)), (1, 3, (64, 192)), (0, 4, (0, 256)), (2, 1, (171, 85)), (0, 0, (256, 0))],
)
def test_weights_follow_the_ready_ratio(old: int, new: int, expected: tuple[int, int]) -> None:
    assert weights.split(old, new) == expected
    if old + new:
        assert abs(weights.share(*expected) - new / (old + new)) < 1 / weights.MAX_WEIGHT


def test_negative_counts_are_an_error() -> None:
    with pytest.raises(ValueError, match="ready counts must be >= 0"):
        weights.split(-1, 2)
