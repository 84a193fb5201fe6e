"""The DP aggregator: tf-privacy's Gaussian query with reproducible noise, in TFF's DP factory.

tf-privacy's `GaussianSumQuery` draws its noise from an unseeded initializer, so a run resumed from a
checkpoint would not see the same noise as an uninterrupted one. `SeededGaussianSumQuery` differs in
one thing only: the noise comes from `tf.random.stateless_normal` with a seed carried in the query's
global state, split every round. The state lives in the aggregator's state, which the learning
process checkpoints, so resume is exact. Clipping, sensitivity and the `GaussianDpEvent` are
tf-privacy's. `clip=None` skips clipping (the no-DP path, z = 0).
"""

from __future__ import annotations

import collections

import dp_accounting
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_privacy as tfp

from fedgen_debug.training.config import DPConfig


class SeededGaussianSumQuery(tfp.GaussianSumQuery):
    _GlobalState = collections.namedtuple("_GlobalState", ["l2_norm_clip", "stddev", "noise_seed"])

    def __init__(self, l2_norm_clip: float | None, stddev: float, seed: int):
        self._clips = l2_norm_clip is not None
        super().__init__(l2_norm_clip if self._clips else 1.0, stddev)
        self._seed = int(seed)

    def make_global_state(self, l2_norm_clip, stddev):
        return self._GlobalState(tf.cast(l2_norm_clip, tf.float32), tf.cast(stddev, tf.float32),
                                 tf.constant([self._seed, 0x5EED], tf.int64))

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
        event = dp_accounting.GaussianDpEvent(global_state.stddev / global_state.l2_norm_clip)
        return tf.nest.pack_sequence_as(sample_state, noised), new_state, event


def dp_query(config: DPConfig, seed: int) -> tfp.DPQuery:
    """Sum of clipped updates + N(0, (z·S)²), normalized by the fixed qN: noise std on the mean zS/qN."""
    clip = config.clip
    stddev = config.noise_multiplier * clip if clip is not None else 0.0
    return tfp.NormalizedQuery(SeededGaussianSumQuery(clip, stddev, seed),
                               denominator=float(config.clients_per_round))


def dp_aggregator(config: DPConfig, seed: int) -> tff.aggregators.UnweightedAggregationFactory:
    return tff.aggregators.DifferentiallyPrivateFactory(dp_query(config, seed))
