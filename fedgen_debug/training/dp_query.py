"""The DP aggregator: tf-privacy's Gaussian query with reproducible secret noise, in TFF's DP factory.

`SeededGaussianSumQuery` differs from tf-privacy's `GaussianSumQuery` in two things, both on purpose:
- The noise comes from `tf.random.stateless_normal` with a seed carried in the query's global state and
  split every round, so a run resumed from a checkpoint draws the same noise as an uninterrupted one.
  The initial seed is drawn from the run's secret (`fedgen_debug.runs.secret`), never from the public
  `--seed`: knowing the noise seed is knowing the noise.
- The `DpEvent` it reports divides the noise by the sum's L2 sensitivity under the run's neighbouring
  relation (`privacy.accounting.sum_sensitivity`: 2S under replace-one, for fixed-size rounds).
  tf-privacy reports `GaussianDpEvent(stddev / clip)`, i.e. sensitivity S, which under-reports ε for
  fixed-size rounds (google/differential-privacy#378).
Clipping is tf-privacy's. `clip=None` skips clipping (the no-DP path, z = 0; its event is non-private).
TFF's `DifferentiallyPrivateFactory` keeps each round's event in its state; `released_event` reads it
back, and the training loop checks it against the event it charged to the ledger before round 1.
"""

from __future__ import annotations

import collections

import dp_accounting
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_privacy as tfp

from fedgen_debug.privacy.accounting import gaussian_event, sum_sensitivity
from fedgen_debug.training.config import DPConfig
from fedgen_debug.training.update_canaries import UpdateCanaryPlan, direction


class SeededGaussianSumQuery(tfp.GaussianSumQuery):
    _GlobalState = collections.namedtuple("_GlobalState", ["l2_norm_clip", "stddev", "noise_seed"])

    def __init__(self, l2_norm_clip: float | None, stddev: float, noise_seed, l2_sensitivity: float | None):
        self._clips = l2_norm_clip is not None
        super().__init__(l2_norm_clip if self._clips else 1.0, stddev)
        self._noise_seed = [int(s) for s in noise_seed]
        if len(self._noise_seed) != 2:
            raise ValueError(f"noise_seed must be two integers. Found {noise_seed!r}.")
        if stddev > 0 and not self._clips:
            raise ValueError("noise needs a clip (the sensitivity is unbounded without one).")
        # Clip and stddev are fixed for the run, so the event is too (tf-privacy derives it from the
        # global state because adaptive clipping changes the clip).
        self.round_event = (dp_accounting.NonPrivateDpEvent() if stddev == 0
                            else gaussian_event(stddev, l2_sensitivity))

    def make_global_state(self, l2_norm_clip, stddev):
        return self._GlobalState(tf.cast(l2_norm_clip, tf.float32), tf.cast(stddev, tf.float32),
                                 tf.constant(self._noise_seed, tf.int64))

    def initial_global_state(self):
        return self.make_global_state(self._l2_norm_clip, self._stddev)

    def preprocess_record_impl(self, params, record):
        if not self._clips:
            return record, tf.linalg.global_norm(tf.nest.flatten(record))
        return super().preprocess_record_impl(params, record)

    def get_noised_result(self, sample_state, global_state):
        leaves = tf.nest.flatten(sample_state)
        seeds = tf.random.experimental.stateless_split(global_state.noise_seed, num=len(leaves) + 1)
        noised = [
            v + tf.random.stateless_normal(tf.shape(v), seed=seeds[i + 1], stddev=global_state.stddev, dtype=v.dtype)
            for i, v in enumerate(leaves)
        ]
        new_state = global_state._replace(noise_seed=seeds[0])
        return tf.nest.pack_sequence_as(sample_state, noised), new_state, self.round_event


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


def sum_query(config: DPConfig, noise_seed, canaries: UpdateCanaryPlan | None = None) -> SeededGaussianSumQuery:
    """Sum of updates clipped to S + N(0, (zS)²) (and the sampled update canaries' S·c_i)."""
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


def released_event(aggregator_state) -> dp_accounting.DpEvent:
    """The DpEvent the DP aggregator reported for the round that produced `aggregator_state` (TFF's
    `extract_dp_event_from_state`, tolerant of the bytes/ndarray leaves a checkpoint restores)."""
    def plain(value):
        if hasattr(value, "_fields"):
            return type(value)(*[plain(getattr(value, f)) for f in value._fields])
        if isinstance(value, bytes):
            return value.decode()
        if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
            return plain(value.item())
        return value

    if bool(plain(aggregator_state.is_init_state)):
        raise ValueError("the aggregator state is the initial one: no round has released yet.")
    return dp_accounting.DpEvent.from_named_tuple(plain(aggregator_state.dp_event))
