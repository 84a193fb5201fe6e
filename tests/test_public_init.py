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
