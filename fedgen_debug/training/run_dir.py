"""The TensorFlow side of the run store: model weights (released) and process checkpoints (server).

File names, JSON and array I/O live in the TF-free `fedgen_debug.runs.store`; this module only adds
what needs TF structures (`tf.nest`, TFF's ModelWeights).
"""

from __future__ import annotations

import glob
import os
import re

import tensorflow as tf

from fedgen_debug.runs import store


def save_model_weights(run_dir: str, weights) -> None:
    """The final `tff.learning.models.ModelWeights` (a DP release): trainable, then non-trainable."""
    store.save_arrays(store.released(run_dir, store.MODEL_WEIGHTS),
                      list(weights.trainable) + list(weights.non_trainable))


def load_model_weights(run_dir: str, model: tf.keras.Model) -> None:
    """Assigns the weights `save_model_weights` wrote to a built Keras model of the same architecture."""
    import tensorflow_federated as tff

    arrays = store.load_arrays(store.released(run_dir, store.MODEL_WEIGHTS))
    count = len(model.trainable_variables)
    tff.learning.models.ModelWeights(arrays[:count], arrays[count:]).assign_weights_to(model)


def save_checkpoint(run_dir: str, state, round_num: int, keep: int = 2) -> str:
    """The full process state, server side: it holds the DP noise state, never released."""
    directory = store.server(run_dir, store.CHECKPOINTS)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"round_{round_num:06d}.npz")
    store.save_arrays(path, tf.nest.flatten(state))
    store.owner_only(path)
    for old in sorted(glob.glob(os.path.join(directory, "round_*.npz")))[:-keep]:
        os.remove(old)
    return path


def latest_checkpoint(run_dir: str) -> tuple[int, str] | None:
    paths = sorted(glob.glob(store.server(run_dir, store.CHECKPOINTS, "round_*.npz")))
    if not paths:
        return None
    return int(re.search(r"round_(\d+)\.npz$", paths[-1]).group(1)), paths[-1]


def load_checkpoint(path: str, like):
    """The state saved at `path`, structured like `like` (e.g. the process's initial state)."""
    leaves = store.load_arrays(path)
    template = tf.nest.flatten(like)
    if len(leaves) != len(template):
        raise ValueError(f"{path}: checkpoint has {len(leaves)} tensors, the process state {len(template)}; "
                         "it belongs to a different model or configuration.")
    return tf.nest.pack_sequence_as(like, leaves)
