"""The modeler's own vocabulary and primary model in a monitoring plan (monitor/inputs.py, issue 57): read
and checked before the ledger is touched, the vocabulary copied once into the monitor, and tiny monitors
that run end to end with each."""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from conftest import GAN_MONITOR_PLAN, MONITOR_PLAN, fedgen_cli, monitor as _monitor, run_main
from fedgen_debug.device import lm_data
from fedgen_debug.monitor import inputs, runner
from fedgen_debug.monitor.plan import plan_from_dict
from fedgen_debug.privacy.ledger import LEDGER_ENV
from fedgen_debug.runs import store


def _words_file(tmp_path, count=150) -> str:
    """A modeler's vocabulary: the most frequent words of other synthetic users (a public stand-in)."""
    words = lm_data.public_vocabulary(lm_data.default_vocabulary_source(MONITOR_PLAN["data"]), count).words
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(words) + "\n")
    return str(path)



def _keras_primary(tmp_path, input_shape=(28, 28)) -> str:
    """A model the tool did not train: the users' own, as a .keras file (softmax output, 10 classes)."""
    model = tf.keras.Sequential([tf.keras.Input(input_shape), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    path = tmp_path / f"users_model_{'x'.join(map(str, input_shape))}.keras"
    model.save(path)
    return str(path)


def test_a_word_lm_needs_a_fixed_vocabulary_and_a_gan_takes_none():
    word = {**MONITOR_PLAN, "auxiliaries": [{"kind": "word-lm", "preset": "test", "vocab": "dp"}]}
    with pytest.raises(ValueError, match='vocab = "file:PATH"'):
        plan_from_dict(word)
    plan = plan_from_dict({**word, "auxiliaries": [{"kind": "word-lm", "preset": "test", "vocab": "file:v.txt"}]})
    assert plan.vocab_source(plan.auxiliaries[0]) == "file:v.txt"
    with pytest.raises(ValueError, match="vocab is for LM auxiliaries"):
        plan_from_dict({**GAN_MONITOR_PLAN, "auxiliaries": [{"kind": "gan", "preset": "test", "vocab": "dp"}]})
    with pytest.raises(ValueError, match="vocabulary must be"):
        plan_from_dict({**word, "auxiliaries": [{"kind": "char-lm", "preset": "test", "vocab": "words.txt"}]})
    with pytest.raises(ValueError, match="primary_background must be one of"):
        plan_from_dict({**GAN_MONITOR_PLAN, "primary_background": "grey"})
    with pytest.raises(ValueError, match="no GAN auxiliary"):
        plan_from_dict({**MONITOR_PLAN, "primary": __file__})


@pytest.mark.parametrize("bad", ["missing vocabulary", "multi-word vocabulary", "missing model",
                                 "not a model", "wrong input shape"])
def test_a_bad_vocabulary_or_primary_is_refused_before_the_ledger_is_touched(tmp_path, monkeypatch, bad):
    if "vocabulary" in bad:
        path = tmp_path / "vocab.txt"
        if bad.startswith("multi-word"):
            path.write_text("the\ni have\n")
        plan = {**MONITOR_PLAN, "auxiliaries": [{"kind": "char-lm", "preset": "test", "vocab": f"file:{path}"}]}
        expected = "no such file" if bad.startswith("missing") else "one token, without spaces"
    else:
        path = {"missing model": str(tmp_path / "gone.keras"), "wrong input shape": _keras_primary(tmp_path, (32, 32)),
                "not a model": str(tmp_path / "model.keras")}[bad]
        if bad == "not a model":
            (tmp_path / "model.keras").write_text("not a model")
        plan = {**GAN_MONITOR_PLAN, "primary": path}
        expected = {"missing model": "no such file", "wrong input shape": "28×28",
                    "not a model": "not a Keras model"}[bad]
    ledger, out = tmp_path / "ledger", tmp_path / "monitor"
    monkeypatch.setenv(LEDGER_ENV, str(ledger))
    with pytest.raises(ValueError, match=expected):
        runner.run_monitor(plan_from_dict(plan), str(out))
    if bad == "missing vocabulary":   # the command line: exit code 2, the message, no traceback, --check too
        plan_path = tmp_path / "plan.json"
        plan_path.write_text(json.dumps(plan))
        # --check through the console script, the run through the same main() in this process
        check = subprocess.run([fedgen_cli(), "monitor", "--plan", str(plan_path), "--out", str(out), "--check"],
                               env={**os.environ, LEDGER_ENV: str(ledger)}, capture_output=True, text=True, timeout=300)
        for done in (check, run_main("monitor", "--plan", plan_path, "--out", out)):
            assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not ledger.exists() and not out.exists()   # no population key, no secret, nothing charged


def test_a_char_lm_monitor_reads_the_modelers_vocabulary_from_its_own_copy(tmp_path):
    vocab = _words_file(tmp_path)
    plan = {**MONITOR_PLAN, "periods": 3, "rounds_per_period": 4, "rollout": None,
            "auxiliaries": [{"kind": "char-lm", "preset": "test", "vocab": f"file:{vocab}"}]}
    plan = {k: v for k, v in plan.items() if v is not None}
    out, _, done = _monitor(tmp_path, "vocab-monitor", plan=plan, in_process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    copy = inputs.vocabulary_copy(str(out), plan_from_dict(plan).auxiliaries[0])
    assert open(copy).read() == open(vocab).read()
    os.remove(vocab)   # the modeler's file may go: every period ran from the monitor's copy
    words = open(copy).read().split()
    for period in (1, 2, 3):
        run_dir = str(out / f"period_{period:03d}" / "char-lm")
        assert store.read_config(run_dir)["lm"]["vocab"] == f"file:{copy}"
        assert list(lm_data.load_vocabulary(run_dir).words) == words
    assert len(store.period_records(str(out))) == 3


def test_a_gan_monitor_runs_the_users_keras_model_as_its_primary(tmp_path):
    model = _keras_primary(tmp_path)
    plan = {**GAN_MONITOR_PLAN, "periods": 3, "rollout": None, "primary": model, "primary_output": "probabilities"}
    plan = {k: v for k, v in plan.items() if v is not None}
    out, _, done = _monitor(tmp_path, "keras-primary-monitor", plan=plan, in_process=True)
    assert done.returncode == 0, done.stderr[-3000:]
    probe = np.random.default_rng(0).uniform(size=(5, 28, 28, 1)).astype(np.float32)
    expected = np.log(tf.keras.models.load_model(model)(probe[..., 0]).numpy())
    for period in (1, 2, 3):
        run_dir = str(out / f"period_{period:03d}" / "gan-random")
        config = store.read_config(run_dir)["gan"]
        assert config["primary"] == os.path.abspath(model) and config["primary_output"] == "probabilities"
        from fedgen_debug.training.primary_cnn import load_primary_cnn

        used = load_primary_cnn(store.released(run_dir, store.PRIMARY))   # the run's own copy, adapted
        np.testing.assert_allclose(used(probe).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert len(store.period_records(str(out))) == 3
