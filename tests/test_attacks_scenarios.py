"""Attacks at the scenarios' own call sites (issue 58): a train command draws its DP noise from the run's
secret, never from `--seed`. Two runs with the same `--seed`, the same data and every user in every round
(so client sampling cannot tell them apart) must release models that differ by two independent noise
draws; had the call site seeded the noise from the public seed, they would be the same model, and the
modeler could difference runs or rebuild the noise (test_attacks.py attacks the DP process itself).

Mutation tried (2026-11-29): `secret.tf_seed("dp-noise")` replaced by `(run.seed, 0)` at the call site in
`experiments/lm.py` and in `training/tf_backend.py` (the GAN's DP sum), and by `(config.seed, 0)` in
`experiments/t6_topic.py` (T6's auxiliary LM) and `training/public_discriminator.py` (T6's image
discriminator): each call site's test below then fails."""

import glob
import os

import numpy as np
import pytest

from fedgen_debug.runs import store

USERS = 6


def _two_runs(tmp_path, run):
    """Two runs of one config (`--seed 5` and every other public input equal), as `train-lm`/`train-gan`
    train them (`experiments.sweep.train_run`, in this process: a CLI process each cost 8 s of imports)."""
    from fedgen_debug.experiments.sweep import train_run

    dirs = [str(tmp_path / side) for side in "ab"]
    for run_dir in dirs:
        train_run(run, run_dir)
    return dirs


def _flat(arrays) -> np.ndarray:
    return np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays])


def test_attack_two_char_lms_with_one_seed_release_one_model_fails(tmp_path):
    from fedgen_debug.training.lm_run import LMRun

    a, b = _two_runs(tmp_path, LMRun("char", f"synthetic-text:users={USERS},seed=58", preset="test", seed=5, rounds=1,
                                     clients_per_round=USERS))
    config = store.read_config(a)["training"]
    assert store.read_config(b)["training"] == config and config["seed"] == 5   # all public inputs equal
    difference = _flat(store.load_arrays(store.released(a, store.MODEL_WEIGHTS))) - \
        _flat(store.load_arrays(store.released(b, store.MODEL_WEIGHTS)))
    # One round of a momentum server (lr 1: its first step is the noised mean update): the two models differ
    # by the difference of two noises of std zS/qN per weight, sqrt(2) zS/qN; nothing else differs.
    dp = config["dp"]
    expected = np.sqrt(2) * dp["noise_multiplier"] * dp["clip"] / dp["clients_per_round"] * config["server"]["learning_rate"]
    assert np.std(difference) == pytest.approx(expected, rel=0.1)


def _discriminator(run_dir) -> np.ndarray:
    """The discriminator after round 1, server side (ground truth: the modeler sees the generator trained
    from it): the arrays of the first checkpoint from the first 4×4×1 convolution, 8 arrays."""
    (path,) = sorted(glob.glob(f"{run_dir}/server/checkpoints/round_000001.npz"))
    arrays = store.load_arrays(path)
    first = next(i for i, w in enumerate(arrays) if w.ndim == 4 and w.shape[2] == 1)
    return _flat(arrays[first:first + 8])


def test_attack_two_gans_with_one_seed_draw_one_noise_fails(tmp_path):
    from fedgen_debug.training.gan_run import GANRun

    a, b = _two_runs(tmp_path, GANRun("synthetic-images:writers=4,seed=58", "random", preset="test", seed=5, rounds=1,
                                      clients_per_round=4))
    released = [_flat(store.load_arrays(store.released(d, store.MODEL_WEIGHTS))) for d in (a, b)]
    assert not np.allclose(*released)
    config = store.read_config(a)["gan_training"]["training"]
    difference = _discriminator(a) - _discriminator(b)
    dp = config["dp"]
    expected = np.sqrt(2) * dp["noise_multiplier"] * dp["clip"] / dp["clients_per_round"] * config["server"]["learning_rate"]
    assert np.std(difference) == pytest.approx(expected, rel=0.1)


def _noise_difference(config) -> float:
    """The std per weight of the difference of two runs' one-round models: two independent noises of std
    zS/qN on the mean update, through a server step of rate lr."""
    dp = config.dp
    return np.sqrt(2) * dp.noise_multiplier * dp.clip / dp.clients_per_round * config.server.learning_rate


def test_attack_two_t6_auxiliary_lms_with_one_seed_draw_one_noise_fails(tmp_path):
    """T6's DP-FedAvg word-LM on the sentences its selector kept (`experiments.t6_topic`), twice with one
    public seed on four devices that all train in the one round."""
    from fedgen_debug.data.text import Vocabulary
    from fedgen_debug.experiments import t6_topic
    from fedgen_debug.training.config import DPConfig, ServerConfig, TrainingConfig

    kept = {f"user_{i}": [["select", "rows", "from", "table", str(i)], ["join", "the", "index"]] for i in range(4)}
    vocab = Vocabulary.from_sentences([w for toks in kept.values() for w in toks], 50)
    config = t6_topic.T6Config(users=4, rounds=1, clients_per_round=4, client_epochs=1, samples=5, seed=5)
    models = []
    for side in "ab":
        *_, result, _ = t6_topic._train_auxiliary("aux", kept, vocab, config, str(tmp_path / side),
                                                  "synthetic-text:seed=58")
        models.append(_flat(result.model_weights.trainable))
    training = TrainingConfig(rounds=1, dp=DPConfig(4, config.noise_multiplier, config.clip),
                              server=ServerConfig("sgd", 1.0))   # what _train_auxiliary builds
    assert np.std(models[0] - models[1]) == pytest.approx(_noise_difference(training), rel=0.1)


def test_attack_two_t6_image_discriminators_with_one_seed_draw_one_noise_fails(tmp_path):
    from fedgen_debug.data import synthetic_images as si
    from fedgen_debug.training.config import ClientConfig, DPConfig, TrainingConfig
    from fedgen_debug.training.public_discriminator import train_public_discriminator

    public = si.generate_writer(99, 0, si.SyntheticImagesConfig())[0]
    private = si.generate(si.SyntheticImagesConfig(writers=4, seed=58, min_examples=20, max_examples=30))
    config = TrainingConfig(rounds=1, dp=DPConfig(clients_per_round=4, noise_multiplier=0.5, clip=1.0),
                            client=ClientConfig(epochs=1, batch_size=16, learning_rate=0.05), seed=5)
    models = [_flat(train_public_discriminator(private, public, config, str(tmp_path / side), "synthetic-images:seed=58")
                    .trainable_weights) for side in "ab"]
    assert os.path.isdir(tmp_path / "a" / "released")
    assert np.std(models[0] - models[1]) == pytest.approx(_noise_difference(config), rel=0.1)
