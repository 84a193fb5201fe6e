"""The DP aggregator: tf-privacy's Gaussian query with reproducible secret noise, in TFF's DP factory.

`SeededGaussianSumQuery` (`privacy.seeded_queries`) differs from tf-privacy's `GaussianSumQuery` in two things, both on purpose:
- The noise comes from `tf.random.stateless_normal` with a seed carried in the query's global state and
  split every round, so a run resumed from a checkpoint draws the same noise as an uninterrupted one.
  The initial seed is drawn from the run's secret (`fedgen_debug.runs.secret`), never from the public
  `--seed`: knowing the noise seed is knowing the noise.
- The `DpEvent` it reports divides the noise by the sum's L2 sensitivity under the run's neighbouring
  relation (`privacy.accounting.sum_sensitivity`: 2S under replace-one, for fixed-size rounds).
  tf-privacy reports `GaussianDpEvent(stddev / clip)`, i.e. sensitivity S, which under-reports ε for
  fixed-size rounds (google/differential-privacy#378).
Clipping is tf-privacy's. `clip=None` skips clipping (the no-DP path, z = 0; its event is non-private).
With `DPConfig.clip_quantile`, `AdaptiveClipSumQuery` adapts the clip to that quantile of the update
norms (tf-privacy's `QuantileAdaptiveClipSumQuery`, Andrew et al. 2021) within the same ε.
TFF's `DifferentiallyPrivateFactory` keeps each round's event in its state; `released_event` reads it
back, and the training loop checks it against the event it charged to the ledger before round 1.
"""

from __future__ import annotations

import collections

import dp_accounting
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_privacy as tfp

from fedgen_debug.privacy.accounting import sum_sensitivity
from fedgen_debug.privacy.seeded_queries import SeededGaussianSumQuery, SeededQuantileEstimator
from fedgen_debug.training.config import DPConfig
from fedgen_debug.training.update_canaries import UpdateCanaryPlan, direction


class CanaryGaussianSumQuery(SeededGaussianSumQuery):
    """The seeded query whose round-t sum also holds S·c_i for each update canary the round sampled
    (`training.update_canaries`): the record a canary client clipped to S would have sent. The round
    counter lives in the global state so a resumed run adds the right round's canaries."""

    _GlobalState = collections.namedtuple("_GlobalState", ["l2_norm_clip", "stddev", "noise_seed", "round"])

    def __init__(self, l2_norm_clip, stddev, noise_seed, l2_sensitivity, plan: UpdateCanaryPlan):
        super().__init__(l2_norm_clip, stddev, noise_seed, l2_sensitivity)
        self._plan = plan

    def make_global_state(self, l2_norm_clip, stddev):
        return self._GlobalState(tf.cast(l2_norm_clip, tf.float32), tf.cast(stddev, tf.float32),
                                 tf.constant(self._noise_seed, tf.int64), tf.constant(0, tf.int64))

    def get_noised_result(self, sample_state, global_state):
        leaves = tf.nest.flatten(sample_state)
        shapes = [v.shape for v in leaves]
        sampled = tf.where(tf.gather(tf.constant(self._plan.schedule), global_state.round))[:, 0]

        def add_canary(total, index):
            return [t + self._plan.clip * c for t, c in zip(total, direction(shapes, self._plan.seed, index))]

        leaves = tf.foldl(add_canary, sampled, initializer=leaves)
        noised, state, event = super().get_noised_result(tf.nest.pack_sequence_as(sample_state, leaves), global_state)
        return noised, state._replace(round=global_state.round + 1), event


# The adaptive clip's count of unclipped updates takes this share of each round's privacy (RDP adds
# 1/m² over a round's Gaussians; m = noise / sensitivity): the count's noise is z/(2√share) (0.5 per
# record, sensitivity 1 under replace-one), the sum's z/√(1 − share), so the round's ε is the fixed
# clip's. Andrew et al. use std qN/20 on the count (share 0.4% at the demo's z = 0.3, qN = 50); 1%
# gives std 1.5, 0.03 on the unclipped fraction, and costs the sum 0.5% more noise.
CLIP_COUNT_SHARE = 0.01


def adaptive_noise(config: DPConfig) -> tuple[float, float]:
    """(the sum's noise multiplier, the unclipped count's noise std) of an adaptive-clip round with the
    same privacy as a fixed clip at `config.noise_multiplier`."""
    z = config.noise_multiplier
    if z == 0:
        return 0.0, 0.0
    return z / np.sqrt(1.0 - CLIP_COUNT_SHARE), z / (2.0 * np.sqrt(CLIP_COUNT_SHARE))


class AdaptiveClipSumQuery(tfp.QuantileAdaptiveClipSumQuery):
    """The seeded sum whose clip follows the `clip_quantile` of the update norms clients send, starting
    at `clip` (geometric steps). An update of norm 0 (a device that selected nothing, or sent zeros for
    a non-finite update) reports the midpoint: the clip tracks the quantile of the updates that exist
    (exactly their median at 0.5), and leaving such a client out of the sum is the same as counting it.
    Its event is the sum's and the count's Gaussians composed: the fixed clip's privacy (`adaptive_noise`)."""

    def __init__(self, config: DPConfig, noise_seed):
        sum_z, count_stddev = adaptive_noise(config)
        words = np.random.SeedSequence([int(s) for s in noise_seed] + [1]).generate_state(4, np.uint64) >> np.uint64(1)
        self._noise_multiplier = sum_z
        self._sum_query = SeededGaussianSumQuery(config.clip, sum_z * config.clip, [int(w) for w in words[:2]],
                                                 sum_sensitivity(config.clip, config.accounting))
        self._quantile_estimator_query = SeededQuantileEstimator(
            config.clip, config.clip_quantile, config.clip_learning_rate, count_stddev, config.clients_per_round, True,
            [int(w) for w in words[2:]], config.accounting)
        self.round_event = (dp_accounting.NonPrivateDpEvent() if sum_z == 0 else dp_accounting.ComposedDpEvent(
            [self._sum_query.round_event, self._quantile_estimator_query.round_event]))

    def preprocess_record(self, params, record):
        clipped, norm = self._sum_query.preprocess_record_impl(params.sum_params, record)
        norm = tf.where(norm > 0, norm, tf.constant(np.nan, norm.dtype))
        return self._SampleState(clipped, self._quantile_estimator_query.preprocess_record(
            params.quantile_estimator_params, norm))

    def get_noised_result(self, sample_state, global_state):
        # tf-privacy's, except that the sum's next state keeps its split noise seed (`make_global_state`
        # would restart it: the same noise every round).
        noised, sum_state, _ = self._sum_query.get_noised_result(sample_state.sum_state, global_state.sum_state)
        clip, estimator_state, _ = self._quantile_estimator_query.get_noised_result(
            sample_state.quantile_estimator_state, global_state.quantile_estimator_state)
        sum_state = sum_state._replace(l2_norm_clip=clip, stddev=clip * global_state.noise_multiplier)
        return noised, self._GlobalState(global_state.noise_multiplier, sum_state, estimator_state), self.round_event


def sum_query(config: DPConfig, noise_seed, canaries: UpdateCanaryPlan | None = None) -> tfp.DPQuery:
    """Sum of updates clipped to S + N(0, (zS)²) (and the sampled update canaries' S·c_i); with
    `clip_quantile`, S adapts (`AdaptiveClipSumQuery`)."""
    if config.clip_quantile is not None:
        if canaries is not None and canaries.count:
            raise ValueError("update canaries are inserted at a fixed clip S; this run adapts its clip "
                             "(clip_quantile). Train with a fixed clip to plant update canaries.")
        return AdaptiveClipSumQuery(config, noise_seed)
    clip = config.clip
    stddev = config.noise_multiplier * clip if clip is not None else 0.0
    sensitivity = sum_sensitivity(clip, config.accounting) if clip is not None else None
    if canaries is not None and canaries.count:
        return CanaryGaussianSumQuery(clip, stddev, noise_seed, sensitivity, canaries)
    return SeededGaussianSumQuery(clip, stddev, noise_seed, sensitivity)


def dp_query(config: DPConfig, noise_seed, canaries: UpdateCanaryPlan | None = None) -> tfp.DPQuery:
    """The sum query normalized by the fixed qN: noise std on the mean zS/qN."""
    return tfp.NormalizedQuery(sum_query(config, noise_seed, canaries), denominator=float(config.clients_per_round))


def round_event(config: DPConfig) -> dp_accounting.DpEvent:
    """The event one round of `dp_query(config, ...)` reports (it does not depend on the seed)."""
    return sum_query(config, (0, 0)).round_event


def dp_aggregator(config: DPConfig, noise_seed,
                  canaries: UpdateCanaryPlan | None = None) -> tff.aggregators.UnweightedAggregationFactory:
    return tff.aggregators.DifferentiallyPrivateFactory(dp_query(config, noise_seed, canaries))


def adaptive_clip(aggregator_state) -> float | None:
    """The clip the next round uses, when it adapts (`AdaptiveClipSumQuery`; None for a fixed clip):
    a function of the noised counts alone, so it is released with the round's metrics."""
    sum_state = getattr(getattr(aggregator_state.query_state, "numerator_state", None), "sum_state", None)
    return None if sum_state is None else float(sum_state.l2_norm_clip)


def released_event(aggregator_state) -> dp_accounting.DpEvent:
    """The DpEvent the DP aggregator reported for the round that produced `aggregator_state` (TFF's
    `extract_dp_event_from_state`, tolerant of the bytes/ndarray leaves a checkpoint restores)."""
    def plain(value):
        if hasattr(value, "_fields"):
            return type(value)(*[plain(getattr(value, f)) for f in value._fields])
        if isinstance(value, list):   # a composed event's events (the adaptive clip's)
            return [plain(v) for v in value]
        if isinstance(value, bytes):
            return value.decode()
        if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
            return plain(value.item())
        return value

    if bool(plain(aggregator_state.is_init_state)):
        raise ValueError("the aggregator state is the initial one: no round has released yet.")
    return dp_accounting.DpEvent.from_named_tuple(plain(aggregator_state.dp_event))
