"""What an LM run is: its frozen, validated config (`LMRun`), the training presets per preset and kind,
the model it trains, and how to rebuild that model from a finished run's released weights (`load_lm`,
used by analysis and the memorization checker; loading never trains).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import lm_data
from fedgen_debug.device.canary_specs import parse_canaries
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.models.lm import CHAR_VOCAB, TokenCrossentropy, build_lm, char_lm_config, word_lm_config
from fedgen_debug.runs import store
from fedgen_debug.training import dp_fedavg
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import ClientConfig, DPConfig, PrivacySettings, ServerConfig, TrainingConfig
from fedgen_debug.validation import check_at_least, check_one_of

KINDS = ("char", "word")
PRESETS = ("paper", "demo", "test")
# Training defaults per preset and kind; every field can be overridden by the run (CLI flags).
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
_DEMO = dict(clients_per_round=20, noise_multiplier=0.1, clip=1.0, server=ServerConfig("momentum", 1.0, 0.5))
TRAINING_PRESETS = {
    ("paper", "word"): dict(rounds=2000, clients_per_round=5000, noise_multiplier=1.0, clip=0.2,
                            client=ClientConfig(1, 16, 0.5), server=ServerConfig("nesterov", 1.0, 0.99)),
    ("paper", "char"): dict(rounds=2000, clients_per_round=5000, noise_multiplier=1.0, clip=0.1,
                            client=ClientConfig(1, 16, 0.5), server=ServerConfig("nesterov", 1.0, 0.99)),
    ("demo", "char"): dict(rounds=240, client=ClientConfig(1, 16, 2.0, max_examples=64), **_DEMO),
    ("demo", "word"): dict(rounds=60, client=ClientConfig(2, 16, 1.0, max_examples=32), **_DEMO),
    # Test-size char-LMs keep two epochs a round: 12 rounds is all a test affords.
    ("test", "char"): dict(rounds=12, client=ClientConfig(2, 16, 2.0, max_examples=64), **_DEMO),
    # Test-size word-LMs (40 devices, 8-12 rounds) learn the position-1 excess on every sentence; capped,
    # 8 rounds did not (tests/test_lm_scenario.py).
    ("test", "word"): dict(rounds=12, client=ClientConfig(2, 16, 1.0), **_DEMO),
}


@dataclasses.dataclass(frozen=True)
class LMRun(PrivacySettings):
    """One LM run: the data, the simulated bug, the preset, and the modeler's privacy settings
    (`PrivacySettings`: rounds, clients_per_round, noise_multiplier, clip, delta, sampling, selection)."""

    kind: str
    data: str
    bug_fraction: float = 0.0
    preset: str = "demo"
    seed: int = 0
    vocab_size: int = 10_000
    vocab: str | None = None          # "dp" or "public:SPEC"; None: lm_data.default_vocabulary_source
    canaries: str | None = None       # a `device.canary_specs` spec: canaries inserted for the checker
    update_canaries: int = 0          # clients sending random directions, for the empirical ε

    def __post_init__(self):
        check_one_of("kind", self.kind, KINDS)
        check_one_of("preset", self.preset, PRESETS)
        self.check_privacy_settings()
        data_spec.parse_data_spec(self.data)
        TokenizationBug(self.bug_fraction)  # validates the fraction
        check_at_least("vocab_size", self.vocab_size, 1)
        if self.vocab is None:
            object.__setattr__(self, "vocab", lm_data.default_vocabulary_source(self.data))
        lm_data.check_vocabulary_source(self.vocab, self.data)
        if self.canaries is not None:
            parse_canaries(self.canaries)
        check_at_least("update_canaries", self.update_canaries, 0)
        if self.update_canaries and self.clip_quantile is not None:
            raise ValueError("update canaries are inserted at a fixed clip S: drop --adaptive-clip to plant them.")

    @property
    def max_length(self) -> int:
        return 20 if self.kind == "word" else 16

    def model_config(self, num_ids: int):
        return word_lm_config(self.preset, num_ids) if self.kind == "word" else char_lm_config(self.preset)

    def training_config(self, population: int) -> TrainingConfig:
        """The preset's values with the run's privacy settings; qN at most the population."""
        preset = TRAINING_PRESETS[(self.preset, self.kind)]
        dp = DPConfig(preset["clients_per_round"], preset["noise_multiplier"], preset["clip"])
        base = TrainingConfig(rounds=preset["rounds"], dp=dp, client=preset["client"], server=preset["server"],
                              seed=self.seed, checkpoint_every=10)
        return self.override(base, population)

    def to_json(self) -> dict:
        return self.saved_json(("update_canaries",))


def model_spec(run: LMRun, num_ids: int) -> dp_fedavg.ModelSpec:
    config = run.model_config(num_ids)
    shape = [None, run.max_length]
    return dp_fedavg.ModelSpec(lambda: build_lm(config, seed=run.seed),
                               TokenCrossentropy,
                               (tf.TensorSpec(shape, tf.int32), tf.TensorSpec(shape, tf.int32)))


def load_lm(run_dir: str):
    """(model with the run's final weights, vocabulary, LMRun) of a finished LM run directory."""
    run = LMRun(**store.finished_run_config(run_dir, "lm", "train-lm")["lm"])
    vocab = lm_data.load_vocabulary(run_dir)
    model = model_spec(run, vocab.num_ids if run.kind == "word" else CHAR_VOCAB).keras_model_fn()
    model.build((None, run.max_length))
    rd.load_model_weights(run_dir, model)
    return model, vocab, run
