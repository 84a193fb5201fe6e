"""The TensorFlow side of the run store: model weights and TensorBoard scalars (released), process
checkpoints (server).

File names, JSON and array I/O live in the TF-free `fedgen_debug.runs.store`; this module only adds
what needs TF structures (`tf.nest`, TFF's ModelWeights, TensorBoard's event protos).
"""

from __future__ import annotations

import glob
import os
import re

import tensorflow as tf
from tensorboard.compat.proto import event_pb2
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.summary.writer.record_writer import RecordWriter

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


class ReleasedScalars:
    """TensorBoard scalars in released/tensorboard/, with no time in them.

    `tf.summary` stamps every event with the wall time it was written and names its file after the
    time, the host and the process: written round after round, the stamps reproduce server/timing.csv,
    and how long a round took depends on which clients were sampled and what they selected. Here an
    event's wall time is its step (seconds after the epoch: TensorBoard's "relative" axis shows the
    round) and the file is named by the round training (re)started from, so a resumed run adds a file
    after its first as `tf.summary` did; its START event tells TensorBoard to drop the rounds after the
    checkpoint the run resumed from (trained again since). The summaries are `tf.summary.scalar`'s
    (TensorBoard's scalar plugin), so TensorBoard and `event_accumulator` read them as before."""

    def __init__(self, run_dir: str, start_round: int):
        directory = store.released(run_dir, store.TENSORBOARD)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"events.out.tfevents.{start_round:010d}.fedgen-debug")
        self._records = RecordWriter(open(path, "wb"))
        self._write(wall_time=float(start_round), file_version="brain.Event:2")
        self._write(wall_time=float(start_round), step=start_round + 1,
                    session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))

    def _write(self, **fields) -> None:
        self._records.write(event_pb2.Event(**fields).SerializeToString())

    def scalar(self, tag: str, value: float, step: int) -> None:
        self._write(wall_time=float(step), step=step, summary=scalar_pb(tag, value))

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


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
