"""Does the primary model fit the users? The near-chance and crossed-threshold checks on exact values,
the DP count of the labels present, and a GAN run with a primary model that is always wrong: the
warning reaches the run store, the CLI and analyze-gan."""

import json

import numpy as np
import pytest

from conftest import provision_secret, run_cli
from fedgen_debug.data.client_data import ArrayClientData
from fedgen_debug.privacy import aggregates
from fedgen_debug.runs import store
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.analysis import primary_fit
from fedgen_debug.device import label_presence


def test_a_threshold_near_chance_warns_with_the_chance_level_and_suggests_primary():
    # Real FEMNIST with the synthetic stand-in: 4-5% for 62 classes (chance 1.6%).
    fit = primary_fit.check({0.25: 0.04, 0.75: 0.05}, 62, "as given")
    assert fit["near_chance"] and not fit["crossed"] and fit["chance"] == pytest.approx(1 / 62)
    (warning,) = fit["warnings"]
    assert "near chance" in warning and "1.6% for 62 classes" in warning and "--primary" in warning
    assert "background=black" in warning and "--primary-background" in warning   # a convention mix-up looks the same
    # Skill (acc − 1/K)/(1 − 1/K): 10 classes, 0.19 is exactly 0.1 (not near); 0.18 is.
    assert primary_fit.skill(0.19, 10) == pytest.approx(0.1)
    assert not primary_fit.check({0.75: 0.1901}, 10, "x")["near_chance"]
    assert primary_fit.check({0.75: 0.18}, 10, "x")["near_chance"]
    # The same accuracy is near chance for 2 classes and fine for 62: the class count matters.
    assert primary_fit.check({0.25: 0.3}, 2, "x")["near_chance"] and not primary_fit.check({0.25: 0.3}, 62, "x")["warnings"]


def test_crossed_thresholds_warn_and_a_fitting_model_does_not():
    crossed = primary_fit.check({0.25: 0.62, 0.75: 0.55}, 10, "x")
    assert crossed["crossed"] and not crossed["near_chance"]
    assert len(crossed["warnings"]) == 1 and "not below the high one" in crossed["warnings"][0]
    assert primary_fit.check({0.25: 0.55, 0.75: 0.55}, 10, "x")["crossed"]   # equal is not below
    assert primary_fit.check({0.25: 0.6, 0.75: 0.9}, 62, "x")["warnings"] == []
    # A pair: each run checked its own quantile; together they cross.
    low = primary_fit.check({0.25: 0.7}, 10, "a DP count")
    high = primary_fit.check({0.75: 0.6}, 10, "a DP count")
    assert low["warnings"] == high["warnings"] == []
    pair = primary_fit.pair_check(low, high)
    assert pair["crossed"] and pair["thresholds"] == {"0.25": 0.7, "0.75": 0.6}
    # A sharper low cut (the 5% quantile) is checked against the high one the same way.
    assert primary_fit.check({0.05: 0.61, 0.75: 0.6}, 10, "x")["crossed"]
    assert not primary_fit.check({0.05: 0.4, 0.75: 0.6}, 10, "x")["crossed"]
    assert primary_fit.pair_check(None, None) is None
    with pytest.raises(ValueError, match="classes must be >= 2. Found 1."):
        primary_fit.check({0.25: 0.5}, 1, "x")


def test_label_presence_is_a_0_1_vector_per_device_over_the_models_classes():
    data = ArrayClientData({
        "a": {"pixels": np.zeros((4, 28, 28), np.float32), "label": np.array([0, 0, 2, 9])},
        "b": {"pixels": np.zeros((1, 28, 28), np.float32), "label": np.array([1])},
        "c": {"pixels": np.zeros((2, 28, 28), np.float32), "label": np.array([7, 5])}})
    presence = label_presence.label_presence(data, ["a", "b", "c"], 3)   # labels 5, 7, 9 are not the model's
    assert presence.tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 0]]


def test_classes_present_counts_what_the_noise_does_not_hide():
    assert label_presence.classes_present([100.0, 50.0, 2.0, -3.0], 10.0, 100) == 2
    assert label_presence.classes_present([100.0, 50.0, 31.0, 29.0], 10.0, 100) == 3
    assert label_presence.classes_present([100.0, 1.0], 10.0, 100) == 2        # at least 2: chance is at most 1/2
    # 59 devices: a class all of them hold could sit under 3σ = 30; a partial count would understate K.
    assert label_presence.classes_present([100.0, 50.0, 31.0], 10.0, 59) is None
    assert label_presence.classes_present([100.0, 50.0, 31.0], 10.0, 60) == 3


def test_the_released_label_counts_are_noised_with_the_specs_stddev():
    """An attack that must fail: the exact number of devices per class is not what is released. Over
    many secrets the released counts scatter around it with std z·√K/2 (here 4·√4/2 = 4)."""
    rng = np.random.default_rng(0)
    records = (rng.random((30, 4)) < [0.9, 0.5, 0.1, 0.0]).astype(float)
    exact = records.sum(axis=0)
    spec = label_presence.labels_present_spec(4, len(records))
    released = np.array([aggregates.compute(spec, records, RunSecret(s)).values for s in range(200)])
    assert not np.any(np.isclose(released, exact[None, :]))
    assert np.allclose(released.mean(axis=0), exact, atol=4 * 4.0 / np.sqrt(200))
    assert np.allclose(released.std(axis=0), 4.0, rtol=0.2)
    assert spec.stddev == pytest.approx([4.0] * 4)


@pytest.fixture(scope="module")
def always_wrong_primary(tmp_path_factory):
    """A primary CNN with 63 outputs that always answers class 62, which no user's image has: every
    user's accuracy is 0, so the DP 75th percentile ends near 0 (from 0.5: 100 rounds of −0.0075)."""
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.training import presets, primary_cnn

    path = str(tmp_path_factory.mktemp("primary") / "always_wrong.npz")
    model = primary_cnn.train_primary_cnn(data_spec.load_client_data("synthetic-images:writers=12,seed=9"),
                                          presets.primary_cnn_config("test", num_classes=63), 0, 1, path)
    weights = model.get_weights()
    weights[-2][:] = 0.0
    weights[-1][:] = 0.0
    weights[-1][62] = 10.0
    store.save_arrays(path, weights)
    return path


def test_a_gan_run_on_a_near_chance_primary_warns_in_the_store_the_cli_and_analyze_gan(tmp_path, always_wrong_primary):
    out = str(tmp_path / "high")
    provision_secret(out, "primary-fit-always-wrong")
    data = "synthetic-images:writers=100,seed=3"   # qN = 10 a round: the estimate ends within 0.02 of 0
    result = run_cli("train-gan", "--data", data, "--select", "by-user-accuracy:high", "--preset", "test",
                     "--rounds", "1", "--primary", always_wrong_primary, "--classes", "62", "--out", out)
    assert result.returncode == 0, result.stderr
    fit = json.load(open(store.released(out, store.PRIMARY_FIT)))
    assert fit["thresholds"]["0.75"] < 0.05 and fit["near_chance"] and not fit["crossed"]
    assert fit["classes"] == 62 and fit["classes_source"] == "as given" and fit["labels_present"] is None
    assert "WARNING: the primary model is near chance" in result.stdout and "1.6% for 62 classes" in result.stdout
    # The modeler gave the class count: no DP count of labels is released.
    privacy = json.load(open(store.released(out, store.PRIVACY)))
    assert not any("labels-present" in r["label"] for r in privacy["releases"].values())
    analysis = run_cli("analyze-gan", out, "--samples", "20")
    assert analysis.returncode == 0, analysis.stderr
    assert "WARNING: the primary model is near chance" in analysis.stdout
