"""Seconds per DP-FedAvg round on the two backends: TFF's runtime (the reference) and the in-process `tf`
backend (the same client updates, DP query and server update run by TF itself, `training.tf_backend`);
their ratio is what TFF's runtime costs. Both are warmed up with one untimed round (tracing, worker start).
"""

from __future__ import annotations

import time

# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: F401
import tensorflow as tf

from fedgen_debug.training import dp_fedavg


def seconds_per_round(process, rounds: list[list[str]], client_ds) -> float:
    """Mean seconds of `process.next` over rounds[1:], after rounds[0] as warm-up."""
    state = process.initialize()
    state = process.next(state, [client_ds(c) for c in rounds[0]]).state
    start = time.perf_counter()
    for sampled in rounds[1:]:
        state = process.next(state, [client_ds(c) for c in sampled]).state
    return (time.perf_counter() - start) / (len(rounds) - 1)


def time_rounds(spec: dp_fedavg.ModelSpec, config, rounds: list[list[str]], client_ds) -> tuple[float, float]:
    """(TFF seconds, tf-backend seconds) per round."""
    return tuple(seconds_per_round(dp_fedavg.build_process(spec, config, (0, 0), backend=backend), rounds, client_ds)
                 for backend in ("tff", "tf"))


def num_parameters(spec: dp_fedavg.ModelSpec) -> int:
    model = spec.keras_model_fn()
    model.build(spec.input_spec[0].shape)
    return int(sum(tf.size(v) for v in model.trainable_variables))
