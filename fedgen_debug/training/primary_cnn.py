"""The primary model of the image scenario (paper §6): the CNN the app ships for on-device inference.

In the story, the modeler trained this CNN *before* the buggy app update, on correctly processed
images; the users' data never reached it. Here it is trained centrally on clean synthetic
handwriting, the public stand-in for that pre-deployment data (pass a dataset without any bug, e.g.
`synthetic-images` with its own seed). Whole writers are held out, so the reported accuracy is on
handwriting styles the model never saw, as app users' would be; the same writers inverted show the
premise of the scenario (an inversion bug wrecks the CNN's accuracy).

Files: `out_path` (weights, `runs.store.save_arrays`) and the same path with `.json` (config, metrics).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import numpy as np
import tensorflow as tf

from fedgen_debug import rng_streams
from fedgen_debug.data import client_data as cd
from fedgen_debug.models import cnn, primary
from fedgen_debug.stats import feature_statistics, nearest_neighbour_distances
from fedgen_debug.progress import progress
from fedgen_debug.runs import store

log = logging.getLogger(__name__)
HOLDOUT_FRACTION = 0.1
REFERENCE_NEAREST_IMAGES = 1000  # clean held-out images whose nearest distances are the reference


def info_path(weights_path: str) -> str:
    return os.path.splitext(weights_path)[0] + ".json"


def labelled_arrays(client_data, client_ids, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """All examples of `client_ids` whose label the model knows ([n, 28, 28] pixels, labels)."""
    pixels, labels = [], []
    for cid in client_ids:
        arrays = cd.client_numpy(client_data, cid)
        known = (arrays["label"] >= 0) & (arrays["label"] < classes)
        pixels.append(arrays["pixels"][known])
        labels.append(arrays["label"][known])
    return np.concatenate(pixels).astype(np.float32), np.concatenate(labels).astype(np.int32)


def accuracy(model, pixels: np.ndarray, labels: np.ndarray) -> float:
    if len(labels) == 0:
        raise ValueError("no examples to measure accuracy on.")
    return float(np.mean(np.argmax(cnn.logits(model, pixels), axis=1) == labels))


def split_writers(client_ids, seed: int) -> tuple[list[str], list[str]]:
    """(training writers, held-out writers): a seeded 10% of writers (at least one) held out."""
    ids = sorted(client_ids)
    if len(ids) < 2:
        raise ValueError(f"training the primary CNN needs at least 2 writers (one held out). Found {len(ids)}.")
    order = np.random.default_rng([seed, rng_streams.PRIMARY_CNN_SPLIT]).permutation(len(ids))
    held = max(1, int(round(HOLDOUT_FRACTION * len(ids))))
    return sorted(ids[i] for i in order[held:]), sorted(ids[i] for i in order[:held])


def train_primary_cnn(client_data, config: cnn.CNNConfig, seed: int, epochs: int, out_path: str) -> tf.keras.Model:
    """Trains the CNN centrally (Adam, shuffled minibatches) and writes weights and metrics."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1. Found {epochs}.")
    train_ids, held_ids = split_writers(client_data.client_ids, seed)
    x, y = labelled_arrays(client_data, train_ids, config.num_classes)
    if len(y) == 0:
        raise ValueError(f"no training examples with labels below {config.num_classes}.")
    model = cnn.build_cnn(config, seed)
    optimizer = tf.keras.optimizers.Adam(config.learning_rate)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng([seed, rng_streams.PRIMARY_CNN_BATCHES])
    x = cnn.as_input(x)
    batches = -(-len(y) // config.batch_size)
    start = time.perf_counter()
    bar = progress(range(epochs * batches), desc="training primary CNN", unit="batch")
    for epoch in range(epochs):
        order = rng.permutation(len(y))
        for b in range(batches):
            idx = order[b * config.batch_size:(b + 1) * config.batch_size]
            loss = step(tf.constant(x[idx]), tf.constant(y[idx]))
            bar.update(1)
        log.info("primary CNN epoch %d/%d: last batch loss %.4f", epoch + 1, epochs, float(loss))
    bar.close()
    seconds = time.perf_counter() - start

    hx, hy = labelled_arrays(client_data, held_ids, config.num_classes)
    info = {"config": dataclasses.asdict(config), "seed": seed, "epochs": epochs, "train_seconds": seconds,
            "train_writers": len(train_ids), "train_examples": int(len(y)),
            "heldout_writers": len(held_ids), "heldout_examples": int(len(hy)),
            "heldout_accuracy": accuracy(model, hx, hy) if len(hy) else None,
            "heldout_accuracy_inverted": accuracy(model, 1.0 - hx, hy) if len(hy) else None}
    store.save_arrays(out_path, model.get_weights())
    write_reference(model, hx if len(hy) else x, out_path)   # clean held-out images
    store.write_json(info_path(out_path), info)
    return model


def reference_path(weights_path: str) -> str:
    return os.path.splitext(weights_path)[0] + ".reference.npz"


def reference_statistics(weights_path: str) -> tuple[np.ndarray, np.ndarray]:
    """(mean, covariance) of the CNN's features on clean held-out images."""
    mean, cov = store.load_arrays(reference_path(weights_path))[:2]
    return mean, cov


def reference_nearest(weights_path: str) -> np.ndarray | None:
    """Nearest-neighbour feature distances among clean held-out images (None: a reference from before)."""
    arrays = store.load_arrays(reference_path(weights_path))
    return arrays[2] if len(arrays) > 2 else None


def load_primary_cnn(path: str) -> tf.keras.Model:
    """The primary model saved at `path`: the tool's CNN (weights in the `.npz`, config in the `.json`
    beside it) or, when that `.json` names a model file, the modeler's own model (`install_model_file`)."""
    if os.path.exists(info_path(path)):
        info = store.read_json(info_path(path))
        if "model_file" in info:
            return primary.load_model_file(os.path.join(os.path.dirname(path), info["model_file"]),
                                           primary.PrimaryContract(**info["contract"]))
    for p in (path, info_path(path)):
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p}: no such file; train the primary CNN first.")
    info = store.read_json(info_path(path))
    model = cnn.build_cnn(cnn.CNNConfig(**info["config"]), info["seed"])
    weights = store.load_arrays(path)
    if [w.shape for w in weights] != [w.shape for w in model.get_weights()]:
        raise ValueError(f"{path}: weights do not match the CNN configured in {info_path(path)}.")
    model.set_weights(weights)
    return model


def check_primary(path: str, contract: primary.PrimaryContract) -> None:
    """The modeler's primary (`--primary`, a plan's `primary`) loads and keeps its contract: read before a run
    or a monitor charges anything. Raises ValueError naming the path."""
    try:
        if primary.is_model_file(path):
            primary.load_model_file(path, contract)
        else:
            load_primary_cnn(path)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"primary: {path} is not a usable primary model: {error}") from None


def write_reference(model: tf.keras.Model, images, out_path: str) -> None:
    """Feature statistics of clean images: the reference of the GANs' Fréchet distance; and their
    nearest-neighbour distances, the reference of the near-duplicate share."""
    features = cnn.features(model, images)
    nearest = nearest_neighbour_distances(features[:REFERENCE_NEAREST_IMAGES])
    store.save_arrays(reference_path(out_path), [*feature_statistics(features), nearest])


def install_model_file(source: str, contract: primary.PrimaryContract, out_path: str,
                       reference_images) -> tf.keras.Model:
    """The modeler's own model (`models.primary`) as the run's primary: checked against the contract,
    copied into the run beside `out_path` (a public model), its features' reference computed on
    `reference_images` (clean public images), and the `.json` written last (what `load_primary_cnn` reads)."""
    model = primary.load_model_file(source, contract)
    name = store.PRIMARY_MODELS["" if os.path.isdir(source) else os.path.splitext(source)[1]]
    store.copy_public(source, os.path.join(os.path.dirname(out_path), name))   # beside `out_path`, in released/
    write_reference(model, reference_images, out_path)
    store.write_json(info_path(out_path), {"model_file": name, "contract": dataclasses.asdict(contract),
                                           "source": os.path.basename(os.path.normpath(source)),
                                           "classes": cnn.num_classes(model)})
    return model


def copy_primary(source: str, out_path: str) -> None:
    """Another run's primary (`--primary RUN/released/primary_cnn.npz`) as this run's, at `out_path`: the
    tool's CNN weights, or the modeler's model file that run holds (it has no weights file then), with the
    features' reference, and the `.json` last (what `load_primary_cnn` reads)."""
    load_primary_cnn(source)   # validates before copying
    info = store.read_json(info_path(source))
    model_file = info.get("model_file")
    weights = (os.path.join(os.path.dirname(source), model_file), os.path.join(os.path.dirname(out_path), model_file)) \
        if model_file else (source, out_path)
    for origin, target in (weights, (reference_path(source), reference_path(out_path)),
                           (info_path(source), info_path(out_path))):
        store.copy_public(origin, target)


def primary_info(path: str) -> dict:
    return store.read_json(info_path(path))
