"""What an LM run is: its frozen, validated config (`LMRun`) over its preset (`training.presets.LM_PRESETS`),
the model it trains, and how to rebuild that model from a finished run's released weights (`load_lm`,
used by analysis and the memorization checker; loading never trains).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import lm_data
from fedgen_debug.device.canary_specs import parse_canaries
from fedgen_debug.device.catalog import parse_fault
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.models.lm import CHAR_VOCAB, TokenCrossentropy, build_lm
from fedgen_debug.runs import store
from fedgen_debug.training import dp_fedavg, presets
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import PrivacySettings, TrainingConfig, check_public_init
from fedgen_debug.validation import check_at_least, check_fraction


# The longest sequence an LM trains on and its sampler draws: words a phrase (the paper's Stack Overflow
# sequences of 20), bytes a char-LM word (longer OOV words are cut). A sample that reaches it was stopped by
# the sampler, not by the model (`analysis.text_properties.cut_by_sampler`).
MAX_LENGTH = {"word": 20, "char": 16}


@dataclasses.dataclass(frozen=True)
class LMRun(PrivacySettings):
    """One LM run: the data, the simulated bug, the preset, and the modeler's privacy settings
    (`PrivacySettings`: rounds, clients_per_round, noise_multiplier, clip, delta, sampling, selection)."""

    kind: str
    data: str
    bug_fraction: float = 0.0
    preset: str = presets.DEFAULT_PRESET   # a name of `presets.LM_PRESETS`
    seed: int = 0
    vocab_size: int = 10_000
    vocab: str | None = None          # "dp" or "public:SPEC"; None: lm_data.default_vocabulary_source
    canaries: str | None = None       # a `device.canary_specs` spec: canaries inserted for the checker
    update_canaries: int = 0          # clients sending random directions, for the empirical ε
    # A pipeline fault of the device catalog on top of the paper's bug (`device.catalog`, e.g. "entities:0.5"):
    # a simulation, to see what a fault looks like in the samples.
    fault: str | None = None
    # "public:SPEC": DP-FedAvg starts from weights trained centrally on that public text
    # (`experiments.public_init`; no ε: nothing of the users enters them).
    init: str | None = None

    def __post_init__(self):
        presets.check_lm_kind(self.kind)
        presets.check_preset(self.preset)
        self.check_privacy_settings()
        if data_spec.parse_data_spec(self.data).modality != data_spec.TEXT:   # else refused by the ledger, or worse
            raise ValueError(f"train-lm needs text data. Found {self.data!r}.")
        check_fraction(self.bug_fraction, "bug_fraction")
        self.device_fault()
        check_at_least("vocab_size", self.vocab_size, 1)
        if self.vocab is None:
            object.__setattr__(self, "vocab", lm_data.default_vocabulary_source(self.data))
        lm_data.check_vocabulary_source(self.vocab, self.data)
        if self.canaries is not None:
            parse_canaries(self.canaries)
        check_public_init(self.init, self.data, "text")
        check_at_least("update_canaries", self.update_canaries, 0)
        if self.update_canaries and self.clip_quantile is not None:
            raise ValueError("update canaries are inserted at a fixed clip S: drop --adaptive-clip to plant them.")

    def app_bug(self) -> TokenizationBug | None:
        """The paper's tokenization bug on the devices (None at 0%)."""
        return TokenizationBug(self.bug_fraction, seed=self.seed) if self.bug_fraction > 0 else None

    def device_fault(self):
        """The catalog fault on the devices' text (a `DeviceTransform`), or None."""
        return None if self.fault is None else parse_fault(self.fault, "text", self.seed)

    @property
    def max_length(self) -> int:
        return MAX_LENGTH[self.kind]

    def model_config(self, num_ids: int):
        return presets.lm_model_config(self.preset, self.kind, num_ids)

    def training_config(self, population: int) -> TrainingConfig:
        """The preset's values with the run's privacy settings; qN at most the population."""
        return self.override(presets.lm_training_config(self.preset, self.kind, self.seed), population)

    def to_json(self) -> dict:
        return self.saved_json(("update_canaries", "fault", "init"))


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
