"""Exposure (Carlini et al. 2019): golden values on hand-made scores, ties against the canary, and
extrapolation on a known skew-normal."""

import math

import numpy as np
import pytest
from scipy import stats

from fedgen_debug.memorization.exposure import (exposure_extrapolation, exposure_from_rank, exposure_interpolation,
                                                log_perplexity_bits, rank)


def test_log_perplexity_is_bits_over_the_tokens():
    # P = 1/2 · 1/4 → 1 + 2 bits.
    assert log_perplexity_bits(np.log([[0.5, 0.25]]))[0] == pytest.approx(3.0)
    assert log_perplexity_bits(np.log([0.5, 0.5, 0.5])) == pytest.approx(3.0)


def test_rank_counts_ties_against_the_canary():
    references = [1.0, 2.0, 2.0, 3.0]
    assert list(rank([0.5, 1.0, 2.0, 2.5, 9.0], references)) == [1, 2, 4, 4, 5]


def test_exposure_is_exact_when_the_references_are_the_whole_space():
    # |R| = 8 fillings: the canary and 7 references; 2 references score ≤ the canary → rank 3.
    references = [1.0, 2.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert exposure_interpolation([2.5], references)[0] == pytest.approx(3.0 - math.log2(3))
    assert exposure_interpolation([0.1], references)[0] == pytest.approx(3.0)   # rank 1: log2 |R|
    assert exposure_interpolation([99.0], references)[0] == pytest.approx(0.0)  # last


def test_a_model_that_scores_every_filling_alike_exposes_nothing():
    assert exposure_interpolation([4.0], [4.0] * 9)[0] == pytest.approx(0.0)


def test_sampled_references_estimate_the_quantile_and_saturate_at_log2_m_plus_one():
    # 100 references, 10 of them ≤ the canary: rank 11 of 101 → quantile 11/101.
    references = np.arange(100, dtype=float)
    assert exposure_interpolation([9.5], references)[0] == pytest.approx(math.log2(101) - math.log2(11))
    assert exposure_interpolation([-1.0], references)[0] == pytest.approx(math.log2(101))
    assert exposure_from_rank([1, 11], 100) == pytest.approx([math.log2(101), math.log2(101 / 11)])


def test_bad_scores_and_ranks_are_refused():
    with pytest.raises(ValueError, match="finite"):
        exposure_interpolation([np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"ranks must be in \[1, 4\]"):
        exposure_from_rank([5], 3)


def test_extrapolation_recovers_the_tail_probability_of_a_known_skew_normal():
    rng = np.random.default_rng(0)
    shape, loc, scale = 4.0, 30.0, 6.0
    references = stats.skewnorm.rvs(shape, loc, scale, size=50_000, random_state=rng)
    for quantile in (0.5, 1e-3, 1e-6):
        canary = stats.skewnorm.ppf(quantile, shape, loc, scale)
        assert exposure_extrapolation([canary], references)[0] == pytest.approx(-math.log2(quantile), rel=0.08)


def test_extrapolation_reaches_past_where_interpolation_saturates():
    rng = np.random.default_rng(1)
    references = rng.normal(50.0, 5.0, size=1000)
    canary = [10.0]  # 8 standard deviations below: far beyond 1000 references
    assert exposure_interpolation(canary, references)[0] == pytest.approx(math.log2(1001))
    assert exposure_extrapolation(canary, references)[0] > 40


def test_extrapolation_needs_spread_references():
    with pytest.raises(ValueError, match="not all equal"):
        exposure_extrapolation([1.0], [2.0, 2.0, 2.0])
