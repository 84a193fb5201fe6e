"""`check-memorization` for GAN runs: does the generator draw the glyphs its users' devices held?

For `samples` generated images (the checker's public noise, `seed`) and `references` random glyphs
never inserted with the canary's number of dark cells: each canary's nearest-sample distance ranked
among the references' (`rs_rank`, `exposure`), and whether some sample decodes to it (`bs_found`);
see `device.image_canaries`.
Tables, verdict and picture are the LM checker's (`memorization.check`). Inputs: the released generator
and the public canaries, so the report is post-processing of DP outputs.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.memorization.check import ramaswamy_table, thakkar_table, verdict
from fedgen_debug.memorization.exposure import exposure_from_rank
from fedgen_debug.device.image_canaries import GLYPH_BITS, ImageCanary, decodes_to, glyph_pixels, nearest_distances
from fedgen_debug.runs import store
from fedgen_debug.validation import check_at_least

DEFAULT_SAMPLES = 20_000
DEFAULT_GLYPH_REFERENCES = 1_000   # per ink count among the canaries
DEFAULT_GAN_MAX_EXPOSURE_BITS = 8.0   # at most log2(references + 1) ≈ 10 bits can be resolved


@dataclasses.dataclass(frozen=True)
class GanCheckConfig:
    samples: int = DEFAULT_SAMPLES
    references: int = DEFAULT_GLYPH_REFERENCES
    max_exposure_bits: float = DEFAULT_GAN_MAX_EXPOSURE_BITS
    seed: int = 0

    def __post_init__(self):
        check_at_least("samples", self.samples, 1)
        check_at_least("references", self.references, 3)
        if not 0 < self.max_exposure_bits <= math.log2(self.references + 1):
            raise ValueError(f"max_exposure_bits must be in (0, log2(references + 1) = "
                             f"{math.log2(self.references + 1):.1f}]. Found {self.max_exposure_bits}.")


def to_gan_range(pixels: np.ndarray) -> np.ndarray:
    return 2.0 * np.asarray(pixels, np.float32) - 1.0


def glyphs_with_ink(rng: np.random.Generator, ink: int, count: int, exclude) -> np.ndarray:
    """`count` random glyph bit vectors with exactly `ink` dark cells, none in `exclude`."""
    out = []
    while len(out) < count:
        bits = np.zeros(GLYPH_BITS, np.uint8)
        bits[rng.choice(GLYPH_BITS, size=ink, replace=False)] = 1
        if tuple(int(b) for b in bits) not in exclude:
            out.append(bits)
    return np.stack(out)


def check_glyphs(samples: np.ndarray, canaries, config: GanCheckConfig) -> list[dict]:
    """One row per canary from generated `samples` [n, 28, 28(, 1)] in [-1, 1]. Each canary is ranked
    among references with as many dark cells as it has: a generator that draws mostly white is close
    to every sparse glyph, and ranking a sparse canary among glyphs of all densities would call that
    memorization (measured: a demo GAN ranked the sparsest of 16 glyphs first at every noise level)."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(rng_streams.GLYPH_REFERENCES,)))
    own = {c.bits for c in canaries}
    canary_pixels = to_gan_range(np.stack([c.pixels for c in canaries]))
    canary_nn, nearest = nearest_distances(samples, canary_pixels)
    flat = samples.reshape(len(samples), -1)
    by_ink = {}
    for ink in sorted({sum(c.bits) for c in canaries}):
        bits = glyphs_with_ink(rng, ink, config.references, own)
        references = to_gan_range(np.stack([glyph_pixels(b) for b in bits]))
        by_ink[ink] = (references, nearest_distances(samples, references)[0])
    rows = []
    for canary, distance, index, pixels in zip(canaries, canary_nn, nearest, canary_pixels):
        references, reference_nn = by_ink[sum(canary.bits)]
        rank = 1 + int((reference_nn <= distance).sum())
        rows.append({"id": canary.canary_id, "inserted": canary.config is not None,
                     "config": None if canary.config is None else canary.config.to_json(),
                     "ink_cells": int(sum(canary.bits)), "nearest_sample_distance": float(distance),
                     "rs_rank": rank, "exposure": float(exposure_from_rank(rank, config.references)[0]),
                     "bs_found": decodes_to(flat[index], pixels, references), "nearest_sample": int(index)})
    return rows


def plot_glyphs(canaries, samples: np.ndarray, rows: list[dict], path: str) -> str:
    """Each canary (top) above the generated image nearest to it (bottom), with its rank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(canaries), figsize=(1.1 * len(canaries) + 0.6, 2.9), squeeze=False)
    for column, (canary, row) in enumerate(zip(canaries, rows)):
        sample = (samples[row["nearest_sample"]].reshape(28, 28) + 1.0) / 2.0
        for ax, image in zip(axes[:, column], (canary.pixels, sample)):
            ax.imshow(image, cmap="gray", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
        name = canary.config.label.replace(",", "\n") if canary.config else "control"
        axes[0, column].set_title(name, fontsize=6)
        axes[1, column].set_xlabel(f"rank {row['rs_rank']}" + (" ✓" if row["bs_found"] else ""), fontsize=7,
                                   color="tab:red" if row["inserted"] and row["rs_rank"] == 1 else "black")
    axes[0, 0].set_ylabel("canary", fontsize=7)
    axes[1, 0].set_ylabel("nearest\nsample", fontsize=7)
    fig.suptitle("glyph canaries and the generator's nearest samples (rank among random glyphs; ✓ decodes)",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def check_gan_run(run_dir: str, config: GanCheckConfig = GanCheckConfig()) -> dict:
    """Checks a finished GAN run trained with `--canaries`; writes and returns the report."""
    from fedgen_debug.training.gan_run import generate, load_generator

    try:
        recorded = store.read_json(store.released(run_dir, store.CANARIES))
    except FileNotFoundError:
        raise FileNotFoundError(f"{run_dir}: no canaries in this run (train it with --canaries).") from None
    generator, _ = load_generator(run_dir)
    canaries = tuple(ImageCanary.from_json(c) for c in recorded["canaries"])
    samples = generate(generator, config.samples, seed=config.seed + rng_streams.GLYPH_SAMPLES_SEED_OFFSET)
    rows = check_glyphs(samples, canaries, config)
    plot_glyphs(canaries, samples, rows, store.released(run_dir, store.MEMORIZATION_GLYPHS_PNG))
    report = {"run_dir": run_dir, "kind": "GAN", "spec": recorded["spec"], "samples": config.samples,
              "references": config.references, "beam_width": None, "log2_space": math.log2(recorded["space_size"]),
              "canaries": rows, "thakkar": thakkar_table(rows), "ramaswamy": ramaswamy_table(rows),
              "verdict": verdict(rows, config.max_exposure_bits),
              "method": "nearest-sample distance of generated images, ranked among random glyphs never inserted; "
                        "bs_found: a sample decodes to the canary",
              "privacy": store.read_json(store.released(run_dir, store.PRIVACY))}
    store.write_json(store.released(run_dir, store.MEMORIZATION), report)
    return report
