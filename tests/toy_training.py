"""A tiny DP-FedAvg setup shared by the in-process and the subprocess (SIGKILL) resume tests."""

import numpy as np
import tensorflow as tf

from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig


def keras_model():
    return tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros", input_shape=(2,))])


SPEC = dp_fedavg.ModelSpec(keras_model, tf.keras.losses.MeanSquaredError,
                           (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 1], tf.float32)))


def client_data(n_clients=3, n=6):
    data = {}
    for i in range(n_clients):
        x = np.random.default_rng(i).normal(size=(n, 2)).astype(np.float32)
        y = x @ np.array([[1.0], [-2.0]], np.float32) + 0.5 * (i + 1)
        data[f"c{i}"] = tf.data.Dataset.from_tensor_slices((x, y))
    return data


def train_config(rounds=4):
    return TrainingConfig(rounds=rounds, dp=DPConfig(clients_per_round=2, noise_multiplier=1.0, clip=0.5),
                          client=ClientConfig(batch_size=3, learning_rate=0.1),
                          server=ServerConfig("nesterov", 1.0, 0.9), seed=3, checkpoint_every=1, eval_every=2)


def run(run_dir, config, after_round=None, data=None, secret=None):
    data = data or client_data(n_clients=5)
    return loop.train(lambda s: dp_fedavg.build_process(SPEC, config, s.tf_seed("dp-noise")),
                      loop.Population("toy-population", tuple(data)),
                      lambda cid, round_num: dp_fedavg.client_dataset(data[cid], config), config, str(run_dir),
                      evaluate_fn=lambda w, _: {"kernel_norm": float(np.linalg.norm(w.trainable[0]))},
                      after_round=after_round, secret=secret)


if __name__ == "__main__":  # the subprocess of the SIGKILL test: slow rounds, announced on stdout
    import sys
    import time

    from fedgen_debug import runtime

    runtime.install_shutdown_hooks()

    def announce(round_num):
        print(f"ROUND {round_num}", flush=True)
        time.sleep(0.3)

    run(sys.argv[1], train_config(rounds=int(sys.argv[2])), after_round=announce)
    print("DONE", flush=True)
