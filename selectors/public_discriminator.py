"""T6 for images: a public-vs-private discriminator, trained with DP-FedAvg, scores examples.

Images have no cheap explicit likelihood, so (paper §2.1) a secondary discriminator learns to tell
public images from private ones. It is trained federatedly: each sampled device mixes its own
images (label 1, private) with as many images from the public set it was shipped (label 0), and
only clipped, noised model updates leave the device. On each device, log p(public | x) is the
`public_log_prob` that `PublicDensity` thresholds: examples the discriminator finds unlike anything
public are the ones dense in the private data but sparse in the public one.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.seeding import client_rng
from fedgen_debug.data import client_data as cd
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import TrainingConfig


def build_discriminator(seed: int = 0) -> tf.keras.Model:
    init = tf.keras.initializers.GlorotUniform(seed=seed)
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((28, 28, 1), input_shape=(28, 28)),
        tf.keras.layers.Conv2D(16, 5, strides=2, activation="relu", kernel_initializer=init),
        tf.keras.layers.Conv2D(32, 5, strides=2, activation="relu", kernel_initializer=init),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(1, kernel_initializer=init),  # logit of "private"
    ])


SPEC = dp_fedavg.ModelSpec(
    build_discriminator, lambda: tf.keras.losses.BinaryCrossentropy(from_logits=True),
    (tf.TensorSpec([None, 28, 28], tf.float32), tf.TensorSpec([None, 1], tf.float32)),
)


def device_training_data(private_pixels: np.ndarray, public_pixels: np.ndarray, client_id: str, seed: int):
    """One device's discriminator data: its images (1) and as many shipped public images (0), shuffled."""
    rng = client_rng(seed, client_id, 0xD15C)
    n = len(private_pixels)
    public = public_pixels[rng.choice(len(public_pixels), size=n, replace=len(public_pixels) < n)]
    x = np.concatenate([private_pixels, public]).astype(np.float32)
    y = np.concatenate([np.ones((n, 1)), np.zeros((n, 1))]).astype(np.float32)
    order = rng.permutation(2 * n)
    return x[order], y[order]


def train_public_discriminator(private, public_pixels: np.ndarray, config: TrainingConfig, run_dir: str,
                               population: str) -> tf.keras.Model:
    """DP-FedAvg training of the discriminator on `private` (a ClientData of images; `population`: its
    ledger key, `privacy.ledger.population_key`)."""
    if len(public_pixels) == 0:
        raise ValueError("the public image set is empty.")

    def client_dataset(cid, round_num):
        x, y = device_training_data(cd.client_numpy(private, cid)["pixels"], public_pixels, cid, config.seed)
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices((x, y)), config)

    result = loop.train(lambda secret: dp_fedavg.build_process(SPEC, config, secret.tf_seed("dp-noise")),
                        loop.Population(population, tuple(private.client_ids)), client_dataset, config, run_dir,
                        label="T6 public-vs-private discriminator")
    model = build_discriminator(config.seed)
    result.model_weights.assign_weights_to(model)
    return model


def public_log_prob(model: tf.keras.Model, pixels: np.ndarray) -> np.ndarray:
    """log p(public | x) for each image: log sigmoid(−logit of private). Computed on the device."""
    logits = model(np.asarray(pixels, np.float32), training=False).numpy()[:, 0]
    return -np.logaddexp(0.0, logits)
