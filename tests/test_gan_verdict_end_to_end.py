"""The pixel-inversion verdict end to end, on GANs a real run released (issue 58): the T4 pair of
`evaluation/real_epsilon.py --story invert` (3,400 synthetic writers, qN = 200, z = 3, 150 rounds, each
world's releases ε 8.67 in its ledger). `tests/data/real_epsilon_gans/` holds what those runs released
that `analyze_gan` reads: config, status, DP counts, primary fit, privacy summary, and the generator's
weights (float16: the verdicts below are the same as the float32 runs'). The primary CNN, which only
scores sample quality here, is a test-size one trained on public stand-in writers."""

import os
import shutil

import numpy as np
import pytest

from fedgen_debug.analysis.gan_report import analyze_gan
from fedgen_debug.runs import store
from fedgen_debug.training import primary_cnn

STORED = os.path.join(os.path.dirname(__file__), "data", "real_epsilon_gans")


@pytest.fixture(scope="module")
def released_gans(tmp_path_factory):
    from fedgen_debug.experiments.gan import train_public_primary

    root = tmp_path_factory.mktemp("real-epsilon-gans")
    primary = str(root / "primary_cnn.npz")
    train_public_primary(primary, "test", 0, classes=62)
    runs = {}
    for name in sorted(os.listdir(STORED)):
        run_dir = str(root / name)
        shutil.copytree(os.path.join(STORED, name), run_dir)
        weights = store.released(run_dir, store.MODEL_WEIGHTS)
        np.savez(weights, *[a.astype(np.float32) for a in store.load_arrays(weights)])
        for source, target in ((primary, store.PRIMARY), (primary_cnn.info_path(primary), store.PRIMARY_INFO),
                               (primary_cnn.reference_path(primary), store.PRIMARY_REFERENCE)):
            shutil.copy(source, store.released(run_dir, target))
        runs[name] = run_dir
    return runs


def test_the_low_accuracy_gan_of_the_world_with_the_bug_is_flagged(released_gans):
    report = analyze_gan(released_gans["with-bug-low"], released_gans["without-bug-high"], samples=1000)
    assert report["pixel_inversion_suspected"] is True and not report["inconclusive"]
    evidence = report["evidence"]
    assert evidence["current"]["share"] > 0.95 and evidence["reference"]["share"] < 0.01
    assert evidence["z"] > 10


def test_the_low_accuracy_gan_of_the_world_without_the_bug_is_not(released_gans):
    report = analyze_gan(released_gans["without-bug-low"], released_gans["without-bug-high"], samples=1000)
    assert report["pixel_inversion_suspected"] is False and not report["inconclusive"]
    assert report["evidence"]["current"]["share"] < 0.01 and report["evidence"]["z"] < 3


def test_each_worlds_releases_were_within_epsilon_10_in_its_ledger(released_gans):
    """The population total each run's privacy summary recorded from its world's ledger (the last run of
    a world saw all 8 releases: two quantiles, four counts, two GANs)."""
    totals = {name: store.read_json(store.released(d, store.PRIVACY))["population_total"]
              for name, d in released_gans.items()}
    for total in totals.values():
        assert total["budget"]["epsilon"] == 10.0 and total["epsilon"] <= 10.0
        assert total["delta"] == pytest.approx(0.01 / 3400)
    assert totals["without-bug-high"]["releases"] == 8 and totals["without-bug-high"]["epsilon"] == pytest.approx(8.6706, abs=1e-4)
