"""DP aggregates of device statistics and DP heavy hitters: exact geometry and events, noise statistics,
and what thresholding keeps out."""

import math

import dp_accounting
import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.privacy import aggregates
from fedgen_debug.privacy.heavy_hitters import HeavyHittersConfig, dp_heavy_hitters, heavy_hitters_record, user_top_words
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.privacy.seeded_queries import SeededGaussianSumQuery


def test_bounded_sum_events_use_the_box_diameter_under_replace_one():
    # d = 2 statistics in [0, 1] x [0, 512]: centred records of norm ≤ √2/2; two records differ by ≤ √2.
    spec = aggregates.BoundedSum("s", (1.0, 512.0), noise_multiplier=4.0)
    assert spec.clip == pytest.approx(math.sqrt(2) / 2) and spec.sensitivity == pytest.approx(math.sqrt(2))
    assert spec.round_event() == dp_accounting.GaussianDpEvent(pytest.approx(2.0))  # σ/Δ = z·clip/(2·clip)
    add_remove = aggregates.BoundedSum("s", (1.0, 512.0), 4.0, "add-remove")
    assert add_remove.sensitivity == pytest.approx(math.sqrt(2)) and add_remove.round_event().noise_multiplier == 4.0
    np.testing.assert_allclose(spec.stddev, [4.0 * math.sqrt(2) / 2, 4.0 * math.sqrt(2) / 2 * 512])
    hist = aggregates.Histogram("h", 5, 2.0)
    assert hist.round_event().noise_multiplier == pytest.approx(2.0 / math.sqrt(2))  # one-hots differ by √2


def test_noised_sum_is_the_querys_record_by_record_sum_of_clipped_records():
    records = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, -2.0]])  # norms 5, 0.5, 2: the first and last clip to 1
    total, _ = aggregates.noised_sum(records, 1.0, 0.0, 2.0, (1, 2))
    np.testing.assert_allclose(total, [0.6 + 0.3, 0.8 + 0.4 - 1.0], atol=1e-6)
    # With noise: exactly what the query's accumulate_record gives one eager record at a time.
    query = SeededGaussianSumQuery(1.0, 2.0, (1, 2), 2.0)
    state = query.initial_global_state()
    params, sample = query.derive_sample_params(state), query.initial_sample_state(tf.TensorSpec([2], tf.float32))
    for record in records.astype(np.float32):
        sample = query.accumulate_record(params, sample, tf.constant(record))
    expected = query.get_noised_result(sample, state)[0].numpy()
    np.testing.assert_array_equal(aggregates.noised_sum(records, 1.0, 2.0, 2.0, (1, 2))[0], expected)


def test_bounded_sum_is_unbiased_with_the_stated_noise_and_clamps_records():
    spec = aggregates.BoundedSum("s", (1.0, 10.0), noise_multiplier=2.0)
    records = np.array([[0.2, 3.0], [1.0, 10.0], [0.0, 25.0], [0.5, -4.0]])  # the last two clamp to 10 and 0
    true = np.array([1.7, 23.0])
    draws = np.stack([aggregates.bounded_sum(records, spec, (s, 1)).values for s in range(400)])
    assert np.all(np.abs(draws.mean(axis=0) - true) <= 4 * spec.stddev / math.sqrt(400))
    np.testing.assert_allclose(draws.std(axis=0), spec.stddev, rtol=0.12)
    # Seeded: the same seed, the same release.
    np.testing.assert_array_equal(aggregates.bounded_sum(records, spec, (3, 1)).values, draws[3])


def test_histogram_counts_devices_per_bin():
    spec = aggregates.Histogram("h", 4, noise_multiplier=0.5)
    bins = [0, 1, 1, 3, 3, 3]
    draws = np.stack([aggregates.histogram(bins, spec, (s, 2)).values for s in range(300)])
    np.testing.assert_allclose(draws.mean(axis=0), [1, 2, 0, 3], atol=4 * 0.5 / math.sqrt(300))
    with pytest.raises(ValueError, match=r"indices in \[0, 4\)"):
        aggregates.histogram([4], spec, (0, 0))


def test_compute_draws_its_noise_from_the_secret_by_name():
    spec_a, spec_b = (aggregates.BoundedSum(n, (1.0,), 4.0) for n in ("a", "b"))
    records = np.full((50, 1), 0.3)
    secret = RunSecret(7)
    a1, a2 = aggregates.compute(spec_a, records, secret), aggregates.compute(spec_a, records, RunSecret(7))
    assert a1.values[0] == a2.values[0] != aggregates.compute(spec_b, records, secret).values[0]
    assert aggregates.compute(spec_a, records, RunSecret(8)).values[0] != a1.values[0]
    with pytest.raises(ValueError, match="noise_multiplier must be > 0"):
        aggregates.BoundedSum("z", (1.0,), 0.0)


def test_heavy_hitters_release_common_words_and_never_a_single_users():
    rng = np.random.default_rng(0)
    common = [f"common{i}" for i in range(8)]
    users = {}
    for u in range(400):
        words = list(rng.choice(common, size=6, replace=False)) + [f"only-user-{u}-{j}" for j in range(10)]
        users[f"u{u}"] = user_top_words(words + words[:6], 16)  # the common ones are the user's most frequent
    config = HeavyHittersConfig(size=100, max_words_per_user=16, noise_multiplier=1.0, threshold_delta=1e-6)
    released = dp_heavy_hitters(users, config, (1, 2))
    assert set(released) == set(common)  # ~300 users each: far above τ·√k ≈ 26
    # A word only one user holds passes with probability ≤ threshold_delta / (2k) each; over many seeds none does.
    for seed in range(20):
        assert not [w for w in dp_heavy_hitters(users, config, (seed, 3)) if w.startswith("only-user")]
    record = heavy_hitters_record(config, "p", 400, "r")
    assert record.extra_delta == 1e-6 and record.events == (dp_accounting.GaussianDpEvent(pytest.approx(1 / math.sqrt(2))),)
    # τ: 2k·Φ̄((τ − 1/√k)/σ) = threshold_delta.
    from statistics import NormalDist

    assert 2 * 16 * (1 - NormalDist().cdf((config.threshold - 0.25) / 1.0)) == pytest.approx(1e-6, rel=1e-6)


def test_user_top_words_are_the_most_frequent_distinct_words():
    assert user_top_words(["b", "a", "b", "c", "a", "b"], 2) == ["b", "a"]
    assert user_top_words(["z", "y"], 5) == ["y", "z"]
    with pytest.raises(ValueError, match="at most 2 distinct words"):
        dp_heavy_hitters({"u": ["a", "b", "c"]}, HeavyHittersConfig(10, 2), (0, 0))


def test_a_counts_noise_keeps_the_relative_error_of_100_users_and_never_falls_below_it():
    assert aggregates.scaled_noise(4.0, 30) == 4.0
    assert aggregates.scaled_noise(4.0, 100) == 4.0
    assert aggregates.scaled_noise(4.0, 3400) == pytest.approx(136.0)
    from fedgen_debug.experiments.gan import quantile_config, selection_counts

    # the released users' count: σ = z·√2/2 = 2.83 of 100 users; 96.2 of 3,400 (the same 2.8%)
    assert selection_counts(100).stddev[0] / 100 == pytest.approx(selection_counts(3400).stddev[0] / 3400)
    # the T4 quantile's noise on a round's share below the estimate (z/2/qN): 0.1 at 10 a round, 0.05 from 20
    for users, share in ((100, 0.1), (200, 0.05), (3400, 0.05)):
        config = quantile_config(0.25, users)
        assert config.below_estimate_stddev / config.clients_per_round == pytest.approx(share)
    with pytest.raises(ValueError, match="population"):
        aggregates.scaled_noise(4.0, 0)


def test_the_text_counts_keep_the_relative_error_of_the_demos_300_users():
    from fedgen_debug.device import lm_data
    from fedgen_debug.experiments.lm import qualified_count

    assert lm_data.oov_rate_spec(50).noise_multiplier == 4.0 and lm_data.oov_rate_spec(300).noise_multiplier == 4.0
    assert lm_data.oov_rate_spec(5000).noise_multiplier == pytest.approx(4.0 * 5000 / 300)
    # the released mean's error (σ over N): 2/300 at 300 users and at 5,000
    assert lm_data.oov_rate_spec(5000).stddev[0] / 5000 == pytest.approx(lm_data.oov_rate_spec(300).stddev[0] / 300)
    assert qualified_count(6000).noise_multiplier == pytest.approx(80.0)


def test_the_sum_traced_once_per_clip_and_width_is_the_record_by_record_query_bit_for_bit():
    """`noised_sum` clips and adds in one graph traced once per (clip, width) for any number of records:
    the same float32 sum as tf-privacy's accumulate_record called eagerly, one record at a time, in order."""
    rng = np.random.default_rng(5)
    for n, dim, clip in ((1, 3, 1.0), (37, 3, 1.0), (120, 3, 1.0), (64, 10, math.sqrt(2.0)), (9, 1, 0.5)):
        records = (rng.normal(size=(n, dim)) * rng.choice([0.1, 3.0], size=(n, 1))).astype(np.float32)
        query = SeededGaussianSumQuery(clip, 0.0, (0, 0), None)
        params = query.derive_sample_params(query.initial_global_state())
        state = query.initial_sample_state(tf.TensorSpec([dim], tf.float32))
        for record in records:
            state = query.accumulate_record(params, state, tf.constant(record))
        total, event = aggregates.noised_sum(records, clip, 0.0, 2.0, (1, 2))
        assert total.astype(np.float32).tobytes() == state.numpy().tobytes(), (n, dim, clip)
        assert event == dp_accounting.NonPrivateDpEvent()
    assert aggregates._clipped_sum(1.0, 3).experimental_get_tracing_count() == 1   # n = 1, 37, 120: one graph
