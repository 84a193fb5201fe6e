"""Seconds per DP-FedAvg round on the TFF process against the same round in plain TF.

The plain-TF round runs the same client updates (`client_update` compiled with tf.function), the same
DP query and the same server update with no TFF in between; the ratio is TFF's overhead. Both are
warmed up with one untimed round (tracing, worker start).
"""

from __future__ import annotations

import time

import tensorflow as tf
from tensorflow_privacy.privacy.dp_query import test_utils

from fedgen_debug.training import dp_fedavg
from fedgen_debug.training.dp_query import dp_query
from fedgen_debug.training.optimizers import server_optimizer


def time_rounds(spec: dp_fedavg.ModelSpec, config, rounds: list[list[str]], client_ds) -> tuple[float, float]:
    """(TFF seconds, plain-TF seconds) per round, timed over rounds[1:] after rounds[0] as warm-up."""
    process = dp_fedavg.build_process(spec, config, (0, 0))
    state = process.initialize()
    state = process.next(state, [client_ds(c) for c in rounds[0]]).state
    start = time.perf_counter()
    for sampled in rounds[1:]:
        state = process.next(state, [client_ds(c) for c in sampled]).state
    tff_seconds = (time.perf_counter() - start) / (len(rounds) - 1)

    model = spec.keras_model_fn()
    loss = spec.loss_fn()
    update_fn = tf.function(lambda ds, w: dp_fedavg.client_update(model, loss, ds, w, config.client.learning_rate))
    query = dp_query(config.dp, (0, 0))
    optimizer = server_optimizer(config.server)
    model.build(spec.input_spec[0].shape)
    weights = [tf.identity(v) for v in model.trainable_variables]
    opt_state = optimizer.initialize([tf.TensorSpec(w.shape, w.dtype) for w in weights])
    global_state = None

    def plain_round(sampled, weights, opt_state, global_state):
        updates = [update_fn(client_ds(c), weights).update for c in sampled]
        mean_update, global_state = test_utils.run_query(query, updates, global_state=global_state)
        opt_state, weights = optimizer.next(opt_state, weights, mean_update)
        return weights, opt_state, global_state

    weights, opt_state, global_state = plain_round(rounds[0], weights, opt_state, global_state)
    start = time.perf_counter()
    for sampled in rounds[1:]:
        weights, opt_state, global_state = plain_round(sampled, weights, opt_state, global_state)
    return tff_seconds, (time.perf_counter() - start) / (len(rounds) - 1)


def num_parameters(spec: dp_fedavg.ModelSpec) -> int:
    model = spec.keras_model_fn()
    model.build(spec.input_spec[0].shape)
    return int(sum(tf.size(v) for v in model.trainable_variables))
