"""Public pretraining of an LM auxiliary (`experiments.public_init`, `train-lm --init public:SPEC`)."""

import json
import os

import numpy as np
import pytest

from conftest import provision_secret, run_cli
from fedgen_debug.device import lm_data
from fedgen_debug.experiments.lm import train_lm
from fedgen_debug.privacy.ledger import Ledger
from fedgen_debug.runs import store
from fedgen_debug.experiments import public_init
from fedgen_debug.training.lm_run import LMRun, model_spec

DATA = "synthetic-text:users=20,seed=61"
PUBLIC = "public:synthetic-text:users=30,seed=1061"


@pytest.mark.parametrize("init, message", [("file:x.txt", "init must be 'public:DATA_SPEC'"),
                                           ("public:synthetic-images:writers=3", "an LM pretrains on text"),
                                           ("public:synthetic-text:users=5,seed=61", "holds users of the private")])
def test_a_bad_init_is_refused_with_what_to_give(init, message):
    with pytest.raises(ValueError, match=message):
        LMRun("word", DATA, preset="test", init=init)


def test_a_run_without_init_saves_the_config_it_saved_before():
    assert "init" not in LMRun("word", DATA, preset="test").to_json()
    assert LMRun("word", DATA, preset="test", init=PUBLIC).to_json()["init"] == PUBLIC


def _vocab_and_spec(run):
    vocab = lm_data.public_vocabulary(run.vocab, run.vocab_size)
    return vocab, model_spec(run, vocab.num_ids)


def test_pretraining_is_seeded_and_fits_the_public_text_better_than_a_fresh_model():
    run = LMRun("word", DATA, preset="test", vocab_size=300, init=PUBLIC)
    vocab, spec = _vocab_and_spec(run)
    first, again = (public_init.pretrained_weights(run, spec, vocab, seed=3) for _ in range(2))
    for a, b in zip(first.trainable, again.trainable):
        np.testing.assert_array_equal(a, b)
    x, y = public_init.pretraining_examples(run, vocab)
    loss = spec.loss_fn()

    def public_loss(weights) -> float:
        model = spec.keras_model_fn()
        model.build((None, run.max_length))
        if weights is not None:
            weights.assign_weights_to(model)
        return float(loss(y, model(x)))

    assert public_loss(first) < public_loss(None) - 0.5


def test_a_run_with_init_starts_from_the_pretrained_model_and_charges_the_same_releases(tmp_path, monkeypatch):
    """Without noise and with a client learning rate of 1e-9 nothing moves the model: a one-round run's
    released weights are its starting point, which with --init is the pretrained model."""
    import dataclasses

    from fedgen_debug.training import presets
    from fedgen_debug.training.config import ClientConfig

    original = presets.LM_PRESETS["test", "word"]
    monkeypatch.setitem(presets.LM_PRESETS, ("test", "word"), dataclasses.replace(
        original, training=dataclasses.replace(original.training, client=ClientConfig(1, 16, 1e-9))))
    runs = {}
    for name, init in (("fresh", None), ("pretrained", PUBLIC)):
        run_dir = str(tmp_path / name)
        provision_secret(run_dir, f"test_public_init/{name}")
        train_lm(LMRun("word", DATA, preset="test", vocab_size=300, rounds=1, noise_multiplier=0.0, init=init), run_dir)
        runs[name] = run_dir
    released = {n: store.load_arrays(store.released(d, store.MODEL_WEIGHTS)) for n, d in runs.items()}
    run = LMRun("word", DATA, preset="test", vocab_size=300, init=PUBLIC)
    vocab, spec = _vocab_and_spec(run)
    pretrained = public_init.pretrained_weights(run, spec, vocab, seed=0)
    for got, expected in zip(released["pretrained"], pretrained.trainable):
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert not np.allclose(released["fresh"][0], released["pretrained"][0])
    assert json.load(open(store.released(runs["pretrained"], store.CONFIG)))["lm"]["init"] == PUBLIC
    labels = {n: sorted(r.label for r in Ledger().records() if r.source == os.path.realpath(d)) for n, d in runs.items()}
    assert labels["fresh"] == labels["pretrained"] == ["DP aggregate oov_rate", "word-LM"]


def test_the_cli_refuses_a_bad_init_in_one_line(tmp_path):
    result = run_cli("train-lm", "--kind", "word", "--data", DATA, "--preset", "test", "--init", "synthetic-text",
                     "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "init must be 'public:DATA_SPEC'" in result.stderr
    assert not (tmp_path / "x").exists()


# ---- the GAN (`train-gan --init`) ------------------------------------------------------------------------
GAN_DATA = "synthetic-images:writers=8,seed=61"
GAN_PUBLIC = "public:synthetic-images:writers=10,seed=1061"


@pytest.mark.parametrize("init, message", [("synthetic-images:writers=3", "init must be 'public:DATA_SPEC'"),
                                           ("public:synthetic-text:users=5", "a GAN pretrains on images"),
                                           ("public:synthetic-images:writers=4,seed=61", "holds users of the private")])
def test_a_bad_gan_init_is_refused_with_what_to_give(init, message):
    from fedgen_debug.training.gan_run import GANRun

    with pytest.raises(ValueError, match=message):
        GANRun(GAN_DATA, "random", preset="test", init=init)
    assert "init" not in GANRun(GAN_DATA, "random", preset="test").to_json()


def test_gan_pretraining_is_seeded_and_draws_glyphs_on_paper_where_a_fresh_generator_draws_nothing(monkeypatch):
    """Demo networks, 400 central WGAN-GP steps on 10 public writers: the fresh generator's samples are all
    blank (ink on under 1% of pixels), the pretrained one's have a white background and ink. Seeded: two
    pretrainings of 20 steps (the batches, noise and initial networks all come from the seed; an unseeded
    draw differs from the first step on) are bit for bit the same; one of 400 steps is what draws glyphs."""
    from fedgen_debug.analysis import gan_analysis
    from fedgen_debug.models.gan import build_generator
    from fedgen_debug.training import presets

    config = presets.gan_model_config("demo")
    with monkeypatch.context() as short:
        short.setattr(public_init, "GAN_STEPS", 20)
        first, again = (public_init.pretrained_gan_weights(GAN_PUBLIC, config, seed=3) for _ in range(2))
    for a, b in zip(first["generator"].trainable + first["discriminator"],
                    again["generator"].trainable + again["discriminator"]):
        np.testing.assert_array_equal(a, b)
    assert public_init.GAN_STEPS == 400
    first = public_init.pretrained_gan_weights(GAN_PUBLIC, config, seed=3)
    generator = build_generator(config, 3)
    noise = np.random.default_rng(0).standard_normal((200, config.noise_dim)).astype(np.float32)
    fresh = generator(noise, training=False).numpy()
    first["generator"].assign_weights_to(generator)
    pretrained = generator(noise, training=False).numpy()
    assert gan_analysis.blank_samples(fresh)["share"] == 1.0
    assert gan_analysis.blank_samples(pretrained)["share"] < 0.1
    assert np.median(gan_analysis.background_intensity(pretrained)) > 0.75


def test_a_gan_run_with_init_starts_from_the_pretrained_networks_and_charges_the_same_releases(tmp_path, monkeypatch):
    """The process's state after `set_model_weights` holds the pretrained G (and its moving average) and D
    bit for bit; a run with --init names it in its config and charges what a fresh run charges. What the
    pretraining draws is the test above's: here 10 steps (not 400) move G and D off their seeded initial
    networks, which are the process's own, so a `set_model_weights` that kept those would fail."""
    from fedgen_debug.experiments.gan import train_gan
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.training import dp_fedavg_gan, presets
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.models.gan import build_discriminator, build_generator

    monkeypatch.setattr(public_init, "GAN_STEPS", 10)   # read at each call: train_gan's pretraining too
    config = presets.gan_model_config("test")
    weights = public_init.pretrained_gan_weights(GAN_PUBLIC, config, seed=0)
    training = dataclasses_replace_gen_ema(presets.gan_training_config("test", 0))
    process = dp_fedavg_gan.build_gan_process(lambda: build_generator(config, 0), lambda: build_discriminator(config, 0),
                                              training, RunSecret(7), backend="tf")
    initial = process.initialize()
    assert not np.array_equal(process.get_model_weights(initial).trainable[0], weights["generator"].trainable[0])
    state = process.set_model_weights(initial, weights)
    for got, expected in zip(process.get_model_weights(state).trainable, weights["generator"].trainable):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip(state["server"]["generator"]["non_trainable"], weights["generator"].non_trainable):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip(process.get_discriminator_weights(state), weights["discriminator"]):
        np.testing.assert_array_equal(got, expected)
    assert int(state["server"]["round"]) == 0

    runs = {}
    for name, init in (("fresh", None), ("pretrained", GAN_PUBLIC)):
        run_dir = str(tmp_path / name)
        provision_secret(run_dir, f"test_public_init/gan-{name}")
        train_gan(GANRun(GAN_DATA, "random", preset="test", rounds=1, primary_classes=10, init=init), run_dir)
        runs[name] = run_dir
    assert json.load(open(store.released(runs["pretrained"], store.CONFIG)))["gan"]["init"] == GAN_PUBLIC
    assert "init" not in json.load(open(store.released(runs["fresh"], store.CONFIG)))["gan"]
    released = {n: store.load_arrays(store.released(d, store.MODEL_WEIGHTS)) for n, d in runs.items()}
    assert not np.allclose(released["fresh"][0], released["pretrained"][0])
    labels = {n: sorted(r.label for r in Ledger().records() if r.source == os.path.realpath(d)) for n, d in runs.items()}
    assert labels["fresh"] == labels["pretrained"] and labels["fresh"]


def dataclasses_replace_gen_ema(config):
    """The config with a moving average of G, so that `set_model_weights` must start it at the pretrained G."""
    import dataclasses

    return dataclasses.replace(config, gen_ema=0.9)
