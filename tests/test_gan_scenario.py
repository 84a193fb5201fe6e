"""The GAN scenario end to end at test size: on-device selection (strict), DP-FedAvg-GAN training into
a run store, the privacy records, analyze-gan's grids/report, and the CLI's errors. The verdict's
statistics are tested on hand-built images in test_gan_analysis.py; its demo-size behaviour is
measured by evaluation/gan_pixel_inversion.py."""

import csv
import dataclasses
import json
import os

import numpy as np
import pytest

from conftest import provision_secret, run_cli, run_main
from fedgen_debug.runs import store
from fedgen_debug.analysis import gan_analysis as ga
from fedgen_debug.training.gan_run import GANRun, generate, load_generator
from fedgen_debug.experiments.gan import train_gan, with_thresholds
from fedgen_debug.selectors.registry import parse_selector
from fedgen_debug.analysis.gan_report import analyze_gan

DATA = "synthetic-images:writers=12,seed=3"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gan-runs")
    with pytest.MonkeyPatch.context() as patch:  # a ledger of this module's own: the totals below are exact
        from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger

        patch.setenv(LEDGER_ENV, str(root / "ledger"))
        Ledger(str(root / "ledger")).set_budget("*", float("inf"))
        yield _train(root)


def _train(root):
    low = str(root / "low")
    train_gan(GANRun(DATA, "by-user-accuracy:low", 0.5, "test", rounds=2, primary_classes=10), low)
    primary = store.released(low, store.PRIMARY)
    high = str(root / "high")
    train_gan(GANRun(DATA, "by-user-accuracy:high,threshold=0.0", 0.5, "test", rounds=2, primary=primary), high)
    return root, low, high


def test_training_writes_a_resumable_run_with_dp_counts_and_privacy_records(runs):
    root, low, high = runs
    for run_dir in (low, high):
        assert json.load(open(store.released(run_dir, store.STATUS)))["state"] == "finished"
        population = json.load(open(store.released(run_dir, store.POPULATION)))
        assert population["users_total"] == 12 and population["dp"] is True
        assert population["users_stddev"] > 0 and population["images_stddev"] > 0
    # The DP quantile threshold (no threshold given) is a release of its own; the modeler's threshold is not.
    low_privacy = json.load(open(store.released(low, store.PRIVACY)))
    high_privacy = json.load(open(store.released(high, store.PRIVACY)))
    assert sorted(r["label"] for r in low_privacy["releases"].values()) == [
        "DP aggregate labels-present", "DP aggregate selected", "GAN by-user-accuracy:low",
        "T4 threshold: DP quantile 0.25"]
    assert sorted(r["label"] for r in high_privacy["releases"].values()) == [
        "DP aggregate selected", "GAN by-user-accuracy:high,threshold=0.0"]
    assert json.load(open(store.released(low, store.THRESHOLD))).keys() == {"0.25"}
    assert not os.path.exists(store.released(high, store.THRESHOLD))
    # The DP threshold is checked against chance (tests/test_primary_fit.py); K from a DP count of the
    # labels present, whose noise (σ = 4·√10/2 ≈ 6.3) needs 6σ ≈ 38 devices to see a class all hold: 12
    # writers are too few, so K is the model's 10 outputs, said so. The modeler's threshold is not checked.
    fit = json.load(open(store.released(low, store.PRIMARY_FIT)))
    assert fit["thresholds"].keys() == {"0.25"} and fit["labels_present"]["dp"] is True
    assert len(fit["labels_present"]["values"]) == 10 and fit["labels_present"]["stddev"][0] == pytest.approx(4 * 10 ** 0.5 / 2)
    assert fit["classes"] == 10 and fit["classes_source"].startswith("the primary model's outputs")
    assert not os.path.exists(store.released(high, store.PRIMARY_FIT))
    # Every release is over the same population, all 12 users: the ledger composes them.
    from fedgen_debug.privacy.ledger import population_key

    assert low_privacy["population"] == high_privacy["population"] == population_key("synthetic-images:writers=12,seed=3")
    assert all(r["population_size"] == 12 for r in list(low_privacy["releases"].values())
               + list(high_privacy["releases"].values()))
    assert high_privacy["population_total"]["releases"] == 6


def test_t4_thresholds_are_filled_inside_combined_selectors_only_where_missing():
    asked = []

    def estimate(part):
        asked.append(part.direction)
        return 0.25

    combined = with_thresholds(parse_selector("by-user-accuracy:low&by-example:misclassified"), estimate)
    assert combined.parts[0].threshold == 0.25 and combined.parts[1] == parse_selector("by-example:misclassified")
    either = with_thresholds(parse_selector("by-user-accuracy:high,threshold=0.9|by-user-accuracy:low"), estimate)
    assert [p.threshold for p in either.parts] == [0.9, 0.25] and type(either).__name__ == "AnyOf"
    assert with_thresholds(parse_selector("by-example:correct"), estimate) == parse_selector("by-example:correct")
    assert asked == ["low", "low"]


def test_a_sharper_t4_cut_is_a_dp_quantile_of_its_own():
    from fedgen_debug.experiments.gan import _quantile_targets, target_quantile

    assert _quantile_targets(parse_selector("by-user-accuracy:low")) == [0.25]
    assert _quantile_targets(parse_selector("by-user-accuracy:low,quantile=0.05&by-example:misclassified")) == [0.05]
    assert _quantile_targets(parse_selector("by-user-accuracy:low,quantile=0.05|by-user-accuracy:high")) == [0.05, 0.75]
    thresholds = {0.05: 0.31, 0.75: 0.9}
    filled = with_thresholds(parse_selector("by-user-accuracy:low,quantile=0.05&by-example:misclassified"),
                             lambda part: thresholds[target_quantile(part)])
    assert filled.parts[0].threshold == 0.31


def test_generator_reloads_and_sampling_is_seeded(runs):
    _, low, _ = runs
    generator, run = load_generator(low)
    assert run.select == "by-user-accuracy:low" and run.bug_fraction == 0.5
    a, b = generate(generator, 7, seed=1), generate(generator, 7, seed=1)
    assert a.shape == (7, 28, 28, 1) and np.array_equal(a, b)
    assert a.min() >= -1.0 and a.max() <= 1.0
    assert not np.array_equal(a, generate(generator, 7, seed=2))


def test_training_snapshots_the_generator_every_eval_round_and_the_last_is_the_released_one(runs):
    """The app's round slider: one snapshot per round at the test preset (eval_every 1), each drawn from
    the same public noise, the last one exactly the released generator's; their statistics in eval.csv."""
    from fedgen_debug.training import gan_snapshots

    _, low, _ = runs
    directory = store.released(low, store.SAMPLE_SNAPSHOTS)
    assert sorted(os.listdir(directory)) == ["round_000001.npz", "round_000002.npz"]
    (last,) = store.load_arrays(os.path.join(directory, "round_000002.npz"))
    generator, run = load_generator(low)
    noise = gan_snapshots.snapshot_noise(run.seed, generator.input_shape[-1])
    assert last.dtype == np.uint8 and last.shape == (gan_snapshots.SNAPSHOT_SAMPLES, 28, 28)
    drawn = generator(noise, training=False).numpy()
    assert np.array_equal(last, gan_snapshots.to_uint8(drawn))
    (first,) = store.load_arrays(os.path.join(directory, "round_000001.npz"))
    assert not np.array_equal(first, last)  # training moved the generator between the snapshots
    rows = list(csv.DictReader(open(store.released(low, store.EVAL))))
    assert [r["round"] for r in rows] == ["1", "2"]
    frame = np.ones((28, 28), bool)
    frame[3:-3, 3:-3] = False  # the background: the median of the outer 3-pixel frame
    background = np.median((drawn[..., 0][:, frame] + 1.0) / 2.0, axis=1)
    assert float(rows[1]["dark_background_share"]) == pytest.approx(np.mean(background < 0.5))


def test_analyze_gan_writes_grids_and_a_verdict_with_its_evidence(runs):
    _, low, high = runs
    report = analyze_gan(low, high, samples=50)
    # Test-size GANs draw what they draw; the verdict must be its rule applied to the evidence it reports.
    evidence = report["evidence"]
    assert report["pixel_inversion_suspected"] is (evidence["z"] > evidence["z_threshold"]
                                                   or evidence["training_path"]["suspected"])
    assert report["evidence"]["test"] == "dark-background share vs the reference GAN's"
    assert report["current"]["dark_background"]["samples"] == 50
    assert np.isfinite(report["current"]["quality"]["frechet_distance"])
    for run_dir in (low, high):
        assert os.path.getsize(store.released(run_dir, store.SAMPLES_PNG)) > 500
    assert json.load(open(store.released(low, store.ANALYSIS)))["evidence"]["z"] == report["evidence"]["z"]
    assert report["current"]["privacy"]["run"]["epsilon"] > 0
    # The same test along training: on the snapshots both runs released, each read back from the store.
    path = report["evidence"]["training_path"]
    assert path["rounds"] == len(set(store.snapshot_rounds(low)) & set(store.snapshot_rounds(high))) > 0
    for test in path["tests"]:
        assert test["dark_share"] == ga.dark_background(store.load_snapshot(low, test["round"]) / 127.5 - 1.0)["share"]
    result = run_cli("analyze-gan", low, "--compare", high, "--samples", "40", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["current"]["dark_background"]["samples"] == 40


def test_d_step_scale_is_qn_over_the_dp_estimate_of_qualifying_clients_with_a_floor():
    from fedgen_debug.experiments.gan import d_step_scale

    # 52 of 1,000 users qualified (DP count, σ 2.83): qN / (qN · 52/1,000) = 1,000/52, whatever qN.
    assert d_step_scale(52.0, 2.83, 1000, 300) == pytest.approx(1000 / 52)
    assert d_step_scale(52.0, 2.83, 1000, 50) == pytest.approx(1000 / 52)
    # A count within 3σ of zero is not trusted below 3σ; and k̂ is at least one client (scale ≤ qN).
    assert d_step_scale(2.0, 2.83, 1000, 300) == pytest.approx(1000 / 8.49)
    assert d_step_scale(-4.0, 0.1, 1000, 300) == pytest.approx(300)
    assert d_step_scale(1000.0, 2.83, 1000, 300) == 1.0


def test_the_selected_d_step_stops_where_a_rounds_noise_would_move_d_by_more_than_the_cap(tmp_path):
    """qN / k̂ multiplies the noise on D's step too: one round's noise moves D by s·lr·zS√d/qN in L2.
    Real FEMNIST's 1st-percentile cut (k̂ ≈ 4.3 of qN = 92, S = 0.5, z = 0.3, d = 14,777) wants s ≈ 21,
    4.2 of noise a round; the cap stops it at 1.0 (s ≈ 5), where a cut of many writers is untouched."""
    from fedgen_debug.experiments import gan as gan_scenario
    from fedgen_debug.training.presets import gan_training_config
    from fedgen_debug.training.config import DPConfig

    preset = gan_training_config("demo")
    config = dataclasses.replace(preset, training=dataclasses.replace(preset.training, dp=DPConfig(92, 0.3, 0.5)))
    noise_step = gan_scenario.d_noise_step(config, 14777)
    assert noise_step == pytest.approx(0.3 * 0.5 * np.sqrt(14777) / 92)    # ≈ 0.198
    os.makedirs(os.path.dirname(store.released(str(tmp_path), store.POPULATION)), exist_ok=True)
    released = {}
    for users, wanted in ((8.66, 184 / 8.66), (60.0, 184 / 60.0)):
        store.write_json(store.released(str(tmp_path), store.POPULATION), {"users": users, "users_stddev": 2.83})
        scaled = gan_scenario._with_selected_d_step(config, 184, str(tmp_path), 14777)
        released[users] = json.load(open(store.released(str(tmp_path), store.D_STEP)))
        assert released[users]["count_scale"] == pytest.approx(wanted)
        assert scaled.training.server.learning_rate == pytest.approx(released[users]["scale"])
    assert released[8.66]["scale"] == pytest.approx(1.0 / noise_step)          # capped: ≈ 5.05, not 21.2
    assert released[8.66]["noise_step"] == pytest.approx(gan_scenario.MAX_D_NOISE_STEP)
    assert released[60.0]["scale"] == pytest.approx(184 / 60.0)                 # 3.07: under the cap
    # Without noise nothing caps the step.
    quiet = dataclasses.replace(config, training=dataclasses.replace(config.training, dp=DPConfig(92, 0.0, 0.5)))
    store.write_json(store.released(str(tmp_path), store.POPULATION), {"users": 8.66, "users_stddev": 2.83})
    assert gan_scenario._with_selected_d_step(quiet, 184, str(tmp_path), 14777).training.server.learning_rate == \
        pytest.approx(184 / 8.66)


def test_selected_d_step_scales_the_first_discriminator_step_by_its_released_factor(tmp_path, runs, monkeypatch):
    from conftest import provision_secret
    from fedgen_debug.models.gan import build_discriminator, build_generator
    from fedgen_debug.training.presets import gan_model_config
    from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
    from fedgen_debug.runs import secret as secret_lib
    from fedgen_debug.training import dp_fedavg_gan, run_dir as rd

    _, low, _ = runs
    primary = store.released(low, store.PRIMARY)
    # z = 0, every user sampled and one secret: both runs' client updates and DP counts are the same, so
    # the only difference in round 1 is D's server step (SGD, lr 1 × scale).
    updates = {}
    for d_step in ("fixed", "selected"):
        run_dir, ledger = str(tmp_path / d_step), str(tmp_path / f"ledger-{d_step}")  # one secret, two ledgers
        monkeypatch.setenv(LEDGER_ENV, ledger)
        Ledger(ledger).set_budget("*", float("inf"))
        provision_secret(run_dir, "gan-d-step")
        run = GANRun(DATA, "by-user-accuracy:low,threshold=0.5", 0.5, "test", rounds=1, primary=primary,
                     noise_multiplier=0.0, clients_per_round=12, d_step=d_step)
        train_gan(run, run_dir)
        assert train_gan(run, run_dir).rounds_completed == 1   # resumes: the run's config is the preset's
        config = run.training_config(12)
        process = dp_fedavg_gan.build_gan_process(lambda: build_generator(gan_model_config("test"), 0),
                                                  lambda: build_discriminator(gan_model_config("test"), 0), config,
                                                  secret_lib.load(run_dir))
        initial = process.initialize()
        final = rd.load_checkpoint(rd.latest_checkpoint(run_dir)[1], initial)
        updates[d_step] = [np.asarray(b) - np.asarray(a) for a, b in zip(process.get_discriminator_weights(initial),
                                                                          process.get_discriminator_weights(final))]
    population = json.load(open(store.released(str(tmp_path / "selected"), store.POPULATION)))
    released = json.load(open(store.released(str(tmp_path / "selected"), store.D_STEP)))
    scale = 12 / max(population["users"], 3 * population["users_stddev"], 1.0)
    assert released["scale"] == pytest.approx(scale) and released["dp"] is True and scale > 1.2
    assert not os.path.exists(store.released(str(tmp_path / "fixed"), store.D_STEP))
    assert sum(float(np.abs(u).sum()) for u in updates["fixed"]) > 0
    for fixed, selected in zip(updates["fixed"], updates["selected"]):
        np.testing.assert_allclose(selected, scale * fixed, rtol=1e-4, atol=1e-7)
    # analyze-gan reports the step with the run (the modeler reads why a small population trained).
    from fedgen_debug.cli.gan_cmd import format_report

    report = analyze_gan(str(tmp_path / "selected"), str(tmp_path / "fixed"), samples=20)
    assert report["current"]["d_step"]["scale"] == pytest.approx(scale)
    assert report["compare"]["d_step"] == {"d_step": "fixed", "scale": 1.0}
    assert sum(f"× {scale:.3g}" in line for line in format_report(report)) == 1


def test_an_adaptive_clip_steps_by_the_released_count_and_releases_its_clip_each_round(tmp_path, runs, monkeypatch):
    """Under strict selection most sampled devices send nothing, so the clip's step is scaled by the same
    qN/k̂ as a selected D step (from the released DP count); the run's saved config keeps the preset's
    step, and metrics.csv holds the clip each round used next (a function of the noised counts)."""
    from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
    from fedgen_debug.experiments import gan as gan_scenario

    _, low, _ = runs
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger"))
    Ledger(str(tmp_path / "ledger")).set_budget("*", float("inf"))
    built = []
    original = gan_scenario.dp_fedavg_gan.build_gan_process

    def build_gan_process(gen_fn, disc_fn, config, secret, **kwargs):
        built.append(config.training.dp)
        return original(gen_fn, disc_fn, config, secret, **kwargs)
    monkeypatch.setattr(gan_scenario.dp_fedavg_gan, "build_gan_process", build_gan_process)
    run_dir = str(tmp_path / "adaptive")
    # Pinned: about 10 of the 12 writers qualify, so under a fresh secret the noised count (sd 2.8) reached 12 in
    # 2 of 6 draws and left the step unscaled (scale 1), which this test cannot tell from no scaling at all.
    provision_secret(run_dir, "test_gan_scenario/adaptive-clip")
    train_gan(GANRun(DATA, "by-user-accuracy:low,threshold=0.5", 0.5, "test", rounds=3, primary=store.released(
        low, store.PRIMARY), clip_quantile=0.5, clients_per_round=4), run_dir)
    population = json.load(open(store.released(run_dir, store.POPULATION)))
    scale = 12 / max(population["users"], 3 * population["users_stddev"], 12 / 4)
    assert built and built[0].clip_learning_rate == pytest.approx(0.2 * scale) and scale > 1
    saved = json.load(open(store.released(run_dir, store.CONFIG)))["training"]["dp"]
    assert (saved["clip"], saved["clip_quantile"], saved["clip_learning_rate"]) == (0.1, 0.5, 0.2)
    rows = list(csv.DictReader(open(store.released(run_dir, store.METRICS))))
    clips = [float(r["dp_clip"]) for r in rows]
    assert len(clips) == 3 and all(c > 0 for c in clips) and clips[0] != pytest.approx(0.1)


def test_a_device_shuffles_its_images_afresh_each_round(tmp_path, runs, monkeypatch):
    """A device holding more than n·B images uses other ones next round (it used to take the same
    first n batches every round); the same device and round give the same order (seeded)."""
    from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
    from fedgen_debug.experiments import gan as gan_scenario

    _, low, _ = runs
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger"))
    Ledger(str(tmp_path / "ledger")).set_budget("*", float("inf"))
    captured = {}

    def capture(build, population, client_examples, *args, **kwargs):
        captured.update(ids=population.client_ids, examples=client_examples)
        raise InterruptedError   # the device's view is all this test wants
    monkeypatch.setattr(gan_scenario.loop, "train", capture)
    with pytest.raises(InterruptedError):   # every writer's accuracy is below 1: all select all their images
        train_gan(GANRun(DATA, "by-user-accuracy:low,threshold=1.0", 0.0, "test", rounds=1,
                         primary=store.released(low, store.PRIMARY)), str(tmp_path / "run"))
    cid = captured["ids"][0]
    first, again, second = (captured["examples"](cid, r) for r in (0, 0, 1))
    assert len(first) > 2 * 8   # more than the test preset's n·B = 2 × 8
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[:16], second[:16])
    np.testing.assert_array_equal(np.sort(first.reshape(len(first), -1), axis=0),
                                  np.sort(second.reshape(len(second), -1), axis=0))


def test_selected_d_step_is_for_strict_selection_only():
    with pytest.raises(ValueError, match="d_step must be one of"):
        GANRun(DATA, "by-user-accuracy:low", d_step="adaptive")
    with pytest.raises(ValueError, match="every sampled user qualifies already"):
        GANRun(DATA, "by-user-accuracy:low", d_step="selected", selection="paper")
    assert "d_step" not in GANRun(DATA, "by-user-accuracy:low").to_json()   # older runs resume unchanged


def test_cycling_client_data_is_opt_in_and_reaches_the_training_config():
    plain, cycling = GANRun(DATA, "by-user-accuracy:low"), GANRun(DATA, "by-user-accuracy:low", cycle_client_data=True)
    assert not plain.training_config(100).cycle_client_data and cycling.training_config(100).cycle_client_data
    assert "cycle_client_data" not in plain.to_json()   # older runs resume unchanged
    assert cycling.to_json()["cycle_client_data"] is True


def test_the_generator_average_is_opt_in_and_reaches_the_training_config():
    plain, averaged = GANRun(DATA, "by-user-accuracy:low"), GANRun(DATA, "by-user-accuracy:low", gen_ema=0.9)
    assert plain.training_config(100).gen_ema == 0.0 and averaged.training_config(100).gen_ema == 0.9
    assert "gen_ema" not in plain.to_json() and averaged.to_json()["gen_ema"] == 0.9
    with pytest.raises(ValueError, match=r"gen_ema must be in \[0, 1\)"):
        GANRun(DATA, "by-user-accuracy:low", gen_ema=1.5)


def test_a_bilinear_generator_is_opt_in_trains_and_reloads_as_bilinear(tmp_path, monkeypatch, runs):
    from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger

    plain = GANRun(DATA, "by-user-accuracy:low")
    assert plain.model_config().gen_upsample == "transpose" and "gen_upsample" not in plain.to_json()
    with pytest.raises(ValueError, match="gen_upsample must be one of"):
        GANRun(DATA, "by-user-accuracy:low", gen_upsample="nearest")
    _, low, _ = runs
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger"))
    Ledger(str(tmp_path / "ledger")).set_budget("*", float("inf"))
    run_dir = str(tmp_path / "bilinear")
    train_gan(GANRun(DATA, "by-user-accuracy:low", 0.5, "test", rounds=1, primary=store.released(low, store.PRIMARY),
                     gen_upsample="bilinear"), run_dir)
    generator, run = load_generator(run_dir)
    assert run.gen_upsample == "bilinear"
    assert json.load(open(store.released(run_dir, store.CONFIG)))["gan"]["gen_upsample"] == "bilinear"
    layers = {type(layer).__name__ for layer in generator.layers}
    assert "Conv2DTranspose" not in layers and "UpSampling2D" in layers, layers
    assert generate(generator, 3, seed=0).shape == (3, 28, 28, 1)


@pytest.mark.parametrize("args, message", [
    (["--bug", "concat:0.1"], "--bug: concat is a bug of text data; for images use invert"),
    (["--bug", "invert:1.5"], "fraction"),
    (["--select", "by-user-accuracy:middle"], "is not one of low, high"),
    (["--data", "synthetic-text:users=5"], "needs image data"),
])
def test_train_gan_rejects_bad_input_with_one_line(tmp_path, args, message):
    base = {"--data": DATA, "--select": "random", "--preset": "test", "--out": str(tmp_path / "r")}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    done = run_main("train-gan", *[x for kv in base.items() for x in kv])
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_analyze_gan_refuses_an_unfinished_or_foreign_run(tmp_path, runs):
    _, low, _ = runs
    done = run_main("analyze-gan", str(tmp_path))
    assert done.returncode == 2 and "not a run directory" in done.stderr
    store.write_json(store.released(str(tmp_path), store.CONFIG), {"lm": {}})
    with pytest.raises(ValueError, match="not a GAN run"):
        load_generator(str(tmp_path))
    store.write_json(store.released(str(tmp_path), store.CONFIG), json.load(open(store.released(low, store.CONFIG))))
    # A run stopped after its config and charges, before its first round (a crash, a kill): no status yet.
    for command in (("analyze-gan", str(tmp_path)), ("diagnose", low, str(tmp_path))):
        done = run_main(*command)
        assert done.returncode == 2 and "training has not started; re-run train-gan" in done.stderr, done.stderr
    store.write_json(store.released(str(tmp_path), store.STATUS), {"state": "running", "rounds_completed": 1, "rounds": 2})
    with pytest.raises(ValueError, match=r"has not finished \(1/2 rounds\); re-run train-gan"):
        load_generator(str(tmp_path))
