"""T6 for images: a public-vs-private discriminator, trained with DP-FedAvg, scores examples.

Images have no cheap explicit likelihood, so (paper §2.1) a secondary discriminator learns to tell
public images from private ones. It is trained federatedly: each sampled device mixes its own
images (label 1, private) with as many images from the public set it was shipped (label 0), and
only clipped, noised model updates leave the device (`training.public_discriminator` trains it). On each device, log p(public | x) is the
`public_log_prob` that `PublicDensity` thresholds: examples the discriminator finds unlike anything
public are the ones dense in the private data but sparse in the public one.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug import rng_streams
from fedgen_debug.seeding import client_rng


def build_discriminator(seed: int = 0) -> tf.keras.Model:
    init = tf.keras.initializers.GlorotUniform(seed=seed)
    return tf.keras.Sequential([
        tf.keras.layers.Reshape((28, 28, 1), input_shape=(28, 28)),
        tf.keras.layers.Conv2D(16, 5, strides=2, activation="relu", kernel_initializer=init),
        tf.keras.layers.Conv2D(32, 5, strides=2, activation="relu", kernel_initializer=init),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(1, kernel_initializer=init),  # logit of "private"
    ])


def device_training_data(private_pixels: np.ndarray, public_pixels: np.ndarray, client_id: str, seed: int):
    """One device's discriminator data: its images (1) and as many shipped public images (0), shuffled."""
    rng = client_rng(seed, client_id, rng_streams.PUBLIC_DISCRIMINATOR)
    n = len(private_pixels)
    public = public_pixels[rng.choice(len(public_pixels), size=n, replace=len(public_pixels) < n)]
    x = np.concatenate([private_pixels, public]).astype(np.float32)
    y = np.concatenate([np.ones((n, 1)), np.zeros((n, 1))]).astype(np.float32)
    order = rng.permutation(2 * n)
    return x[order], y[order]


def public_log_prob(model: tf.keras.Model, pixels: np.ndarray) -> np.ndarray:
    """log p(public | x) for each image: log sigmoid(−logit of private). Computed on the device."""
    logits = model(np.asarray(pixels, np.float32), training=False).numpy()[:, 0]
    return -np.logaddexp(0.0, logits)
