"""The presets' values, pinned: the demo's verdicts and ε depend on them, so moving them must not move them.

The golden numbers were copied from the code before the presets became one table per model family
(issue 54); they are read through the runs' own API (`GANRun`, `LMRun`, `train_public_primary`), which did
not change with the move, so this file passed before the move and passes after it."""

import dataclasses

import pytest

SEED = 3
POPULATION = 10**6   # larger than every preset's qN: the run's training config is the preset's

_DP = dict(accounting="replace-one", clip_quantile=None, clip_learning_rate=0.2, matched_deployment=None)
_TRAINING = dict(seed=SEED, sampling="without-replacement", checkpoint_every=10)

GAN_MODELS = {
    "paper": dict(noise_dim=128, gen_dense=1024, gen_channels=(256, 64, 32), disc_channels=(64, 128), disc_dense=1024,
                  leaky_relu_alpha=0.01, bn_momentum=0.999, weight_decay=2.5e-05, gen_upsample="transpose"),
    "demo": dict(noise_dim=32, gen_dense=128, gen_channels=(32, 16, 8), disc_channels=(8, 16), disc_dense=16,
                 leaky_relu_alpha=0.01, bn_momentum=0.99, weight_decay=2.5e-05, gen_upsample="transpose"),
    "test": dict(noise_dim=8, gen_dense=16, gen_channels=(4, 4, 4), disc_channels=(4, 4), disc_dense=8,
                 leaky_relu_alpha=0.01, bn_momentum=0.9, weight_decay=2.5e-05, gen_upsample="transpose"),
}
GAN_TRAINING = {
    "paper": dict(
        training=dict(rounds=1000, dp=dict(clients_per_round=10, noise_multiplier=0.01, clip=0.1, **_DP),
                      client=dict(epochs=1, batch_size=32, learning_rate=0.0005, max_examples=None),
                      server=dict(optimizer="sgd", learning_rate=1.0, momentum=0.9), eval_every=50, **_TRAINING),
        disc_steps=6, cycle_client_data=False, gen_steps=6, gen_batch_size=32, gen_learning_rate=0.005,
        gen_optimizer="sgd", gen_beta_1=0.9, disc_rounds_per_gen_update=1, gradient_penalty=10.0, gen_ema=0.0),
    "demo": dict(
        training=dict(rounds=200, dp=dict(clients_per_round=50, noise_multiplier=0.3, clip=0.5, **_DP),
                      client=dict(epochs=1, batch_size=32, learning_rate=0.02, max_examples=None),
                      server=dict(optimizer="sgd", learning_rate=1.0, momentum=0.9), eval_every=10, **_TRAINING),
        disc_steps=6, cycle_client_data=False, gen_steps=6, gen_batch_size=32, gen_learning_rate=0.0003,
        gen_optimizer="adam", gen_beta_1=0.5, disc_rounds_per_gen_update=2, gradient_penalty=10.0, gen_ema=0.0),
    "test": dict(
        training=dict(rounds=3, dp=dict(clients_per_round=2, noise_multiplier=0.01, clip=0.1, **_DP),
                      client=dict(epochs=1, batch_size=8, learning_rate=0.0005, max_examples=None),
                      server=dict(optimizer="sgd", learning_rate=1.0, momentum=0.9), eval_every=1, **_TRAINING),
        disc_steps=2, cycle_client_data=False, gen_steps=2, gen_batch_size=8, gen_learning_rate=0.005,
        gen_optimizer="sgd", gen_beta_1=0.9, disc_rounds_per_gen_update=1, gradient_penalty=10.0, gen_ema=0.0),
}
WORD_IDS = 1004
LM_MODELS = {   # (preset, kind): (vocab_size, embedding_dim, units, projection_units, layers)
    ("paper", "char"): (258, 128, 256, 128, 3), ("paper", "word"): (WORD_IDS, 96, 670, 96, 1),
    ("demo", "char"): (258, 32, 128, 64, 2), ("demo", "word"): (WORD_IDS, 32, 128, 32, 1),
    ("test", "char"): (258, 16, 32, 16, 1), ("test", "word"): (WORD_IDS, 8, 16, 8, 1),
}
_PAPER_LM_SERVER = dict(optimizer="nesterov", learning_rate=1.0, momentum=0.99)
_DEMO_LM = dict(dp=dict(clients_per_round=20, noise_multiplier=0.1, clip=1.0, **_DP),
                server=dict(optimizer="momentum", learning_rate=1.0, momentum=0.5), eval_every=0, **_TRAINING)
LM_TRAINING = {
    ("paper", "char"): dict(rounds=2000, dp=dict(clients_per_round=5000, noise_multiplier=1.0, clip=0.1, **_DP),
                            client=dict(epochs=1, batch_size=16, learning_rate=0.5, max_examples=None),
                            server=_PAPER_LM_SERVER, eval_every=0, **_TRAINING),
    ("paper", "word"): dict(rounds=2000, dp=dict(clients_per_round=5000, noise_multiplier=1.0, clip=0.2, **_DP),
                            client=dict(epochs=1, batch_size=16, learning_rate=0.5, max_examples=None),
                            server=_PAPER_LM_SERVER, eval_every=0, **_TRAINING),
    ("demo", "char"): dict(rounds=240, client=dict(epochs=1, batch_size=16, learning_rate=2.0, max_examples=64),
                           **_DEMO_LM),
    ("demo", "word"): dict(rounds=60, client=dict(epochs=2, batch_size=16, learning_rate=1.0, max_examples=32),
                           **_DEMO_LM),
    ("test", "char"): dict(rounds=12, client=dict(epochs=2, batch_size=16, learning_rate=2.0, max_examples=64),
                           **_DEMO_LM),
    ("test", "word"): dict(rounds=12, client=dict(epochs=2, batch_size=16, learning_rate=1.0, max_examples=None),
                           **_DEMO_LM),
}
# The public primary CNN a GAN run trains when it is given none: (public stand-in writers, CNN fields, epochs).
_CNN = dict(conv_dropout=0.25, dense_dropout=0.5, batch_size=64, learning_rate=1e-3)
PRIMARY_CNNS = {
    "paper": (400, dict(num_classes=62, conv1_filters=16, conv2_filters=32, dense_units=128, **_CNN), 3),
    "demo": (100, dict(num_classes=62, conv1_filters=16, conv2_filters=32, dense_units=128, **_CNN), 3),
    "test": (12, dict(num_classes=62, conv1_filters=8, conv2_filters=16, dense_units=32, **_CNN), 3),
}


@pytest.mark.parametrize("preset", sorted(GAN_MODELS))
def test_gan_presets_keep_their_values(preset):
    from fedgen_debug.training.gan_run import GANRun

    run = GANRun("synthetic-images:writers=10", "random", preset=preset, seed=SEED)
    assert dataclasses.asdict(run.model_config()) == GAN_MODELS[preset]
    assert dataclasses.asdict(run.training_config(POPULATION)) == GAN_TRAINING[preset]


@pytest.mark.parametrize("preset, kind", sorted(LM_MODELS))
def test_lm_presets_keep_their_values(preset, kind):
    from fedgen_debug.training.lm_run import LMRun

    run = LMRun(kind, "synthetic-text:users=10", preset=preset, seed=SEED)
    assert dataclasses.astuple(run.model_config(WORD_IDS)) == LM_MODELS[preset, kind]
    assert dataclasses.asdict(run.training_config(POPULATION)) == LM_TRAINING[preset, kind]


@pytest.mark.parametrize("preset", sorted(PRIMARY_CNNS))
def test_primary_cnn_presets_keep_their_values(preset, monkeypatch):
    from fedgen_debug.experiments import gan as gan_experiment

    calls = []
    monkeypatch.setattr(gan_experiment.data_spec, "load_client_data", lambda spec: spec)
    monkeypatch.setattr(gan_experiment.primary_cnn, "train_primary_cnn",
                        lambda data, config, seed, epochs, path: calls.append((data, config, seed, epochs, path)))
    gan_experiment.train_public_primary("primary.npz", preset, SEED)
    ((data, config, seed, epochs, path),) = calls
    writers, fields, expected_epochs = PRIMARY_CNNS[preset]
    assert data == f"synthetic-images:writers={writers},seed={SEED + 1000}"
    assert dataclasses.asdict(config) == fields
    assert (seed, epochs, path) == (SEED, expected_epochs, "primary.npz")


# ---- The tables: one per model family, data, the CLI's choices ---------------------------------------------

def test_every_family_has_the_same_preset_names_and_every_lm_kind():
    from fedgen_debug.training import presets

    assert presets.PRESET_NAMES == ("paper", "demo", "test")
    assert tuple(presets.GAN_PRESETS) == tuple(presets.PRIMARY_CNN_PRESETS) == presets.PRESET_NAMES
    assert sorted(presets.LM_PRESETS) == sorted((name, kind) for name in presets.PRESET_NAMES
                                                for kind in presets.LM_KINDS)
    assert presets.DEFAULT_PRESET in presets.PRESET_NAMES


def test_presets_are_values_not_functions():
    from fedgen_debug.training import presets

    entries = [*presets.GAN_PRESETS.values(), *presets.LM_PRESETS.values(), *presets.PRIMARY_CNN_PRESETS.values()]
    for entry in entries:
        assert dataclasses.is_dataclass(entry) and entry.__dataclass_params__.frozen
        for field in dataclasses.fields(entry):
            assert not callable(getattr(entry, field.name)), (entry, field.name)


def test_the_tables_import_no_tensorflow():
    """The CLI reads the tables for its `--preset` choices, and its `--help` must stay fast."""
    import subprocess
    import sys

    code = ("import sys; from fedgen_debug.cli.main import _build_parser; _build_parser(); "
            "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def _cli_choices(command: str, flag: str) -> tuple:
    import argparse

    from fedgen_debug.cli.main import _build_parser

    commands = next(a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in commands.choices[command]._actions if flag in a.option_strings)
    return tuple(action.choices), action.default


def test_the_cli_choices_come_from_the_tables():
    from fedgen_debug.training import presets

    assert _cli_choices("train-gan", "--preset") == (presets.PRESET_NAMES, presets.DEFAULT_PRESET)
    assert _cli_choices("train-lm", "--preset") == (presets.PRESET_NAMES, presets.DEFAULT_PRESET)
    assert _cli_choices("train-lm", "--kind")[0] == presets.LM_KINDS
    # The demo offers the presets but the paper's (days on 2 cores), in the tables' order.
    assert _cli_choices("demo", "--preset") == (("demo", "test"), presets.DEFAULT_PRESET)


def _unknown_preset_errors():
    from fedgen_debug.monitor.plan import Auxiliary
    from fedgen_debug.training import presets
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    builds = {
        "check_preset": lambda: presets.check_preset("huge"),
        "gan_model_config": lambda: presets.gan_model_config("huge"),
        "gan_training_config": lambda: presets.gan_training_config("huge"),
        "lm_model_config": lambda: presets.lm_model_config("huge", "word", 100),
        "lm_training_config": lambda: presets.lm_training_config("huge", "char"),
        "primary_cnn_config": lambda: presets.primary_cnn_config("huge"),
        "GANRun": lambda: GANRun("synthetic-images:writers=10", "random", preset="huge"),
        "LMRun": lambda: LMRun("char", "synthetic-text:users=10", preset="huge"),
        "monitor plan": lambda: Auxiliary("gan", preset="huge"),
    }
    for where, build in builds.items():
        with pytest.raises(ValueError) as raised:
            build()
        yield where, str(raised.value)


def test_an_unknown_preset_is_refused_with_the_choices_and_no_cli_flag():
    from fedgen_debug.training import presets

    for where, message in _unknown_preset_errors():
        assert "preset must be one of paper, demo, test. Found 'huge'." in message, where
        assert "--" not in message, where
    with pytest.raises(ValueError, match="kind must be one of char, word. Found 'bpe'."):
        presets.lm_model_config("demo", "bpe", 100)
    with pytest.raises(ValueError, match="num_ids must be given"):
        presets.lm_model_config("demo", "word")


def test_a_run_seed_and_overrides_leave_the_tables_alone():
    from fedgen_debug.training import presets

    before = dataclasses.replace(presets.GAN_PRESETS["demo"])
    assert presets.gan_training_config("demo", seed=7).training.seed == 7
    assert presets.gan_model_config("demo", gen_upsample="bilinear").gen_upsample == "bilinear"
    assert presets.lm_training_config("demo", "char", seed=7).seed == 7
    assert presets.GAN_PRESETS["demo"] == before and presets.GAN_PRESETS["demo"].training.training.seed == 0
    assert presets.gan_model_config("demo").gen_upsample == "transpose"
