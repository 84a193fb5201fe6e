"""The adaptive clip (`DPConfig.clip_quantile`, `dp_query.AdaptiveClipSumQuery`): exact rounds on
hand-built clients, the quantile it reaches with most devices sending nothing, the noise of both its
Gaussians, fresh noise every round (a repeated draw would cancel in a difference of two releases), ε
equal to the fixed clip's, and its config, flags and runs."""

import argparse
import logging
import math

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_privacy.privacy.dp_query import test_utils

from fedgen_debug.cli.privacy_flags import add_privacy_flags, privacy_settings
from fedgen_debug.privacy.accounting import DPFedAvgPrivacy, epsilon_of_events
from fedgen_debug.training.config import DPConfig, PrivacySettings, TrainingConfig
from fedgen_debug.training.dp_query import CLIP_COUNT_SHARE, adaptive_noise, dp_query, round_event, sum_query
from fedgen_debug.training.update_canaries import UpdateCanaryPlan


def clip_of(state) -> float:
    """The clip the next round uses (the normalized query's numerator is the adaptive sum)."""
    return float(state.numerator_state.sum_state.l2_norm_clip)


def test_a_noiseless_round_clips_then_steps_the_clip_by_the_unclipped_fraction():
    # qN = 4, S = 1, median: norms 10 and 20 are clipped (-0.5 each), 0.5 is not (+0.5), and the device
    # sending zeros reports the midpoint (0): unclipped fraction 0.5 + (-0.5)/4 = 0.375, so the clip
    # grows by exp(0.2 × (0.5 - 0.375)).
    records = [tf.constant([6.0, 8.0]), tf.constant([0.3, -0.4]), tf.zeros(2), tf.constant([0.0, 20.0])]
    query = dp_query(DPConfig(4, 0.0, 1.0, clip_quantile=0.5), (1, 2))
    result, state = test_utils.run_query(query, records)
    expected = (np.array([0.6, 0.8]) + np.array([0.3, -0.4]) + np.array([0.0, 1.0])) / 4
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)
    assert clip_of(state) == pytest.approx(math.exp(0.2 * 0.125), rel=1e-6)
    # The next round clips at the new S: [6, 8] to norm e^0.025.
    result, state = test_utils.run_query(query, records[:1], global_state=state)
    np.testing.assert_allclose(result.numpy(), np.array([0.6, 0.8]) * math.exp(0.025) / 4, rtol=1e-6)
    assert clip_of(state) == pytest.approx(math.exp(0.025 + 0.2 * 0.125), rel=1e-6)


def test_devices_that_send_nothing_do_not_move_the_clip():
    query = dp_query(DPConfig(3, 0.0, 0.7, clip_quantile=0.3), (1, 2))
    _, state = test_utils.run_query(query, [tf.zeros(2)] * 3)
    assert clip_of(state) == pytest.approx(0.7 * math.exp(-0.2 * (0.5 - 0.3)), rel=1e-6)  # the midpoint, 0.5
    # ... and a round without them is the same round (the tf backend leaves them out of the sum).
    records = [tf.constant([3.0, 4.0]), tf.constant([0.1, 0.0])]
    with_zeros = test_utils.run_query(query, records + [tf.zeros(2)])
    without = test_utils.run_query(query, records)
    np.testing.assert_array_equal(with_zeros[0].numpy(), without[0].numpy())
    assert clip_of(with_zeros[1]) == clip_of(without[1])


def test_with_most_devices_silent_the_clip_reaches_the_median_of_the_updates_sent():
    # 10 of qN = 50 send updates of norms ~0.1 (a 5× lognormal spread), 40 send nothing; the clip starts
    # 5× too large. With the step × qN/k (the GAN scenario's `_with_selected_clip_step`) and the demo's
    # z = 0.3, the clip ends near the median norm.
    rng = np.random.default_rng(0)
    config = DPConfig(50, 0.3, 0.5, clip_quantile=0.5, clip_learning_rate=0.2 * 50 / 10)
    query = dp_query(config, (3, 4))
    state, clips = None, []
    for _ in range(80):
        norms = 0.1 * rng.lognormal(0.0, 0.4, size=10)
        records = [tf.constant([n, 0.0], tf.float32) for n in norms]
        _, state = test_utils.run_query(query, records, global_state=state)
        clips.append(clip_of(state))
    settled = np.array(clips[40:])
    assert 0.08 < np.median(settled) < 0.125, np.median(settled)
    assert clips[0] < 0.5 and clips[15] < 0.2  # it got there within ~15 rounds


def test_the_sum_and_the_count_have_the_noise_that_splits_the_fixed_clips_privacy():
    z, qn = 1.2, 40
    sum_z, count_std = adaptive_noise(DPConfig(qn, z, 0.2, clip_quantile=0.5))
    assert sum_z == pytest.approx(z / math.sqrt(1 - CLIP_COUNT_SHARE))
    assert count_std == pytest.approx(z / (2 * math.sqrt(CLIP_COUNT_SHARE)))
    # The sum's noise, measured: zero records, 2,000 coordinates, std z_sum·S/qN on the mean.
    query = dp_query(DPConfig(qn, z, 0.2, clip_quantile=0.5), (5, 6))
    result, state = test_utils.run_query(query, [tf.zeros(2000)] * 3)
    expected = sum_z * 0.2 / qn
    assert abs(result.numpy().std() / expected - 1) < 0.1
    # The count's noise, measured through the clip: with every device silent the unclipped fraction is
    # 0.5 + N(0, count_std/qN), so log(S_t+1/S_t) has std 0.2·count_std/qN.
    steps, previous = [], clip_of(state)
    for _ in range(300):
        _, state = test_utils.run_query(query, [tf.zeros(2)], global_state=state)
        steps.append(math.log(clip_of(state) / previous))
        previous = clip_of(state)
    assert abs(np.std(steps) / (0.2 * count_std / qn) - 1) < 0.15
    assert abs(np.mean(steps)) < 4 * 0.2 * count_std / qn / math.sqrt(300)


def test_the_noise_is_fresh_every_round_so_a_difference_of_two_releases_keeps_it():
    """The attack: were the sum's noise seed restarted each round (tf-privacy rebuilds the sum's state
    when the clip moves), two rounds on the same records would carry the same noise and their difference
    would be exactly the difference of the records. It must not be."""
    config = DPConfig(10, 1.0, 1.0, clip_quantile=0.5)
    query = dp_query(config, (7, 8))
    records = [tf.zeros(4000)] * 10    # silent devices: the clip only drifts with the count's noise
    first, state = test_utils.run_query(query, records)
    second, state2 = test_utils.run_query(query, records, global_state=state)
    a = first.numpy() / clip_of(query.initial_global_state())
    b = second.numpy() / clip_of(state)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.1
    assert np.std(b - a) > 0.1   # the noise does not cancel: about √2·z/qN = 0.14
    # The same secret gives the same stream (a resumed run draws the same noise) ...
    again, _ = test_utils.run_query(dp_query(config, (7, 8)), records)
    np.testing.assert_array_equal(again.numpy(), first.numpy())
    # ... and it is not the fixed clip's stream for the same seed.
    fixed, _ = test_utils.run_query(dp_query(DPConfig(10, 1.0, 1.0), (7, 8)), records)
    assert abs(np.corrcoef(fixed.numpy(), first.numpy())[0, 1]) < 0.1


@pytest.mark.parametrize("accounting", ["replace-one", "paper"])
def test_epsilon_is_the_fixed_clips_and_the_query_reports_the_charged_event(accounting):
    adaptive = DPConfig(50, 0.3, 0.5, accounting, clip_quantile=0.5)
    fixed = DPConfig(50, 0.3, 0.5, accounting)
    params = DPFedAvgPrivacy(50, 184, 0.3, 200, accounting=accounting)
    eps_adaptive = epsilon_of_events([params.dp_event(round_event(adaptive))], 1e-4, accounting)
    eps_fixed = epsilon_of_events([params.dp_event(round_event(fixed))], 1e-4, accounting)
    assert eps_adaptive.epsilon == pytest.approx(eps_fixed.epsilon, rel=1e-9)
    # Each Gaussian in units of its sensitivity: the sum's 2S (replace-one) or S, the count's 1 or 0.5.
    sum_event, count_event = round_event(adaptive).events
    sensitivity = 2.0 if accounting == "replace-one" else 1.0
    assert sum_event.noise_multiplier == pytest.approx(adaptive_noise(adaptive)[0] / sensitivity)
    assert count_event.noise_multiplier == pytest.approx(adaptive_noise(adaptive)[1] / (sensitivity / 2))
    query = dp_query(adaptive, (1, 2))
    _, _, event = query.get_noised_result(query.initial_sample_state([tf.zeros(2)]), query.initial_global_state())
    assert event == round_event(adaptive)
    assert type(round_event(DPConfig(50, 0.0, 0.5, clip_quantile=0.5))).__name__ == "NonPrivateDpEvent"


def test_update_canaries_need_a_fixed_clip():
    plan = UpdateCanaryPlan(np.ones((2, 1), bool), 0, 0.5)
    with pytest.raises(ValueError, match="update canaries are inserted at a fixed clip"):
        sum_query(DPConfig(5, 1.0, 0.5, clip_quantile=0.5), (1, 2), plan)


@pytest.mark.parametrize("kwargs, message", [
    (dict(clip_quantile=1.0), r"clip_quantile must be in \(0, 1\). Found 1.0."),
    (dict(clip_quantile=0.0), r"clip_quantile must be in \(0, 1\). Found 0.0."),
    (dict(clip=None, noise_multiplier=0.0, clip_quantile=0.5), r"give the first round's clip too"),
    (dict(clip_quantile=0.5, clip_learning_rate=0.0), r"clip_learning_rate must be > 0. Found 0.0."),
])
def test_adaptive_clip_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DPConfig(**{"clients_per_round": 5, "noise_multiplier": 1.0, "clip": 0.5, **kwargs})


def test_a_fixed_clip_saves_as_before_and_an_adaptive_one_round_trips():
    fixed = TrainingConfig(rounds=2, dp=DPConfig(2, 1.0, 0.5))
    assert set(fixed.to_json()["dp"]) == {"clients_per_round", "noise_multiplier", "clip", "accounting"}
    adaptive = TrainingConfig(rounds=2, dp=DPConfig(2, 1.0, 0.5, clip_quantile=0.4))
    assert adaptive.to_json()["dp"]["clip_quantile"] == 0.4
    assert TrainingConfig.from_json(adaptive.to_json()) == adaptive


def test_more_clients_per_round_than_users_takes_them_all_and_says_so(caplog):
    preset = TrainingConfig(rounds=3, dp=DPConfig(10, 0.3, 0.5))
    with caplog.at_level(logging.WARNING):
        assert PrivacySettings(clients_per_round=1000).override(preset, population=298).dp.clients_per_round == 298
    assert "clients per round 1000 is more than the 298 users: every round takes all of them" in caplog.text


def test_the_flag_reaches_the_training_config_and_keeps_the_presets_otherwise():
    parser = argparse.ArgumentParser()
    add_privacy_flags(parser)
    settings = PrivacySettings(**privacy_settings(parser.parse_args(["--adaptive-clip", "0.5", "--clip", "0.2"])))
    preset = TrainingConfig(rounds=3, dp=DPConfig(10, 0.3, 0.5))
    dp = settings.override(preset, population=100).dp
    assert (dp.clip, dp.clip_quantile, dp.noise_multiplier) == (0.2, 0.5, 0.3)
    unset = PrivacySettings(**privacy_settings(parser.parse_args([])))
    assert unset.override(preset, population=100).dp == preset.dp
    assert unset.override(preset, population=4).dp.clients_per_round == 4   # a preset's qN, on fewer users: quietly
    assert "clip_quantile" not in unset.saved_json()
    with pytest.raises(ValueError, match=r"clip_quantile must be in \(0, 1\). Found 2.0."):
        PrivacySettings(clip_quantile=2.0).check_privacy_settings()
