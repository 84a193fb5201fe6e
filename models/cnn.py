"""The primary model of the image scenario (augenstein2020 §6): an on-device handwriting CNN.

Architecture of TFF's EMNIST conv-dropout model (the paper's own code used a similar small Keras
CNN): Conv 32 k3 ReLU → Conv 64 k3 ReLU → MaxPool 2 → Dropout 0.25 → Flatten → Dense 128 ReLU →
Dropout 0.5 → Dense classes (logits). Input: the device's pixels as the canonical image format
stores them, [n, 28, 28] or [n, 28, 28, 1] in [0, 1] with 1.0 = white background; no preprocessing
inside the model, so an upstream inversion bug reaches it unchanged.

The Dense-128 activations (`features`) are the feature space of the Fréchet distance that scores
GAN samples (as TF-GAN's Fréchet classifier distance on an EMNIST classifier).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from fedgen_debug.validation import check_at_least, check_in_range, check_positive

FEATURES_LAYER = "features"


@dataclasses.dataclass(frozen=True)
class CNNConfig:
    num_classes: int = 62          # 62: FEMNIST's digits and both cases; 10: digits only
    conv1_filters: int = 32
    conv2_filters: int = 64
    dense_units: int = 128
    conv_dropout: float = 0.25
    dense_dropout: float = 0.5
    batch_size: int = 64           # central (pre-deployment) training recipe
    learning_rate: float = 1e-3    # Adam

    def __post_init__(self):
        for name in ("num_classes", "conv1_filters", "conv2_filters", "dense_units", "batch_size"):
            check_at_least(name, getattr(self, name), 1)
        check_at_least("num_classes", self.num_classes, 2)
        for name in ("conv_dropout", "dense_dropout"):
            check_in_range(name, getattr(self, name), 0.0, 1.0, high_inclusive=False)
        check_positive("learning_rate", self.learning_rate)


def build_cnn(config: CNNConfig, seed: int = 0) -> tf.keras.Model:
    """The untrained CNN; every initializer and dropout mask is seeded from `seed`."""
    def glorot(offset):
        return tf.keras.initializers.GlorotUniform(seed=seed * 8 + offset)

    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(config.conv1_filters, 3, activation="relu", kernel_initializer=glorot(0)),
        layers.Conv2D(config.conv2_filters, 3, activation="relu", kernel_initializer=glorot(1)),
        layers.MaxPooling2D(2),
        layers.Dropout(config.conv_dropout, seed=seed * 8 + 2),
        layers.Flatten(),
        layers.Dense(config.dense_units, activation="relu", kernel_initializer=glorot(3), name=FEATURES_LAYER),
        layers.Dropout(config.dense_dropout, seed=seed * 8 + 4),
        layers.Dense(config.num_classes, kernel_initializer=glorot(5), name="logits"),
    ])


def as_input(images) -> np.ndarray:
    """[n, 28, 28] or [n, 28, 28, 1] → float32 [n, 28, 28, 1]."""
    images = np.asarray(images, np.float32)
    if images.shape[1:] not in ((28, 28), (28, 28, 1)):
        raise ValueError(f"images must have shape [n, 28, 28] or [n, 28, 28, 1]. Found {list(images.shape)}.")
    return images.reshape(-1, 28, 28, 1)


def num_classes(model) -> int:
    return int(model.output_shape[-1])


def _batched(fn, images, batch_size: int) -> np.ndarray:
    x = as_input(images)
    parts = [np.asarray(fn(tf.constant(x[i:i + batch_size]))) for i in range(0, len(x), batch_size)]
    return np.concatenate(parts) if parts else np.zeros((0,), np.float32)


def logits(model, images, batch_size: int = 1024) -> np.ndarray:
    """Inference logits [n, classes] (dropout off). `model` is the Keras CNN or any callable alike."""
    out = _batched(lambda x: model(x, training=False), images, batch_size)
    return out.reshape(len(out), -1) if out.size else np.zeros((0, num_classes(model)), np.float32)


def features(model: tf.keras.Model, images, batch_size: int = 1024) -> np.ndarray:
    """The penultimate (Dense-128 ReLU) activations [n, dense_units], dropout off (a modeler's own model:
    the input of its last layer, `models.primary.adapted`)."""
    extractor = getattr(model, "features_model", None) or \
        tf.keras.Model(model.inputs, model.get_layer(FEATURES_LAYER).output)
    out = _batched(lambda x: extractor(x, training=False), images, batch_size)
    width = extractor.output_shape[-1]
    return out.reshape(-1, width) if out.size else np.zeros((0, width), np.float32)
