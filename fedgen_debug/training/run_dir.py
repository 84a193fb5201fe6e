"""The run directory: the run store the analysis and the app read. Layout (stable):

    RUN_DIR/
      config.json            what was trained: {"training": TrainingConfig, "population": spec, ...}
      privacy.json           the privacy record (see fedgen_debug.privacy.ledger)
      metrics.csv            one row per finished round: round, clients, seconds, train metrics
      eval.csv               one row per evaluation: round, eval metrics
      tensorboard/           the same scalars for TensorBoard
      checkpoints/round_NNNNNN.npz   the full process state (model, optimizer, DP noise seed)
      model_weights.npz      the final global model's weights (trainable then non-trainable)
      status.json            {"state": "running"|"finished", "rounds_completed": k, "rounds": T}

Everything is written atomically: a crash leaves the last complete checkpoint and rows up to it.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import glob
import json
import os
import re

import numpy as np
import tensorflow as tf

from fedgen_debug.data import atomic

CONFIG = "config.json"
STATUS = "status.json"
METRICS = "metrics.csv"
EVAL = "eval.csv"
CHECKPOINTS = "checkpoints"
TENSORBOARD = "tensorboard"
MODEL_WEIGHTS = "model_weights.npz"


def write_json(path: str, data: dict) -> None:
    atomic.write_json(path, data, sort_keys=True)


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def save_arrays(path: str, arrays) -> None:
    """A list of arrays as an .npz (arr_0, arr_1, ...), atomically."""
    with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, *[np.asarray(a) for a in arrays])


def load_arrays(path: str) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def save_model_weights(run_dir: str, weights) -> None:
    """The final `tff.learning.models.ModelWeights`: trainable, then non-trainable."""
    save_arrays(os.path.join(run_dir, MODEL_WEIGHTS), list(weights.trainable) + list(weights.non_trainable))


def load_model_weights(run_dir: str, model: tf.keras.Model) -> None:
    """Assigns the weights `save_model_weights` wrote to a built Keras model of the same architecture."""
    import tensorflow_federated as tff

    arrays = load_arrays(os.path.join(run_dir, MODEL_WEIGHTS))
    count = len(model.trainable_variables)
    tff.learning.models.ModelWeights(arrays[:count], arrays[count:]).assign_weights_to(model)


def save_checkpoint(run_dir: str, state, round_num: int, keep: int = 2) -> str:
    directory = os.path.join(run_dir, CHECKPOINTS)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"round_{round_num:06d}.npz")
    save_arrays(path, tf.nest.flatten(state))
    for old in sorted(glob.glob(os.path.join(directory, "round_*.npz")))[:-keep]:
        os.remove(old)
    return path


def latest_checkpoint(run_dir: str) -> tuple[int, str] | None:
    paths = sorted(glob.glob(os.path.join(run_dir, CHECKPOINTS, "round_*.npz")))
    if not paths:
        return None
    return int(re.search(r"round_(\d+)\.npz$", paths[-1]).group(1)), paths[-1]


def load_checkpoint(path: str, like):
    """The state saved at `path`, structured like `like` (e.g. the process's initial state)."""
    leaves = load_arrays(path)
    template = tf.nest.flatten(like)
    if len(leaves) != len(template):
        raise ValueError(f"{path}: checkpoint has {len(leaves)} tensors, the process state {len(template)}; "
                         "it belongs to a different model or configuration.")
    return tf.nest.pack_sequence_as(like, leaves)


class CsvLog:
    """Append-only CSV of per-round rows; on resume, rows after the restored round are dropped."""

    def __init__(self, path: str, resume_round: int):
        self.path = path
        self.fieldnames = None
        rows = []
        if os.path.exists(path):
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                self.fieldnames = reader.fieldnames
                # A row cut short by a crash mid-write has missing fields: drop it with the later ones.
                rows = [r for r in reader
                        if None not in r.values() and len(r) == len(self.fieldnames) and int(r["round"]) <= resume_round]
            with atomic.atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=self.fieldnames)
                writer.writeheader()
                writer.writerows(rows)

    def append(self, row: dict) -> None:
        new = self.fieldnames is None
        if new:
            self.fieldnames = list(row)
        with open(self.path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fieldnames, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            os.fsync(f.fileno())


def flatten_metrics(metrics, prefix: str = "") -> dict:
    out = {}
    for key, value in (metrics or {}).items():
        name = f"{prefix}{key}"
        if hasattr(value, "items"):
            out.update(flatten_metrics(value, name + "/"))
        else:
            array = np.asarray(value)
            if array.size == 1 and array.dtype.kind in "fiub":
                out[name] = float(array)
    return out


@contextlib.contextmanager
def exclusive(run_dir: str):
    """Holds a lock for `run_dir` while a process trains into it: two processes resuming the same run
    would interleave rounds. The lock file sits next to the run directory (which may not exist yet)."""
    path = os.path.abspath(run_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock"), "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{run_dir} is being trained by another process; wait for it or stop it.") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def finished_run_config(run_dir: str, kind: str, command: str) -> dict:
    """The saved `config.json` of a finished run of `kind` (its extra-config key, e.g. "lm" or "gan");
    clear errors for a missing, foreign or unfinished run."""
    config_path = os.path.join(run_dir, CONFIG)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{run_dir}: not a run directory (no {CONFIG}).")
    saved = read_json(config_path)
    if kind not in saved:
        raise ValueError(f"{run_dir}: not a {kind.upper()} run.")
    status = read_json(os.path.join(run_dir, STATUS))
    if status["state"] != "finished":
        raise ValueError(f"{run_dir}: training has not finished ({status['rounds_completed']}/{status['rounds']} "
                         f"rounds); re-run {command} with the same arguments to resume.")
    return saved
