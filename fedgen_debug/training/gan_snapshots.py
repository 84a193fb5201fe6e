"""Sample snapshots during GAN training: what the generator draws every `eval_every` rounds, for the
app's round slider (TensorBoard's image dashboard has one; watching a background turn dark over rounds
is how an inversion shows up).

Each snapshot is the generator after round r on one fixed batch of public noise (drawn from the run's
public `seed`), so the grids differ only by training. It is post-processing of the DP aggregates of
rounds 1..r, which the run's ε already covers (the accountant composes every round's release). The
images go to `server/staged_snapshots/round_NNNNNN.npz` as uint8 (255 = white) while the run trains,
and to `released/` together when it ends (`runs.store.publish_snapshots`: a file written at the end of
its round would carry that time, which depends on who was sampled); the cheap per-snapshot statistics
(dark-background, blank and noise shares) go to eval.csv.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug.models.gan import to_unit
from fedgen_debug.runs import store
from fedgen_debug import rng_streams

SNAPSHOT_SAMPLES = 64


def snapshot_noise(seed: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(rng_streams.GAN_SNAPSHOT_NOISE,)))
    return rng.standard_normal((SNAPSHOT_SAMPLES, dim)).astype(np.float32)


def to_uint8(images) -> np.ndarray:
    """Generator output in [-1, 1] → [n, 28, 28] uint8 with 255 = white."""
    return np.round(to_unit(images) * 255).astype(np.uint8)


def snapshot_fn(generator_fn, seed: int, run_dir: str, statistics_fn):
    """The `evaluate_fn` of `training.loop.train`: assigns the released generator weights to a
    generator from `generator_fn`, draws the fixed noise, writes the snapshot and returns
    `statistics_fn(images)` (the analysis's cheap statistics: training does not import analysis).

    The generator is built at the first snapshot, not before: building the TFF process traces Keras
    models in graphs, which invalidates Keras models made outside them."""
    built = []

    def snapshot(weights, round_num: int) -> dict:
        if not built:
            built.append(generator_fn())
        generator = built[0]
        noise = snapshot_noise(seed, generator.input_shape[-1])
        weights.assign_weights_to(generator)
        images = generator(noise, training=False).numpy()
        path = store.staged_snapshot_path(run_dir, round_num)   # released when training ends
        store.save_arrays(path, [to_uint8(images)])
        store.owner_only(path)
        return statistics_fn(images)

    return snapshot
