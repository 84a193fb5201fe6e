"""Benchmark: seconds per DP-FedAvg round on TFF against the same round on the `tf` backend, and the time of
an ε computation for T=2000. Prints numbers, not pass/fail: `.venv/bin/python benchmarks/dp_fedavg_round.py`.

Workload: a small CNN (Conv 32 → MaxPool → Dense 128 → Dense 62) on synthetic handwriting, qN
clients of ~190 images each, one local epoch with batch 16, clip 0.1, z = 1.0. The `tf` backend runs
the same client work with no TFF in between (`round_timing.py`); the ratio is TFF's overhead.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: E402,F401
import tensorflow as tf  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import client_data as cd, synthetic_images  # noqa: E402
from fedgen_debug.privacy.accounting import DPFedAvgPrivacy, dp_fedavg_epsilon  # noqa: E402
from fedgen_debug.training import dp_fedavg  # noqa: E402
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402
from round_timing import num_parameters, time_rounds  # noqa: E402


def cnn():
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((28, 28, 1), input_shape=(28, 28)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPool2D(2),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(62),
    ])


SPEC = dp_fedavg.ModelSpec(cnn, lambda: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           (tf.TensorSpec([None, 28, 28], tf.float32), tf.TensorSpec([None], tf.int32)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients-per-round", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()

    data = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=40, seed=0))
    config = TrainingConfig(rounds=args.rounds, dp=DPConfig(args.clients_per_round, 1.0, 0.1),
                            client=ClientConfig(epochs=1, batch_size=16, learning_rate=0.05),
                            server=ServerConfig("sgd", 1.0))

    def client_ds(cid):
        arrays = data.client_arrays(cid)
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices((arrays["pixels"], arrays["label"])), config)

    rounds = [sample_clients(data.client_ids, args.clients_per_round, np.random.default_rng(r)) for r in range(args.rounds + 1)]
    examples = np.mean([sum(cd.num_examples(data, c) for c in r) for r in rounds])

    tff_seconds, tf_seconds = time_rounds(SPEC, config, rounds, client_ds)

    so = DPFedAvgPrivacy(5000, 342_477, 1.0, 2000)
    timings = {}
    for conversion in ("paper", "tight"):
        start = time.perf_counter()
        eps = dp_fedavg_epsilon(so, 2.92e-6, conversion).epsilon
        timings[conversion] = (time.perf_counter() - start, eps)

    print(f"workload: qN={args.clients_per_round}, ~{examples:.0f} examples/round, {args.rounds} timed rounds, "
          f"CNN with {num_parameters(SPEC)} parameters")
    print(f"DP-FedAvg round, TFF process : {tff_seconds:.3f} s")
    print(f"DP-FedAvg round, tf backend  : {tf_seconds:.3f} s")
    print(f"ratio TFF / tf backend       : {tff_seconds / tf_seconds:.2f}")
    for conversion, (seconds, eps) in timings.items():
        print(f"ε for T=2000 (qN=5000, N=342,477, z=1.0), {conversion:5s} conversion: {seconds:.3f} s (ε = {eps:.4f})")


if __name__ == "__main__":
    main()
