"""The verdicts' tests and the empty-selection rule (`fedgen_debug.stats`), on hand-computed values."""

import math

import pytest

from fedgen_debug import stats


def test_two_proportions_z_by_hand():
    # 14/64 vs 2/64: pooled p = 16/128, se = sqrt(p(1-p) * 2/64) = 0.0585, difference 0.1875.
    assert stats.z_two_proportions(14, 64, 2, 64) == pytest.approx(0.1875 / math.sqrt(0.125 * 0.875 / 32))
    assert stats.z_two_proportions(0, 10, 0, 10) == 0.0


def test_a_dp_count_under_two_sigma_cannot_be_told_from_an_empty_selection():
    # The DP user counts of the 1st-percentile low GANs on 184 FEMNIST writers (σ 2.83): 0% seeds 0-2
    # held 0, 1, 0 writers; 5% seeds 10-11.
    assert [stats.indistinguishable_from_empty(c, 2.83) for c in (0.0, 2.8, 5.5)] == [True, True, True]
    assert [stats.indistinguishable_from_empty(c, 2.83) for c in (5.66, 7.4, 16.0)] == [False, False, False]
