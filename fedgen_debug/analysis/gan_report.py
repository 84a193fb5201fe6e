"""`analyze-gan`: samples of one or two trained GANs, their grids, quality and the inversion verdict.

The verdict compares the current GAN with another (low- vs high-accuracy users, misclassified vs
correct examples, or before vs after a fix) with a one-sided z-test on the share of samples with a
dark background (`gan_analysis.inversion_verdict`); without a second GAN, against a noise floor. The
same test runs along training on the released sample snapshots (`gan_analysis.training_path_evidence`).
Whether the primary model fits the users (`primary_fit`: T4 thresholds near chance, or crossed
across the pair) is part of the report, with the warnings to print. Quality: Fréchet distance and
classifier score in the primary CNN's feature space, against clean held-out images' feature statistics saved with the run's copy of the primary CNN. Only released
files are read (generated images, the DP counts of the subpopulation): never a client's example.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import run_privacy
from fedgen_debug.analysis import gan_analysis, primary_fit
from fedgen_debug.training import primary_cnn
from fedgen_debug.training.gan_run import generate, load_generator, released_d_step


def describe_gan(run_dir: str, samples: int, seed: int) -> tuple[dict, object]:
    generator, run = load_generator(run_dir)
    images = generate(generator, samples, seed)
    store.save_arrays(store.released(run_dir, store.SAMPLES_NPZ), [images])
    gan_analysis.sample_grid_png(images[:64], store.released(run_dir, store.SAMPLES_PNG))
    population = store.read_json(store.released(run_dir, store.POPULATION))
    primary_path = store.released(run_dir, store.PRIMARY)
    primary = primary_cnn.load_primary_cnn(primary_path)
    quality = gan_analysis.sample_quality(primary, images, primary_cnn.reference_statistics(primary_path),
                                          primary_cnn.reference_nearest(primary_path))
    privacy = run_privacy(run_dir)
    return {"run_dir": run_dir, "select": run.select, "population": population, "d_step": released_d_step(run_dir),
            "primary_fit": primary_fit.released_fit(run_dir),
            "privacy": {"run": privacy["releases"][f"{_run_id(privacy)}/training"], "population_total":
                        privacy["population_total"]},
            "dark_background": gan_analysis.dark_background(images), "quality": quality,
            "samples_png": store.released(run_dir, store.SAMPLES_PNG)}, images


def snapshots(run_dir: str, last: int | None = None) -> dict:
    """round → the released snapshot's images in the generator's range [-1, 1] (the `last` rounds only)."""
    rounds = store.snapshot_rounds(run_dir)
    return {r: store.load_snapshot(run_dir, r).astype(np.float32) / 127.5 - 1.0
            for r in (rounds if last is None else rounds[-last:])}


def _run_id(privacy: dict) -> str:
    (training,) = [k for k in privacy["releases"] if k.endswith("/training")]
    return training.rsplit("/", 1)[0]


def analyze_gan(run_dir: str, compare_dir: str | None = None, samples: int = 1000, seed: int = 0) -> dict:
    """Writes samples.png/.npz into each run and analysis.json into `run_dir`; returns the report."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1. Found {samples}.")
    current, current_images = describe_gan(run_dir, samples, seed)
    report = {"current": current}
    reference_images = None
    if compare_dir is not None:
        report["compare"], reference_images = describe_gan(compare_dir, samples, seed)
    path = gan_analysis.training_path_evidence(
        snapshots(run_dir), None if compare_dir is None else snapshots(compare_dir))
    verdict = gan_analysis.inversion_verdict(current_images, reference_images, path)
    # Does the primary model fit the users? Each run checked its own T4 threshold; a pair also checks
    # that the low-accuracy threshold is below the high one.
    fit = primary_fit.pair_check(current["primary_fit"], report.get("compare", {}).get("primary_fit"))
    report = {**verdict, "primary_fit": fit, **report}
    store.write_json(store.released(run_dir, store.ANALYSIS), report)
    return report
