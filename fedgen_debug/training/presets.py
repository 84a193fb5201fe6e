"""The presets, as data: one table per model family, each entry every size and training value a preset
names (ARCHITECTURE.md, "Presets are data").

- `GAN_PRESETS`: the GAN's networks (`models.gan.GANConfig`) and its DP-FedAvg-GAN training.
- `LM_PRESETS`, by (preset, kind): the LM's sizes (`models.lm.LMConfig` without the vocabulary, which the
  kind or the data decides) and its DP-FedAvg training.
- `PRIMARY_CNN_PRESETS`: the public primary CNN a GAN run trains when it is given none.

A run's privacy settings (the training commands' flags) override a preset's values
(`PrivacySettings.override`); the CLI's `--preset` choices are `PRESET_NAMES`. Errors raised here name the
choices and never a CLI flag: the CLI adds that context.

Why the networks are plain field values and not the models' config classes: those modules import TensorFlow,
and the CLI reads this module to offer its choices; the accessors below build the config classes. The training
configs are the real frozen, validated classes (they import no TensorFlow) with seed 0: a run's seed
replaces it.
"""

from __future__ import annotations

import dataclasses

from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig
from fedgen_debug.training.gan_config import GANTrainingConfig

DEFAULT_PRESET = "demo"


@dataclasses.dataclass(frozen=True)
class GANPreset:
    model: dict                  # `models.gan.GANConfig`'s fields (its defaults: the paper's networks)
    training: GANTrainingConfig


@dataclasses.dataclass(frozen=True)
class LMPreset:
    model: dict                  # `models.lm.LMConfig`'s fields but the vocabulary
    training: TrainingConfig


@dataclasses.dataclass(frozen=True)
class PrimaryCNNPreset:
    model: dict                  # `models.cnn.CNNConfig`'s fields (its defaults: TFF's EMNIST CNN)
    public_writers: int          # the clean public stand-in handwriting it trains on (other writers)
    epochs: int


# ---- GAN (augenstein2020 §6, App. C.2, Table 9) ------------------------------------------------------------
# "paper": Table 9 (n = 6, B = 32, η_G = 0.005, η_D = 0.0005, S = 0.1, z = 0.01, qN = 10, T = 1000) and the
# paper code's networks.
# "demo" networks: sized so a round of 10 clients × 6 D steps × batch 32 plus 6 G steps takes about a second
# on 2 CPU cores; its BN momentum is lower so the moving statistics follow a short run. Its D is small
# on purpose: DP noise has the same std on every coordinate, so its norm grows with √(D's parameters)
# while the clipped signal does not; D dense 16 instead of 64 has 14,777 parameters instead of 52,505
# (noise norm ÷ 1.9). Measured with evaluation/gan_quality.py (docs/gan.md).
# "demo" DP: qN = 50, z = 0.3 (ε ≈ 8.8·10³ on 100 writers in 200 rounds; Table 9's qN = 10, z = 0.01:
# 8·10⁶). Under strict selection only the qualifying share of the sampled users contributes (about
# 12% of writers for "high"); with qN = 10 the high-accuracy GAN drew salt-and-pepper noise even at
# z = 0.01; with qN = 50 and z = 0.3 the low-accuracy GAN draws characters and the high-accuracy one
# sparse strokes on white (measured; docs/gan.md). S = 0.5 (was 0.1; ε depends on z, not S):
# the synthetic writers' client updates have median norm ~0.5, so at 0.1 the clip, not the noise, held
# the critic back (without any noise: Fréchet 161 vs 163 with it), and the generator drew speckled blobs;
# at 0.5 it draws characters (Fréchet 163 → 67 on seed 0; FEMNIST, whose updates are ~0.1: 85 → 88).
# "demo" training: 200 rounds, client D learning rate η_D = 0.02, an Adam generator (η_G = 0.0003,
# β1 = 0.5) and two D rounds per G update. Why η_D = 0.02, 40× Table 9's: at 0.0005 a client's 6 D
# steps move D by 0.01-0.02 in L2, a fifth of the clip S = 0.1, while the noise on the mean (zS/qN per
# coordinate) has norm ≈ 0.14: the critic learned from noise and the generator drew salt and pepper
# on real FEMNIST. At 0.02 the updates reach 0.06 on FEMNIST, 0.5 on synthetic (median norms), which
# the clip S = 0.5 passes on synthetic data. η_G = 0.0003 (was 0.001): with the
# faster critic the generator at 0.001 collapsed to a few modes on the FEMNIST low-accuracy writers
# (60% near-duplicates). Measured with evaluation/gan_quality.py (docs/gan.md). Earlier: with
# Table 9's SGD generator 3 of 12 demo GANs collapsed to blank white images (the generator's steps
# grow with the critic's output scale until its tanh saturates); at 1:1 the generator outran the
# critic (all-black, and 127 vs 102 Fréchet at round 150 with the new η_D). Both take one pass over
# a client's images, as the paper's code does (`repeat=False`). `cycle_client_data` (opt-in,
# `GANTrainingConfig`) takes all n steps instead: FEMNIST's low-accuracy GAN went from
# Fréchet 80 to 51 (5 seeds), but a ~19-writer high-accuracy GAN drew noise on 2 of 2 secrets
# (one pass: 0 of 2), so the demo keeps one pass (docs/gan.md).
# "test": 3 rounds of 2 clients × 2 steps, for tests.
# `eval_every`: how often the run snapshots the generator's samples (the app's round slider).
GAN_PRESETS = {
    "paper": GANPreset(
        model=dict(),
        training=GANTrainingConfig(
            TrainingConfig(rounds=1000, dp=DPConfig(clients_per_round=10, noise_multiplier=0.01, clip=0.1),
                           client=ClientConfig(epochs=1, batch_size=32, learning_rate=0.0005),
                           server=ServerConfig("sgd", 1.0), eval_every=50))),
    "demo": GANPreset(
        model=dict(noise_dim=32, gen_dense=128, gen_channels=(32, 16, 8), disc_channels=(8, 16), disc_dense=16,
                   bn_momentum=0.99),
        training=GANTrainingConfig(
            TrainingConfig(rounds=200, dp=DPConfig(clients_per_round=50, noise_multiplier=0.3, clip=0.5),
                           client=ClientConfig(epochs=1, batch_size=32, learning_rate=0.02),
                           server=ServerConfig("sgd", 1.0), eval_every=10),
            gen_optimizer="adam", gen_learning_rate=0.0003, gen_beta_1=0.5, disc_rounds_per_gen_update=2)),
    "test": GANPreset(
        model=dict(noise_dim=8, gen_dense=16, gen_channels=(4, 4, 4), disc_channels=(4, 4), disc_dense=8,
                   bn_momentum=0.9),
        training=GANTrainingConfig(
            TrainingConfig(rounds=3, dp=DPConfig(clients_per_round=2, noise_multiplier=0.01, clip=0.1),
                           client=ClientConfig(epochs=1, batch_size=8, learning_rate=0.0005),
                           server=ServerConfig("sgd", 1.0), eval_every=1),
            disc_steps=2, gen_steps=2, gen_batch_size=8)),
}

# ---- LMs (augenstein2020 §5, App. B.2) ------------------------------------------------------------------
# paper: App. B.2 / Table 5. demo/test: converge on 2 CPU cores. A demo char-LM device trains on at most
# 64 of its OOV words a round, a fresh random subset each round (a device held 105 on average, up to
# 524), one epoch at client rate 2.0, for 240 rounds: its fit grows with rounds, not with local steps
# (docs/lm.md: on a play's speakers 120 rounds of 2 epochs sampled fragments, `p`, `bi`, `pi`;
# 240 of 1 epoch, about the same time, a speaker's name and glued pairs; 4 epochs of batch 8 were no
# better than 2; DP noise, clip and padded targets were not what held it back). ε: twice the rounds.
# The word-LM trains 60 rounds on at most 32 sentences a device (1.25x the time of 30 rounds on every
# sentence): at 30 its position-1 statistic varied so much between trainings that a 0% run tested
# against another 0% run said YES in 13 of 42 pairs (`evaluation/lm_replicates.py`; 60 capped rounds:
# 1 of 20, and 25 of 25 10%-vs-0% pairs found).
# Every demo and test LM: qN = 20, z = 0.1, S = 1.0, a momentum server.
LM_PRESETS = {
    ("paper", "char"): LMPreset(
        model=dict(embedding_dim=128, units=256, projection_units=128, layers=3),
        training=TrainingConfig(rounds=2000, dp=DPConfig(clients_per_round=5000, noise_multiplier=1.0, clip=0.1),
                                client=ClientConfig(1, 16, 0.5), server=ServerConfig("nesterov", 1.0, 0.99))),
    ("paper", "word"): LMPreset(
        model=dict(embedding_dim=96, units=670, projection_units=96, layers=1),
        training=TrainingConfig(rounds=2000, dp=DPConfig(clients_per_round=5000, noise_multiplier=1.0, clip=0.2),
                                client=ClientConfig(1, 16, 0.5), server=ServerConfig("nesterov", 1.0, 0.99))),
    ("demo", "char"): LMPreset(
        model=dict(embedding_dim=32, units=128, projection_units=64, layers=2),
        training=TrainingConfig(rounds=240, dp=DPConfig(clients_per_round=20, noise_multiplier=0.1, clip=1.0),
                                client=ClientConfig(1, 16, 2.0, max_examples=64), server=ServerConfig("momentum", 1.0, 0.5))),
    ("demo", "word"): LMPreset(
        model=dict(embedding_dim=32, units=128, projection_units=32, layers=1),
        training=TrainingConfig(rounds=60, dp=DPConfig(clients_per_round=20, noise_multiplier=0.1, clip=1.0),
                                client=ClientConfig(2, 16, 1.0, max_examples=32), server=ServerConfig("momentum", 1.0, 0.5))),
    # Test-size char-LMs keep two epochs a round: 12 rounds is all a test affords.
    ("test", "char"): LMPreset(
        model=dict(embedding_dim=16, units=32, projection_units=16, layers=1),
        training=TrainingConfig(rounds=12, dp=DPConfig(clients_per_round=20, noise_multiplier=0.1, clip=1.0),
                                client=ClientConfig(2, 16, 2.0, max_examples=64), server=ServerConfig("momentum", 1.0, 0.5))),
    # Test-size word-LMs (40 devices, 8-12 rounds) learn the position-1 excess on every sentence; capped,
    # 8 rounds did not (tests/test_lm_scenario.py).
    ("test", "word"): LMPreset(
        model=dict(embedding_dim=8, units=16, projection_units=8, layers=1),
        training=TrainingConfig(rounds=12, dp=DPConfig(clients_per_round=20, noise_multiplier=0.1, clip=1.0),
                                client=ClientConfig(2, 16, 1.0), server=ServerConfig("momentum", 1.0, 0.5))),
}

# ---- The primary CNN (augenstein2020 §6), trained centrally on public stand-in data -------------------------
# "paper" and "demo" train half the filters of TFF's EMNIST CNN (`CNNConfig()`): the same shape of model,
# about 2x faster to train on 2 CPU cores. `num_classes` is the run's (`GANRun.primary_classes`).
PRIMARY_CNN_PRESETS = {
    "paper": PrimaryCNNPreset(model=dict(conv1_filters=16, conv2_filters=32, dense_units=128), public_writers=400,
                              epochs=3),
    "demo": PrimaryCNNPreset(model=dict(conv1_filters=16, conv2_filters=32, dense_units=128), public_writers=100,
                             epochs=3),
    "test": PrimaryCNNPreset(model=dict(num_classes=10, conv1_filters=8, conv2_filters=16, dense_units=32),
                             public_writers=12, epochs=3),
}

PRESET_NAMES = tuple(GAN_PRESETS)
LM_KINDS = tuple(dict.fromkeys(kind for _, kind in LM_PRESETS))


def check_preset(name: str) -> str:
    """`name` if it is a preset's; else a ValueError naming the choices."""
    if name not in PRESET_NAMES:
        raise ValueError(f"preset must be one of {', '.join(PRESET_NAMES)}. Found {name!r}.")
    return name


def check_lm_kind(kind: str) -> str:
    if kind not in LM_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LM_KINDS)}. Found {kind!r}.")
    return kind


def gan_model_config(name: str, **overrides):
    """The preset's `models.gan.GANConfig`, with `overrides` (e.g. the run's `gen_upsample`)."""
    from fedgen_debug.models.gan import GANConfig

    return GANConfig(**{**GAN_PRESETS[check_preset(name)].model, **overrides})


def gan_training_config(name: str, seed: int = 0) -> GANTrainingConfig:
    training = GAN_PRESETS[check_preset(name)].training
    return dataclasses.replace(training, training=dataclasses.replace(training.training, seed=seed))


def lm_model_config(name: str, kind: str, num_ids: int | None = None):
    """The preset's `models.lm.LMConfig`: a word-LM over the vocabulary's `num_ids`, a char-LM over its
    fixed symbols (`models.lm.CHAR_VOCAB`; `num_ids` is not used)."""
    from fedgen_debug.models.lm import CHAR_VOCAB, LMConfig

    preset = LM_PRESETS[check_preset(name), check_lm_kind(kind)]
    if kind == "word" and num_ids is None:
        raise ValueError("a word-LM's vocabulary decides its output size: num_ids must be given. Found None.")
    return LMConfig(vocab_size=num_ids if kind == "word" else CHAR_VOCAB, **preset.model)


def lm_training_config(name: str, kind: str, seed: int = 0) -> TrainingConfig:
    return dataclasses.replace(LM_PRESETS[check_preset(name), check_lm_kind(kind)].training, seed=seed)


def primary_cnn_preset(name: str) -> PrimaryCNNPreset:
    return PRIMARY_CNN_PRESETS[check_preset(name)]


def primary_cnn_config(name: str, **overrides):
    """The preset's `models.cnn.CNNConfig`, with `overrides` (e.g. the run's `num_classes`)."""
    from fedgen_debug.models.cnn import CNNConfig

    return CNNConfig(**{**primary_cnn_preset(name).model, **overrides})
