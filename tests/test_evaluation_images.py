"""The image evaluation helpers: many small synthetic writers as an `.npz`
(`evaluation/synthetic_writers_npz.py`), read back through the data contract; the central GAN
yardstick (`evaluation/gan_central_reference.py`)."""

import dataclasses
import importlib.util
import json
import os
import pickle
import sys

import numpy as np
import pytest

from fedgen_debug.data import npz
from fedgen_debug.data import synthetic_images as si

_EVALUATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation")


def _load(name="synthetic_writers_npz"):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_EVALUATION, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # its dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_file_holds_each_writer_of_the_generator_with_its_characters(tmp_path, monkeypatch):
    script = _load()
    out = str(tmp_path / "writers.npz")
    monkeypatch.setattr(sys, "argv", ["x", "--writers", "3", "--seed", "5", "--median-examples", "4",
                                      "--min-examples", "2", "--max-examples", "6", "--processes", "1",
                                      "--out", out])
    script.main()
    data = npz.read_npz(out)
    assert sorted(data.client_ids) == [si.writer_id(w) for w in range(3)]
    config = si.SyntheticImagesConfig(3, 5, 2, 6, 4.0)
    for w in range(3):
        pixels, labels = si.generate_writer(5, w, config)
        arrays = data.client_arrays(si.writer_id(w))
        assert 2 <= len(labels) <= 6
        np.testing.assert_array_equal(arrays["label"], labels)
        # uint8 storage: each pixel within half a grey level of the generator's float.
        np.testing.assert_allclose(arrays["pixels"], pixels, atol=0.5 / 255 + 1e-6)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".partial")]


def test_the_central_gan_yardstick_trains_the_generator_reproducibly_from_its_seed():
    from fedgen_debug.models import gan as gan_models
    from fedgen_debug.training import presets

    script = _load("gan_central_reference")
    config = presets.gan_model_config("test")
    images = np.random.default_rng(0).uniform(-1, 1, (20, 28, 28, 1)).astype(np.float32)
    latent = np.random.default_rng(1).standard_normal((4, config.noise_dim)).astype(np.float32)
    initial = gan_models.build_generator(config, 3)(latent, training=False).numpy()
    first, second, other = (script.train_central(images, config, 2, 2, 1e-2, seed, batch=4)(latent, training=False).numpy()
                            for seed in (3, 3, 4))
    np.testing.assert_allclose(first, second, atol=1e-5)  # float sums may differ in the last bits
    assert np.abs(first - initial).max() > 1e-4   # the generator moved
    assert np.abs(first - other).max() > 1e-4     # another seed, another run


def test_gan_quality_cycle_is_the_demo_preset_with_clients_cycling():
    script = _load("gan_quality")
    (_, demo), (_, cycle) = script.configs("demo", 0), script.configs("cycle", 0)
    assert not demo.cycle_client_data and cycle == dataclasses.replace(demo, cycle_client_data=True)

def test_gan_quality_combines_configs_left_to_right():
    script = _load("gan_quality")
    (_, demo), (_, both) = script.configs("demo", 0), script.configs("cycle+no-noise", 0)
    assert both == dataclasses.replace(demo, cycle_client_data=True, training=dataclasses.replace(
        demo.training, dp=dataclasses.replace(demo.training.dp, noise_multiplier=0.0)))
    model, stepped = script.configs("big-d+d-step-x4", 0)
    assert model.disc_dense == 32 and stepped.training.server.learning_rate == 4.0
    with pytest.raises(SystemExit, match="nope"):   # an unknown part stops the run, naming it
        script.configs("cycle+nope", 0)


def test_property_faults_on_data_ranks_salt_and_pepper_as_noise_and_the_clean_halves_as_nothing(tmp_path, monkeypatch, capsys):
    """`evaluation/property_faults_on_data.py` on a small npz of synthetic writers (the npz contract)."""
    script = _load("property_faults_on_data")
    config = si.SyntheticImagesConfig(writers=40, min_examples=10, max_examples=10, median_examples=10)
    pixels = np.concatenate([si.generate_writer(0, w, config)[0] for w in range(40)])
    path = str(tmp_path / "w.npz")
    np.savez(path, pixels=np.round(pixels * 255).astype(np.uint8), writer_index=np.repeat(np.arange(40), 10))
    monkeypatch.setattr(sys, "argv", ["x", "--npz", path, "--images", "150"])
    script.main()
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    assert lines["clean"].startswith("families [];")
    assert lines["salt and pepper 5%"].startswith("families ['noise'")


def test_fault_ceiling_finds_a_quarter_turn_as_orientation_and_clean_data_as_nothing(tmp_path, monkeypatch):
    """`evaluation/fault_ceiling.py`: a fault on every device of a small npz of synthetic writers, measured
    on the data against the shipped calibration; the clean row compares two independent draws of the
    same images."""
    script = _load("fault_ceiling")
    config = si.SyntheticImagesConfig(writers=30, min_examples=10, max_examples=10, median_examples=10)
    writers = [si.generate_writer(0, w, config) for w in range(30)]
    path = str(tmp_path / "w.npz")
    np.savez(path, pixels=np.round(np.concatenate([p for p, _ in writers]) * 255).astype(np.uint8),
             labels=np.concatenate([labels for _, labels in writers]), client_ids=np.repeat(np.arange(30), 10))
    out = str(tmp_path / "rows.jsonl")
    monkeypatch.setattr(sys, "argv", ["x", "--data", f"npz:{path}", "--faults", "rotate,blur", "--fractions", "1.0",
                                      "--samples", "200", "--out", out])
    script.main()
    rows = {r["fault"]: r for r in map(json.loads, open(out))}
    assert rows["clean"]["detected"] is False and rows["clean"]["families"] == []
    assert rows["rotate"]["families"][0] == "orientation" and rows["rotate"]["family_rank"] == 1
    assert rows["blur"]["own_family_best"][0] in ("edge_width", "edge_steepness")
    assert rows["blur"]["family_rank"] >= 1


def test_fault_ceiling_ranks_the_faults_own_family_among_the_significant_ones():
    script = _load("fault_ceiling")

    def row(name, family, z, significant):
        return {"property": name, "family": family, "calibrated_z": z, "significant": significant, "z_threshold": 3.0}

    ranked = [row("mid_level", "brightness", 7.0, True), row("edge_width", "sharpness", 4.0, True),
              row("edge_steepness", "sharpness", -5.0, True), row("extent", "scale", 1.0, False)]
    got = script.fault_row("blur", 0.5, ranked)
    assert got["families"] == ["brightness", "sharpness"] and got["family_rank"] == 2
    assert got["own_family_best"] == ("edge_steepness", -5.0)
    assert script.fault_row("zoom", 0.5, ranked)["family_rank"] == 0   # scale is not beyond the threshold


def test_ink_spread_reports_relative_changes_of_the_means():
    """`evaluation/ink_spread.py`: B's mean against A's, less 1; the level over every image, the width over
    the images with ink (nan: blank)."""
    script = _load("ink_spread")
    # ink level = 2 · (paper − mid_level), paper = mid_level · (1 + contrast): A's (1.0, 0.5), B's (0.5, 0.5)
    values_a = {"mid_level": np.array([0.5, 0.75]), "michelson_contrast": np.array([1.0, 1 / 3]),
                "ink_mass": np.array([10.0, 30.0]), "stroke_width": np.array([2.0, np.nan])}
    values_b = {"mid_level": np.array([0.75, 0.75]), "michelson_contrast": np.array([1 / 3, 1 / 3]),
                "ink_mass": np.array([20.0, 20.0]), "stroke_width": np.array([3.0, np.nan])}
    assert script.relative_changes(values_a, values_b) == {"ink_level": -0.333, "ink_total": 0.0, "stroke_width": 0.5}


def test_fault_ceiling_at_the_estimate_takes_each_training_noise_at_its_estimate_and_bonferronis_threshold():
    from fedgen_debug.analysis import calibration, calibration_store

    script = _load("fault_ceiling")
    shipped = calibration_store.named("gan-demo-t4")
    assert shipped.z_threshold > calibration.threshold_for(len(shipped.properties))   # raised to its clean pairs'
    estimate = script.at_estimate(shipped)
    assert estimate.z_threshold == calibration.threshold_for(len(shipped.properties))
    for name, noise in shipped.properties.items():
        assert estimate.properties[name].training_noise_upper == noise.training_noise <= noise.training_noise_upper
    assert sum(n.training_noise < n.training_noise_upper for n in shipped.properties.values()) > 20


def test_calibration_transfer_finds_a_noisier_sources_pairs_alarming_against_the_quieter_ones_noise(tmp_path, monkeypatch,
                                                                                                   capsys):
    """`evaluation/calibration_transfer.py` on hand-made runs of two sources (values cached as any_bug_table
    caches them, no GAN): run-to-run noise 0.02 on one, 0.3 on the other, in every image property."""
    from fedgen_debug.analysis import image_properties
    from fedgen_debug.runs import store

    monkeypatch.syspath_prepend(_EVALUATION)
    script = _load("calibration_transfer")
    table = sys.modules["any_bug_table"]
    rng = np.random.default_rng(0)
    names = [p.name for p in image_properties.IMAGE_PROPERTIES]

    def run(name, spec, run_noise, shift=0.0):
        run_dir = str(tmp_path / name)
        store.write_json(store.released(run_dir, "config.json"), {"gan": {"data": spec}})
        offsets = rng.normal(0.0, run_noise, len(names))
        offsets[0] += shift
        values = {n: rng.normal(offsets[i], 1.0, 400) for i, n in enumerate(names)}
        with open(os.path.join(run_dir, f"diagnose_values_400_{table._properties_version('gan')}.pkl"), "wb") as f:
            pickle.dump((values, None), f)
        return run_dir

    for i in range(8):
        run(f"quiet/r{i}", "synthetic-images:writers=9", 0.02)
        run(f"noisy/r{i}", "npz:/real.npz", 0.3)
    clean, fault = run("pair/clean", "npz:/real.npz", 0.3), run("pair/fault", "npz:/real.npz", 0.3, shift=5.0)
    out = str(tmp_path / "t.json")
    monkeypatch.setattr(sys, "argv", ["x", "--kind", "gan", "--samples", "400", "--source", str(tmp_path / "quiet/r*"),
                                      "--source", str(tmp_path / "noisy/r*"), "--pair", f"{clean}:{fault}", "--out", out])
    script.main()
    result = json.load(open(out))
    quiet, noisy = result["sources"]["synthetic-images:writers=9"], result["sources"]["npz:/real.npz"]
    assert (quiet["pairs"], noisy["pairs"]) == (28, 28)                    # pairs within a source only
    assert noisy["against_the_other_sources"]["alarms"] > 14                 # the quiet source's noise: most alarm
    assert quiet["against_the_other_sources"]["alarms"] == 0
    assert noisy["left_out_of_its_own_source"]["alarms"] <= 2
    (pair,) = result["pairs"]
    assert pair["own source"]["differ"] and pair["own source"]["top"][0][0] == names[0]
    assert "training noise τ by source" in capsys.readouterr().out


def test_sklearn_digits_take_mnist_layout_and_are_dealt_to_pseudo_users(tmp_path):
    script = _load("sklearn_digits_npz")
    eight = np.zeros((1, 8, 8))
    eight[0, 2:6, 3:5] = 16.0                                       # full ink in a 4×2 block
    image = script.mnist_layout(eight)[0]
    assert image.shape == (28, 28) and image.dtype == np.uint8
    assert image[:4].max() == 0 and image[24:].max() == 0 and image[:, :4].max() == 0   # the 4-pixel frame
    assert image[14, 14] == 255                                     # ink high, as MNIST (read background=black)
    out = tmp_path / "digits.npz"
    argv, sys.argv = sys.argv, ["sklearn_digits_npz", "--users", "7", "--out", str(out)]
    try:
        script.main()
    finally:
        sys.argv = argv
    client_data = npz.read_npz(str(out), background="black")
    assert len(client_data.client_ids) == 7


def test_pooled_references_shrink_the_pair_noise_by_the_references_count(monkeypatch):
    """`evaluation/pooled_references.py`: against k pooled references a difference carries σ²(1 + 1/k),
    not a pair's 2σ²; the class mix keeps its pair noise; reference sets never hold B."""
    from fedgen_debug.analysis import calibration as C

    monkeypatch.syspath_prepend(_EVALUATION)
    script = _load("pooled_references")
    noise = C.PropertyNoise(offset=0.0, training_noise=0.2, training_noise_upper=0.3, pairs=10)
    calibration = C.Calibration(name="x", kind="gan", preset="demo", pair_type="replicate", degrees_of_freedom=9,
                                z_threshold=3.1, source={}, properties={"edge_width": noise, "predicted_class": noise})
    scaled = script.noise_of_pooled(calibration, 3).properties
    assert scaled["edge_width"].training_noise_upper == pytest.approx(0.3 * (2 / 3) ** 0.5)
    assert script.noise_of_pooled(calibration, 1).properties["edge_width"].training_noise_upper == pytest.approx(0.3)
    assert scaled["predicted_class"] == noise
    for avoid in (None, 0, 7, 15):
        sets = script.reference_sets(16, 3, avoid)
        assert len(sets) == script.SETS_PER_RUN and all(len(set(s)) == 3 and avoid not in s for s in sets)


def test_any_bug_sharp_gans_take_the_generator_options_femnist_needs():
    script = _load("any_bug")
    plain = script.run_config("images", "word", "synthetic-images:writers=10,seed=0", "rotate:0.5", 3, None)
    sharp = script.run_config("images", "word", "synthetic-images:writers=10,seed=0", "rotate:0.5", 3, None, sharp=True)
    assert (plain.gen_ema, plain.gen_upsample, plain.cycle_client_data) == (0.0, "transpose", False)
    assert (sharp.gen_ema, sharp.gen_upsample, sharp.cycle_client_data) == (0.9, "bilinear", True)
    assert sharp.fault == plain.fault == "rotate:0.5" and sharp.seed == 3
    ema = script.run_config("images", "word", "synthetic-images:writers=10,seed=0", "rotate:0.5", 3, None, gen_ema=0.9)
    assert (ema.gen_ema, ema.gen_upsample, ema.cycle_client_data) == (0.9, "transpose", False)
    # `--primary`: every run reads the modeler's model (T4 pairs chosen by it); without it, the stand-in CNN.
    own = script.run_config("images", "word", "synthetic-images:writers=10,seed=0", None, 3, 150, "by-user-accuracy:low",
                            sharp=True, primary="users.keras")
    assert (own.primary, own.select, own.rounds, plain.primary) == ("users.keras", "by-user-accuracy:low", 150, None)
    # `--select t4|t2`: the paper's pairs, A the side a shipped selection calibration takes as A.
    from fedgen_debug.analysis import calibration_store

    shipped = {tuple(c.source["selections"]) for c in calibration_store.shipped() if c.pair_type == "selection"}
    assert {script.SELECTION_PAIRS["t4"], script.SELECTION_PAIRS["t2"]} == shipped and script.SELECTION_PAIRS["random"] is None


def _calibration_file(path, noises: dict, dof: int) -> str:
    path.write_text(json.dumps({"degrees_of_freedom": dof,
                                "properties": {n: {"training_noise": t} for n, t in noises.items()}}))
    return str(path)


def test_training_noise_sources_compares_each_property_with_an_f_interval(tmp_path):
    """τ ratios of hand-built calibrations: exact ratios, an interval from the F distribution that holds the
    ratio, and only intervals wholly below (above) 1 counted as lower (higher); an unmeasured τ is left out."""
    script = _load("training_noise_sources")
    base = _calibration_file(tmp_path / "base.json", {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.0}, 13)
    other = _calibration_file(tmp_path / "other.json", {"a": 0.02, "b": 0.2, "c": 0.9, "d": 0.1}, 5)
    result = script.compare(script.load(base), script.load(other))
    rows = result["properties"]
    assert sorted(rows) == ["a", "b", "c"]
    assert [round(rows[n]["ratio"], 6) for n in "abc"] == [0.2, 1.0, 3.0]
    for row in rows.values():
        assert row["low"] < row["ratio"] < row["high"]
    # R / ρ ~ F(5, 13) for the variances: ratio 1's interval is 1/√F at its 97.5% and 2.5% points (tables:
    # F.975(5, 13) = 3.77; F.025(5, 13) = 1 / F.975(13, 5) = 1 / 6.49).
    assert rows["b"]["low"] == pytest.approx(1 / np.sqrt(3.77), rel=2e-3)
    assert rows["b"]["high"] == pytest.approx(np.sqrt(6.49), rel=2e-3)
    assert result["lower_beyond_interval"] == ["a"] and result["higher_beyond_interval"] == ["c"]
    assert result["geometric_mean_ratio"] == pytest.approx((0.2 * 1.0 * 3.0) ** (1 / 3))
    out = tmp_path / "ratios.json"
    assert script.main(["--baseline", f"base={base}", f"other={other}", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["settings"]["other"]["lower_beyond_interval"] == ["a"]


def test_keras_primary_trains_a_model_train_gan_takes_holding_out_a_fifth_of_the_writers(tmp_path, monkeypatch, capsys):
    from fedgen_debug.models import primary

    script = _load("keras_primary")
    writers = np.repeat(np.arange(10), 4)
    mask = script.held_out(writers, seed=0)
    assert mask.sum() == 8 and len(np.unique(writers[mask])) == 2
    rng = np.random.default_rng(0)
    path = tmp_path / "tiny.npz"
    np.savez(path, pixels=rng.integers(0, 256, (40, 28, 28)).astype(np.uint8), labels=rng.integers(0, 3, 40),
             client_ids=np.array([f"w{w}" for w in writers]))
    out = tmp_path / "users.keras"
    monkeypatch.setattr(sys, "argv", ["keras_primary.py", str(path), "--out", str(out), "--epochs", "1", "--classes", "3"])
    script.main()
    assert "held-out writers' accuracy" in capsys.readouterr().out
    np.testing.assert_array_equal(script.writers_of(np.load(path)), writers)
    model = primary.load_model_file(str(out), primary.PrimaryContract())   # what train-gan --primary does with it
    assert tuple(model(np.ones((2, 28, 28), np.float32)).shape) == (2, 3)


def test_t2_batch_folds_reads_each_seeds_two_runs_of_a_batch(tmp_path, monkeypatch):
    """`evaluation/t2_batch_folds.py`: seed S trains run 2S (correct) and 2S + 1 (misclassified); a batch's pure
    pairs are those two, a run whose partner is missing (a stopped seed) pairs with nobody, and a fault's runs
    are no clean runs."""
    monkeypatch.syspath_prepend(_EVALUATION)
    script = _load("t2_batch_folds")
    for name in ("images-clean-seed60-correct", "images-clean-seed61-misclassified", "images-clean-seed62-correct",
                 "images-clean-seed65-misclassified", "images-rotate-0.5-seed84-correct", "summary.json"):
        (tmp_path / name).mkdir()
    correct, misclassified = script.batch_runs(str(tmp_path / "*"))
    assert {s: os.path.basename(d) for s, d in correct.items()} == {30: "images-clean-seed60-correct",
                                                                     31: "images-clean-seed62-correct"}
    assert {s: os.path.basename(d) for s, d in misclassified.items()} == {30: "images-clean-seed61-misclassified",
                                                                          32: "images-clean-seed65-misclassified"}


def test_t2_pure_pairs_pairs_each_seeds_finished_runs_only(tmp_path, monkeypatch):
    """`evaluation/t2_pure_pairs.py`: run 2S against run 2S + 1, both finished; a seed still training is no pair."""
    from fedgen_debug.runs import store

    monkeypatch.syspath_prepend(_EVALUATION)
    script = _load("t2_pure_pairs")
    for name, state in (("images-clean-seed200-correct", "finished"), ("images-clean-seed201-misclassified", "finished"),
                        ("images-clean-seed202-correct", "finished"), ("images-clean-seed203-misclassified", "running")):
        store.write_json(store.released(str(tmp_path / name), store.STATUS), {"state": state})
    assert [tuple(os.path.basename(r) for r in pair) for pair in script.pure_pairs(str(tmp_path / "*"))] == [
        ("images-clean-seed200-correct", "images-clean-seed201-misclassified")]
