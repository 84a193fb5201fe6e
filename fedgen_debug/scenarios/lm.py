"""The LM scenario (paper §5, App. B): DP-FedAvg word- and char-LMs on text with a tokenization bug.

`train_lm` runs on-device preparation (`lm_data`), DP-FedAvg training and writes a run directory
that `analyze_lm` (in `lm_analysis`) reads back: the model is rebuilt from the run's config.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from fedgen_debug.bugs.tokenization import TokenizationBug
from fedgen_debug.data import spec as data_spec
from fedgen_debug.data.text import oov_rate
from fedgen_debug.models.char_lm import word_sequences
from fedgen_debug.models.lm import build_lm, char_lm_config, word_lm_config
from fedgen_debug.models.word_lm import sequences
from fedgen_debug.scenarios import lm_data
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig

KINDS = ("char", "word")
PRESETS = ("paper", "demo", "test")
DATA_METRICS = "data_metrics.json"


@dataclasses.dataclass(frozen=True)
class LMRun:
    kind: str
    data: str
    bug_fraction: float = 0.0
    preset: str = "demo"
    rounds: int | None = None
    clients_per_round: int | None = None
    seed: int = 0
    vocab_size: int = 10_000

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}. Found {self.kind!r}.")
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}. Found {self.preset!r}.")
        data_spec.parse_data_spec(self.data)
        TokenizationBug(self.bug_fraction)  # validates the fraction
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1. Found {self.vocab_size}.")

    @property
    def max_length(self) -> int:
        return 20 if self.kind == "word" else 16

    def model_config(self, num_ids: int):
        return word_lm_config(self.preset, num_ids) if self.kind == "word" else char_lm_config(self.preset)

    def training_config(self, population: int) -> TrainingConfig:
        """Paper preset: App. B.2 / Table 5. Demo and test presets converge on 2 CPU cores."""
        if self.preset == "paper":
            defaults = dict(rounds=2000, qn=5000, client=ClientConfig(1, 16, 0.5),
                            server=ServerConfig("nesterov", 1.0, 0.99), clip=0.2 if self.kind == "word" else 0.1, z=1.0)
        else:
            # The word-LM learns the position-1 OOV excess early; the char-LM needs ~120 rounds before its
            # top-20 shows whole glued words (measured: 40 rounds gave 2-3 letter fragments).
            demo_rounds = 120 if self.kind == "char" else 30
            defaults = dict(rounds=demo_rounds if self.preset == "demo" else 12, qn=20, client=ClientConfig(2, 16, 1.0),
                            server=ServerConfig("momentum", 1.0, 0.5), clip=1.0, z=0.1)
        qn = min(self.clients_per_round or defaults["qn"], population)
        return TrainingConfig(rounds=self.rounds or defaults["rounds"], dp=DPConfig(qn, defaults["z"], defaults["clip"]),
                              client=defaults["client"], server=defaults["server"], seed=self.seed,
                              checkpoint_every=10)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def model_spec(run: LMRun, num_ids: int) -> dp_fedavg.ModelSpec:
    config = run.model_config(num_ids)
    shape = [None, run.max_length]
    return dp_fedavg.ModelSpec(lambda: build_lm(config, seed=run.seed),
                               lambda: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                               (tf.TensorSpec(shape, tf.int32), tf.TensorSpec(shape, tf.int32)))


@dataclasses.dataclass(frozen=True)
class DeviceData:
    """What the devices prepared: the training population (T3 opt-outs removed for the char-LM), each
    client's examples, the model's number of ids, and the device-reported aggregates."""

    vocab: object
    population: list
    examples: dict
    num_ids: int
    metrics: dict


def prepare_devices(run: LMRun) -> DeviceData:
    client_data = data_spec.load_client_data(run.data)
    bug = TokenizationBug(run.bug_fraction, seed=run.seed) if run.bug_fraction > 0 else None
    vocab = lm_data.production_vocabulary(client_data, run.vocab_size)
    tokens = {cid: lm_data.device_tokens(client_data, cid, bug) for cid in client_data.client_ids}
    if run.kind == "word":
        population = sorted(tokens)
        examples = {cid: sequences(tokens[cid], vocab, run.max_length) for cid in population}
        num_ids = vocab.num_ids
    else:
        oov = {cid: lm_data.device_oov_words(toks, vocab, cid) for cid, toks in tokens.items()}
        population = sorted(cid for cid, words in oov.items() if words)  # T3: no OOV word → opt out
        if not population:
            raise ValueError(f"{run.data}: no client has out-of-vocabulary words for the char-LM.")
        examples = {cid: word_sequences(oov[cid], run.max_length) for cid in population}
        num_ids = 258
    # The device-reported aggregate the modeler monitors (paper Table 6).
    metrics = {"oov_rate": oov_rate((t for toks in tokens.values() for t in toks), vocab),
               "clients": len(tokens), "population": len(population)}
    return DeviceData(vocab, population, examples, num_ids, metrics)


def train_lm(run: LMRun, out_dir: str) -> loop.TrainingResult:
    devices = prepare_devices(run)
    config = run.training_config(len(devices.population))
    lm_data.save_vocabulary(devices.vocab, out_dir)
    rd.write_json(os.path.join(out_dir, DATA_METRICS), devices.metrics)
    spec = model_spec(run, devices.num_ids)

    def client_dataset(cid):
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices(devices.examples[cid]), config)

    return loop.train(dp_fedavg.build_process(spec, config), devices.population, client_dataset, config, out_dir,
                      str(data_spec.parse_data_spec(run.data)), label=f"{run.kind}-LM",
                      extra_config={"lm": run.to_json()})


def load_lm(run_dir: str):
    """(model with the run's final weights, vocabulary, LMRun) of a finished LM run directory."""
    run = LMRun(**rd.finished_run_config(run_dir, "lm", "train-lm")["lm"])
    vocab = lm_data.load_vocabulary(run_dir)
    model = model_spec(run, vocab.num_ids if run.kind == "word" else 258).keras_model_fn()
    model.build((None, run.max_length))
    rd.load_model_weights(run_dir, model)
    return model, vocab, run
