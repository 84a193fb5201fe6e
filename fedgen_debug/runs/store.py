"""The run store: the only code that writes or reads run files, and the release boundary.

A run directory has two places. `released/` holds what a modeler, the app and every report may see:
differentially private outputs and what is computed from them, plus public settings. `server/` holds
what only the (trusted) server that trains keeps: the run secret, checkpoints (they carry the DP
noise state), timing. Every released file is declared in `RELEASED_FILES` with the reason it may be
released; `released()` refuses any other name, so a new output has to be argued for here first.

    RUN_DIR/
      released/   config.json status.json privacy.json metrics.csv eval.csv tensorboard/
                  model_weights.npz vocab.json device_metrics.json population.json t4_threshold.json
                  primary_cnn.npz/.json/.reference.npz analysis.json analysis.png top_oov_words.csv
                  samples.png samples.npz sample_snapshots/round_NNNNNN.npz canaries.json
                  memorization.json memorization.png memorization_glyphs.png
      server/     secret.json checkpoints/round_NNNNNN.npz timing.csv selection.json

    MONITOR_DIR/   (fedgen-debug monitor: one run directory per period and auxiliary below it)
      released/   monitor.json periods/period_NNN.json alerts.jsonl primary_cnn.npz/.json/.reference.npz
      server/     program_state/
      period_NNN/AUXILIARY/   a run directory as above

TF-free (numpy only): the app imports it. Writes are atomic; CSV logs drop rows past a resumed round.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import re
import shutil

import numpy as np

from fedgen_debug.data import atomic

RELEASED, SERVER = "released", "server"

CONFIG = "config.json"
STATUS = "status.json"
PRIVACY = "privacy.json"
METRICS = "metrics.csv"
EVAL = "eval.csv"
TENSORBOARD = "tensorboard"
MODEL_WEIGHTS = "model_weights.npz"
VOCAB = "vocab.json"
DEVICE_METRICS = "device_metrics.json"
POPULATION = "population.json"
THRESHOLD = "t4_threshold.json"
D_STEP = "d_step.json"
PRIMARY_FIT = "primary_fit.json"
PRIMARY = "primary_cnn.npz"
PRIMARY_INFO = "primary_cnn.json"
PRIMARY_REFERENCE = "primary_cnn.reference.npz"
# The modeler's own primary model (`models.primary`), by the suffix of the file they gave ("": a directory).
PRIMARY_MODELS = {".keras": "primary_model.keras", ".h5": "primary_model.h5", "": "primary_model"}
ANALYSIS = "analysis.json"
DIAGNOSIS = "diagnosis.json"          # `fedgen-debug diagnose` (`analysis.diagnose`), in the suspected run
DIAGNOSIS_PNG = "diagnosis.png"
DIAGNOSIS_A_PNG = "diagnosis_a.png"
DIAGNOSIS_B_PNG = "diagnosis_b.png"
ANALYSIS_PNG = "analysis.png"
TOP_OOV_WORDS = "top_oov_words.csv"
SAMPLES_PNG = "samples.png"
SAMPLES_NPZ = "samples.npz"
SAMPLES_JSON = "samples.json"   # an LM's samples as text (`lm_analysis.release_texts`)
SAMPLE_SNAPSHOTS = "sample_snapshots"
STAGED_SNAPSHOTS = "staged_snapshots"   # server side: SAMPLE_SNAPSHOTS until training ends
CANARIES = "canaries.json"
MEMORIZATION = "memorization.json"
MEMORIZATION_PNG = "memorization.png"
MEMORIZATION_GLYPHS_PNG = "memorization_glyphs.png"
MONITOR = "monitor.json"        # a monitor directory (fedgen-debug monitor): its plan, progress, thresholds
PERIODS = "periods"             # ... one record per period: signals, thumbnails' paths, ε so far
ALERTS = "alerts.jsonl"         # ... alerts raised and cleared, one JSON line each
VOCABULARIES = "vocabularies"   # ... the modeler's vocabulary files its LM auxiliaries read (`monitor.inputs`)

SECRET = "secret.json"
CHECKPOINTS = "checkpoints"
TIMING = "timing.csv"
SELECTION = "selection.json"
PROGRAM_STATE = "program_state"
SCHEDULE = "schedule.json"

SUMMARY = "summary.json"   # beside run directories: a demo's or an evaluation's collected results

RELEASED_FILES = {
    CONFIG: "public settings: data spec, model, DP parameters, --seed",
    STATUS: "rounds completed of the public schedule",
    PRIVACY: "the run's DP events and (ε, δ)",
    METRICS: "per-round values the server computes from DP outputs only (no client metric, no timing)",
    EVAL: "evaluate_fn on the released weights (public data only)",
    TENSORBOARD: "the same scalars as metrics.csv and eval.csv",
    MODEL_WEIGHTS: "the DP-FedAvg model",
    VOCAB: "the vocabulary: from public text, or DP heavy hitters",
    DEVICE_METRICS: "DP aggregates of device statistics",
    POPULATION: "DP counts of the selected subpopulation",
    THRESHOLD: "DP quantile thresholds for T4",
    D_STEP: "the GAN discriminator's server-step scale, computed from the DP count of qualified users",
    PRIMARY_FIT: "whether the primary model fits the users: from the DP thresholds and a DP count of the labels present",
    PRIMARY: "the primary model, trained on public data or given by the modeler",
    PRIMARY_INFO: "its configuration and public held-out accuracy",
    PRIMARY_REFERENCE: "its feature statistics on public held-out images",
    **{name: "the modeler's own primary model, as they gave it (--primary): theirs, public, the users run it"
       for name in PRIMARY_MODELS.values()},
    ANALYSIS: "computed from generated samples and DP outputs",
    DIAGNOSIS: "computed from two runs' generated samples and their DP outputs",
    DIAGNOSIS_PNG: "the effects of the diagnosis, computed from generated samples",
    DIAGNOSIS_A_PNG: "generated samples of the reference run",
    DIAGNOSIS_B_PNG: "generated samples of this run",
    ANALYSIS_PNG: "computed from generated samples",
    TOP_OOV_WORDS: "computed from generated samples",
    SAMPLES_PNG: "generated samples",
    SAMPLES_NPZ: "generated samples",
    SAMPLES_JSON: "generated samples, and a digest of the released model that drew them",
    SAMPLE_SNAPSHOTS: "samples of the generator after round r: post-processing of rounds 1..r's DP aggregates, "
                      "which the run's ε covers (every round's release is composed)",
    CANARIES: "synthetic canaries and their insertion configs (never which users shared them)",
    MEMORIZATION: "computed from the released weights and the canaries",
    MEMORIZATION_PNG: "computed from the released weights and the canaries",
    MEMORIZATION_GLYPHS_PNG: "the public glyph canaries beside the released generator's nearest samples",
    MONITOR: "a monitoring plan (public settings), how many periods are done, thresholds calibrated on signals",
    PERIODS: "per period: signals computed from the period's generated samples, and the ε composed so far",
    ALERTS: "decisions computed from the periods' signals",
    VOCABULARIES: "the modeler's own vocabulary files (a plan's vocab = \"file:PATH\"), as they gave them: public",
}
SERVER_FILES = {
    SECRET: "the run secret: DP noise and client sampling derive from it",
    CHECKPOINTS: "full process state, including the DP noise seed",
    TIMING: "per-round wall time (depends on which clients were sampled and what they selected)",
    SELECTION: "which users a selector picked (paper mode only, where the server learns it)",
    PROGRAM_STATE: "the monitor's tff.program state: the last finished period and its signal history",
    STAGED_SNAPSHOTS: "GAN sample snapshots while the run trains: a file's modification time is when its round "
                      "ended, which depends on who was sampled; published to released/ together at the end",
    SCHEDULE: "when each monitoring period finished (its wall time depends on who was sampled, as timing.csv), "
              "and where the periods' cadence grid starts",
}


def released(run_dir: str, name: str, *more: str) -> str:
    """The path of a released file (or a file inside a released directory such as tensorboard/)."""
    if name not in RELEASED_FILES:
        raise ValueError(f"{name!r} is not a released run file; declare it in runs.store.RELEASED_FILES "
                         "with the reason it may be released.")
    return os.path.join(run_dir, RELEASED, name, *more)


def server(run_dir: str, name: str, *more: str) -> str:
    """The path of a server-side file: never shown to the modeler. Whatever writes one makes it owner-only
    (`owner_only`; `write_private_json` does)."""
    if name not in SERVER_FILES:
        raise ValueError(f"{name!r} is not a server-side run file (runs.store.SERVER_FILES).")
    return os.path.join(run_dir, SERVER, name, *more)


def owner_only(path: str) -> str:
    """Makes `path` below a run's server/ part owner-only: a file 0600, a directory 0700 with everything
    in it, and every directory from server/ down to it 0700. Other users of the machine must not read
    what only the trusted server keeps (timing, checkpoints, selection) any more than the secret; the
    server/ directory itself is the barrier, the modes inside it hold when a file is copied out with
    its mode. Returns `path`."""
    path = os.path.abspath(path)
    parts = path.split(os.sep)
    if SERVER not in parts:
        raise ValueError(f"{path} is not below a run's {SERVER}/ part.")
    top = os.sep.join(parts[:len(parts) - parts[::-1].index(SERVER)])   # the innermost server/
    for directory, _, files in os.walk(path):
        os.chmod(directory, 0o700)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o600)
    if os.path.isfile(path):
        os.chmod(path, 0o600)
    directory = os.path.dirname(path)
    while len(directory) >= len(top):
        os.chmod(directory, 0o700)
        directory = os.path.dirname(directory)
    return path


def training_release(privacy: dict) -> dict | None:
    """The training release in a run's released privacy.json (`loop.training_record`'s id ends with
    "/training"), or None before training was charged."""
    return next((r for k, r in privacy.get("releases", {}).items() if k.endswith("/training")), None)


def write_json(path: str, data) -> None:
    atomic.write_json(path, data, sort_keys=True)


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save_arrays(path: str, arrays) -> None:
    """A list of arrays as an .npz (arr_0, arr_1, ...), atomically."""
    with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, *[np.asarray(a) for a in arrays])


def copy_public(source: str, target: str) -> None:
    """A public file or directory the modeler gave (their own model) into the store, atomically."""
    partial = target + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    if os.path.isdir(source):
        shutil.copytree(source, partial)
        shutil.rmtree(target, ignore_errors=True)
    else:
        shutil.copyfile(source, partial)
    os.replace(partial, target)


def load_arrays(path: str) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]



_SNAPSHOT_NAME = re.compile(r"round_(\d{6})\.npz")


def snapshot_path(run_dir: str, round_num: int) -> str:
    """Where the GAN sample snapshot after `round_num` rounds is released (`publish_snapshots`)."""
    return released(run_dir, SAMPLE_SNAPSHOTS, f"round_{round_num:06d}.npz")


def staged_snapshot_path(run_dir: str, round_num: int) -> str:
    """Where `gan_snapshots` writes the snapshot after `round_num` rounds while the run trains."""
    return server(run_dir, STAGED_SNAPSHOTS, f"round_{round_num:06d}.npz")


def publish_snapshots(run_dir: str) -> None:
    """Moves the staged snapshots into released/ as new files, written together once training ended, so
    that their modification and change times (which no process can set back) are all about the end of
    training, never the end of their round. Idempotent; a resumed run publishes what it staged since."""
    staged = os.path.join(run_dir, SERVER, STAGED_SNAPSHOTS)
    if not os.path.isdir(staged):
        return
    for name in sorted(os.listdir(staged)):
        if _SNAPSHOT_NAME.fullmatch(name):
            target = released(run_dir, SAMPLE_SNAPSHOTS, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with atomic.atomic_path(target) as tmp:
                shutil.copyfile(os.path.join(staged, name), tmp)   # a new inode: its times are now
            os.remove(os.path.join(staged, name))


def snapshot_rounds(run_dir: str) -> list[int]:
    """Rounds with a released GAN sample snapshot, ascending ([] for runs without)."""
    try:
        names = os.listdir(released(run_dir, SAMPLE_SNAPSHOTS))
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SNAPSHOT_NAME.fullmatch, names) if m)


def load_snapshot(run_dir: str, round_num: int) -> np.ndarray:
    """The uint8 images [n, 28, 28] (255 = white) the generator drew after `round_num` rounds."""
    (images,) = load_arrays(snapshot_path(run_dir, round_num))
    return images


def write_private_json(path: str, data) -> None:
    """JSON below server/, readable by the owner only (`owner_only`)."""
    write_json(path, data)
    owner_only(path)


class CsvLog:
    """Append-only CSV of per-round rows; on resume, rows after the restored round are dropped.
    `private`: a log below server/, kept owner-only (`owner_only`)."""

    def __init__(self, path: str, resume_round: int, private: bool = False):
        self.path, self.private = path, private
        self.fieldnames = None
        if os.path.exists(path):
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                self.fieldnames = reader.fieldnames
                # A row cut short by a crash mid-write has missing fields: drop it with the later ones.
                rows = [r for r in reader if None not in r.values() and len(r) == len(self.fieldnames)
                        and int(r["round"]) <= resume_round]
            with atomic.atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=self.fieldnames)
                writer.writeheader()
                writer.writerows(rows)
            if private:
                owner_only(path)

    def append(self, row: dict) -> None:
        new = self.fieldnames is None
        if new:
            self.fieldnames = list(row)
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.fieldnames, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
            f.flush()
            os.fsync(f.fileno())
        if new and self.private:
            owner_only(self.path)


def read_csv(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def flatten_metrics(metrics, prefix: str = "") -> dict:
    """Nested metric dicts → {"a/b": float} for scalar numeric leaves."""
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


_held_locks: set[str] = set()


@contextlib.contextmanager
def exclusive(run_dir: str):
    """Holds a lock for `run_dir` while a process works on it: two processes starting or resuming the
    same run would interleave rounds (or create two secrets). The lock file sits next to the run
    directory (which may not exist yet). Re-entrant within a process: a scenario holds it across its
    own releases and the training loop it calls."""
    path = os.path.abspath(run_dir)
    if path in _held_locks:
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock"), "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{run_dir} is being trained by another process; wait for it or stop it.") from None
        _held_locks.add(path)
        try:
            yield
        finally:
            _held_locks.discard(path)
            fcntl.flock(f, fcntl.LOCK_UN)


def read_config(run_dir: str) -> dict | None:
    path = released(run_dir, CONFIG)
    return read_json(path) if os.path.exists(path) else None


def released_config(run_dir: str) -> dict:
    """A run's released config; a directory without one is refused as no run (the first thing a run writes)."""
    config = read_config(run_dir)
    if config is None:
        raise ValueError(f"{run_dir}: not a run directory (no released config).")
    return config


def is_finished(run_dir: str) -> bool:
    """Whether a run's released status says its training finished."""
    path = released(run_dir, STATUS)
    return os.path.exists(path) and read_json(path).get("state") == "finished"


def is_run(run_dir: str) -> bool:
    return os.path.exists(released(run_dir, CONFIG))


def is_monitor(directory: str) -> bool:
    return os.path.exists(released(directory, MONITOR))


def period_record_path(monitor_dir: str, period: int) -> str:
    return released(monitor_dir, PERIODS, f"period_{period:03d}.json")


def period_records(monitor_dir: str) -> list[dict]:
    """The released period records of a monitor directory, in period order."""
    directory = released(monitor_dir, PERIODS)
    names = sorted(n for n in os.listdir(directory) if n.startswith("period_") and n.endswith(".json")) \
        if os.path.isdir(directory) else []
    return [read_json(os.path.join(directory, n)) for n in names]


def read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: str, rows) -> None:
    """Rewrites the whole file atomically (a crash leaves the old one, never half a line)."""
    with atomic.atomic_path(path) as tmp, open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")


def run_dirs(root: str) -> list[str]:
    """Every run directory below `root` (including `root` itself), sorted."""
    return sorted(d for d, subdirs, _ in os.walk(root) if RELEASED in subdirs and is_run(d))


def finished_run_config(run_dir: str, kind: str, command: str) -> dict:
    """The released config of a finished run of `kind` (its extra-config key, e.g. "lm" or "gan");
    clear errors for a missing, foreign or unfinished run."""
    saved = released_config(run_dir)
    if kind not in saved:
        raise ValueError(f"{run_dir}: not a {kind.upper()} run.")
    status_path = released(run_dir, STATUS)
    if not os.path.exists(status_path):   # stopped after its config was written, before its first round
        raise ValueError(f"{run_dir}: training has not started; re-run {command} with the same arguments.")
    status = read_json(status_path)
    if status["state"] != "finished":
        raise ValueError(f"{run_dir}: training has not finished ({status['rounds_completed']}/{status['rounds']} "
                         f"rounds); re-run {command} with the same arguments to resume.")
    return saved
