"""`analyze-gan`: samples of one or two trained GANs, their grids, quality and the inversion verdict.

The verdict compares the current GAN with another (low- vs high-accuracy users, misclassified vs
correct examples, or before vs after a fix) with a one-sided z-test on the share of samples with a
dark background (`gan_analysis.inversion_verdict`); without a second GAN, against a noise floor.
Quality: Fréchet distance and classifier score in the primary CNN's feature space, against clean
held-out images' feature statistics saved with the primary CNN. Only generated images and
population sizes are read: never a client's example.
"""

from __future__ import annotations

import os

from fedgen_debug.scenarios import gan_analysis, primary_cnn
from fedgen_debug.scenarios.gan import POPULATION_FILE, generate, load_generator
from fedgen_debug.training import run_dir as rd

ANALYSIS = "analysis.json"
SAMPLES_PNG = "samples.png"
SAMPLES_NPZ = "samples.npz"


def describe_gan(run_dir: str, samples: int, seed: int) -> tuple[dict, object]:
    generator, run = load_generator(run_dir)
    images = generate(generator, samples, seed)
    rd.save_arrays(os.path.join(run_dir, SAMPLES_NPZ), [images])
    gan_analysis.sample_grid_png(images[:64], os.path.join(run_dir, SAMPLES_PNG))
    population = rd.read_json(os.path.join(run_dir, POPULATION_FILE))
    primary = primary_cnn.load_primary_cnn(population["primary"])
    quality = gan_analysis.sample_quality(primary, images, primary_cnn.reference_statistics(population["primary"]))
    return {"run_dir": run_dir, "select": run.select, "population": population,
            "dark_background": gan_analysis.dark_background(images), "quality": quality,
            "samples_png": os.path.join(run_dir, SAMPLES_PNG)}, images


def analyze_gan(run_dir: str, compare_dir: str | None = None, samples: int = 1000, seed: int = 0) -> dict:
    """Writes samples.png/.npz into each run and analysis.json into `run_dir`; returns the report."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1. Found {samples}.")
    current, current_images = describe_gan(run_dir, samples, seed)
    report = {"current": current}
    reference_images = None
    if compare_dir is not None:
        report["compare"], reference_images = describe_gan(compare_dir, samples, seed)
    verdict = gan_analysis.inversion_verdict(current_images, reference_images)
    report = {**verdict, **report}
    rd.write_json(os.path.join(run_dir, ANALYSIS), report)
    return report
