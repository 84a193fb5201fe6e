"""DP-FedAvg training of T6's public-vs-private image discriminator (`selectors.public_discriminator`:
the model, each device's training data, and the score the selector thresholds)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.data import client_data as cd
from fedgen_debug.selectors.public_discriminator import build_discriminator, device_training_data
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import TrainingConfig

SPEC = dp_fedavg.ModelSpec(
    build_discriminator, lambda: tf.keras.losses.BinaryCrossentropy(from_logits=True),
    (tf.TensorSpec([None, 28, 28], tf.float32), tf.TensorSpec([None, 1], tf.float32)),
)



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
