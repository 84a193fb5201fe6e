"""The LM scenario (paper §5, App. B): DP-FedAvg word- and char-LMs on text with a tokenization bug.

`train_lm` charges every release of the run to the privacy ledger at once (the DP vocabulary when it
comes from the private users, the DP mean OOV rate, all training rounds), then builds the vocabulary,
lets every device prepare its examples (`lm_data`) and trains. `analyze_lm` (in `lm_analysis`) reads
the released run back.

Selection (`selection`):
- `strict` (default): every user of the data is in the population and may be sampled; a device
  without out-of-vocabulary words (char-LM, T3) trains on nothing and sends a zero update that still
  counts in the fixed denominator. ε is over all N users and nothing reveals who qualified.
- `paper`: the population is the users who qualified (the server learns who they are, and ε is over
  that subpopulation as if membership were public); augenstein2020's accounting, with a warning. How
  many qualified is released only as a DP count (population.json, charged as its own release), and
  training is accounted with a DP lower bound computed from it (`privacy.subpopulation`: its failure
  probability is added to δ); a DP count below qN refuses the run.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.bugs.tokenization import TokenizationBug, tokenize_client
from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.memorization.canaries import parse_canaries
from fedgen_debug.models.char_lm import word_sequences
from fedgen_debug.models.lm import CHAR_VOCAB, TokenCrossentropy, build_lm, char_lm_config, word_lm_config
from fedgen_debug.models.word_lm import sequences
from fedgen_debug.privacy import aggregates
from fedgen_debug.privacy.accounting import check_delta
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.privacy.heavy_hitters import heavy_hitters_record
from fedgen_debug.privacy.subpopulation import PAPER_SELECTION_WARNING, SubpopulationBound
from fedgen_debug.runs import store
from fedgen_debug.runs.start import charge, open_run
from fedgen_debug.scenarios import lm_canaries, lm_data
from fedgen_debug.training import dp_fedavg, loop, update_canaries
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import ClientConfig, DPConfig, PrivacySettings, ServerConfig, TrainingConfig

logger = logging.getLogger(__name__)
KINDS = ("char", "word")
PRESETS = ("paper", "demo", "test")
SMALL_DP_VOCABULARY = 1000
SMALL_DP_VOCABULARY_WARNING = (
    "the DP vocabulary holds only %d words (heavy hitters of %d users): ordinary words are out of vocabulary, so "
    "the char-LM learns them and glued words are a small share of its samples; pass the production vocabulary "
    "(vocab file:PATH, one word a line)")
# Selection 'paper': the DP count of the users who qualified (char-LM: a device with OOV words; word-LM:
# a device with any sentence), σ = 4 × 1/2 = 2 users.
QUALIFIED_COUNT = aggregates.BoundedSum("qualified", (1.0,), noise_multiplier=4.0)

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
    canaries: str | None = None       # a `memorization.canaries` spec: canaries inserted for the checker
    update_canaries: int = 0          # clients sending random directions, for the empirical ε

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}. Found {self.kind!r}.")
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}. Found {self.preset!r}.")
        self.check_privacy_settings()
        data_spec.parse_data_spec(self.data)
        TokenizationBug(self.bug_fraction)  # validates the fraction
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1. Found {self.vocab_size}.")
        if self.vocab is None:
            object.__setattr__(self, "vocab", lm_data.default_vocabulary_source(self.data))
        lm_data.check_vocabulary_source(self.vocab, self.data)
        if self.canaries is not None:
            parse_canaries(self.canaries)
        if self.update_canaries < 0:
            raise ValueError(f"update_canaries must be >= 0. Found {self.update_canaries}.")
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


def _vocabulary(run: LMRun, client_data, population: loop.Population, secret, out_dir: str):
    """The run's released vocabulary (built once; a resumed run reads it back)."""
    try:
        return lm_data.load_vocabulary(out_dir)
    except FileNotFoundError:
        pass
    if run.vocab == lm_data.DP_VOCABULARY:
        config = lm_data.heavy_hitters_config(run.vocab_size, population.size)
        vocab = lm_data.dp_vocabulary(client_data, config, secret.tf_seed("vocabulary-noise"))
        if vocab.size < SMALL_DP_VOCABULARY:
            logger.warning(SMALL_DP_VOCABULARY_WARNING, vocab.size, population.size)
    else:
        vocab = lm_data.named_vocabulary(run.vocab, run.vocab_size)
    lm_data.save_vocabulary(vocab, out_dir, run.vocab)
    logger.info("vocabulary: %d words (%s)", vocab.size, run.vocab)
    return vocab


@dataclasses.dataclass(frozen=True)
class DeviceData:
    """What each device prepared on its own: its tokens (bug included) and training examples (char-LM:
    its OOV words, possibly none), and the model's number of ids. Device-side state of the simulation."""

    tokens: dict
    examples: dict
    num_ids: int


def prepare_devices(run: LMRun, client_data, vocab, sentences: dict | None = None) -> DeviceData:
    """`sentences`: every device's text when canaries changed it (`lm_canaries.device_sentences`,
    synthetic devices included); by default the data's."""
    bug = TokenizationBug(run.bug_fraction, seed=run.seed) if run.bug_fraction > 0 else None
    if sentences is None:
        sentences = {cid: lm_data.device_sentences(client_data, cid) for cid in sorted(client_data.client_ids)}
    tokens = {cid: tokenize_client(cid, text, bug) for cid, text in sentences.items()}
    if run.kind == "word":
        return DeviceData(tokens, {cid: sequences(t, vocab, run.max_length) for cid, t in tokens.items()}, vocab.num_ids)
    examples = {cid: word_sequences(lm_data.device_oov_words(t, vocab, cid), run.max_length) for cid, t in tokens.items()}
    return DeviceData(tokens, examples, CHAR_VOCAB)


def training_population(run: LMRun, everyone: loop.Population) -> loop.Population:
    """Who may be sampled: every user, Ramaswamy's synthetic canary devices and the update canaries
    (under the users' key: the real users are sampled at the rate qN / (N + canaries), which is what
    ε is computed for)."""
    synthetic = device_canaries.synthetic_device_ids(run.canaries) if run.canaries is not None else ()
    added = synthetic + update_canaries.canary_ids(run.update_canaries)
    return loop.Population(everyone.key, everyone.client_ids + added) if added else everyone


def release_records(run: LMRun, everyone: loop.Population, secret, out_dir: str) -> list:
    """The ledger records of every DP release of the run, before it computes any: the DP mean OOV rate,
    the DP vocabulary (if from the private users), and training under strict selection; under the
    paper's, the DP count of qualified users (training is accounted with a lower bound computed from
    that count, so the training loop charges it once the count is out)."""
    records = [aggregates.aggregate_record(lm_data.OOV_RATE, everyone.key, everyone.size, f"{secret.run_id}/oov-rate",
                                           out_dir)]
    if run.vocab == lm_data.DP_VOCABULARY:
        records.append(heavy_hitters_record(lm_data.heavy_hitters_config(run.vocab_size, everyone.size), everyone.key,
                                            everyone.size, f"{secret.run_id}/vocabulary", out_dir))
    if run.selection == "paper":
        records.append(aggregates.aggregate_record(QUALIFIED_COUNT, everyone.key, everyone.size,
                                                   f"{secret.run_id}/qualified-count", out_dir))
    if run.selection == "strict":
        trained = training_population(run, everyone)
        records.append(loop.training_record(run.training_config(trained.size), trained, secret, f"{run.kind}-LM",
                                            out_dir))
    return records


def train_lm(run: LMRun, out_dir: str, *, client_data=None, context: dict | None = None,
             warm_start_from: str | None = None) -> loop.TrainingResult:
    """Trains (or resumes) the run into `out_dir`. A monitor (`monitor.runner`) passes one period of a
    fleet: `client_data` (the devices present, instead of loading `run.data`), `context` (added to the
    released config, so a resume must match it) and `warm_start_from` (the previous period's run)."""
    with store.exclusive(out_dir):
        return _train_lm(run, out_dir, client_data, context, warm_start_from)


def _train_lm(run: LMRun, out_dir: str, client_data, context, warm_start_from) -> loop.TrainingResult:
    # The ledger's population is all users of the data, also when `client_data` holds some of them (a
    # monitoring period's devices).
    given = client_data is not None
    client_data = client_data if given else data_spec.load_client_data(run.data)
    everyone = loop.Population(population_key(run.data, None if given else client_data.client_ids),
                               tuple(client_data.client_ids))
    trained = training_population(run, everyone)
    config = run.training_config(trained.size)
    if run.delta is not None:
        check_delta(run.delta, trained.size)
    label = f"{run.kind}-LM"
    extra = {"lm": run.to_json(), **(context or {})}
    config_json = loop.run_config(config, everyone, label, extra)
    if not os.path.exists(store.released(out_dir, store.VOCAB)):
        lm_data.check_vocabulary_file(run.vocab)
    secret, _ = open_run(out_dir, config_json)
    # Every release of the run, charged before any is computed (all or nothing).
    charge(release_records(run, everyone, secret, out_dir), out_dir, secret=secret, config_json=config_json,
           delta=run.delta)

    vocab = _vocabulary(run, client_data, everyone, secret, out_dir)
    sentences = None
    if run.canaries is not None:
        canaries = lm_canaries.canaries_for_run(run.canaries, run.kind, vocab, run.seed, out_dir)
        sentences = lm_canaries.device_sentences(canaries, secret, run.vocab, run.seed, client_data)
    devices = prepare_devices(run, client_data, vocab, sentences)
    # The users' statistic: synthetic canary devices are not users.
    _release_oov_rate({cid: devices.tokens[cid] for cid in everyone.client_ids}, vocab, out_dir, secret)
    num_ids = devices.num_ids
    # An update canary's device trains on nothing; the DP sum adds its direction.
    empty = np.zeros((0, run.max_length), np.int32)
    examples = {**devices.examples, **{cid: (empty, empty) for cid in update_canaries.canary_ids(run.update_canaries)}}
    population = trained
    if run.selection == "paper":
        logger.warning(PAPER_SELECTION_WARNING)
        qualified = tuple(cid for cid in population.client_ids
                          if len(examples[cid][0]) or update_canaries.is_canary(cid))
        counts = _release_qualified_count(set(qualified), everyone, run, out_dir, secret)
        bound = SubpopulationBound(counts["users"], counts["users_stddev"], trained.size, config.dp.clients_per_round)
        population = loop.paper_subpopulation(trained, qualified, bound)
        store.write_private_json(store.server(out_dir, store.SELECTION), {"client_ids": list(qualified)})
    spec = model_spec(run, num_ids)

    def client_dataset(cid, round_num):
        # The device's own randomness picks the round's subset (`client.max_examples`): the run secret's.
        kept = dp_fedavg.round_examples(examples[cid], config.client.max_examples,
                                        secret.rng("client-examples", round_num, cid))
        return dp_fedavg.ClientExamples(kept)

    def build_process(secret):
        plan = (update_canaries.plan(population.client_ids, run.update_canaries, config, secret,
                                     population.accounted_size) if run.update_canaries else None)
        return dp_fedavg.build_process(spec, config, secret.tf_seed("dp-noise"), plan)

    return loop.train(build_process, population, client_dataset, config, out_dir, label=label,
                      extra_config=extra, secret=secret, delta=run.delta, warm_start_from=warm_start_from)


def _release_qualified_count(qualified: set, everyone: loop.Population, run: LMRun, out_dir: str, secret) -> dict:
    """The DP count of the users who qualified (selection 'paper'), released once per run in
    population.json (as the GAN's selection counts); returns it."""
    path = store.released(out_dir, store.POPULATION)
    if os.path.exists(path):
        return store.read_json(path)
    total = aggregates.compute(QUALIFIED_COUNT, [[1.0 if cid in qualified else 0.0] for cid in everyone.client_ids],
                               secret)
    # Clamped to what is possible (post-processing: a noised count below 0 says "about none").
    users = min(max(float(total.values[0]), 0.0), float(everyone.size))
    counts = {"users": users, "users_stddev": float(total.stddev[0]), "users_total": everyone.size,
              "selector": "oov" if run.kind == "char" else "any sentence", "dp": True}
    store.write_json(path, counts)
    return counts


def _release_oov_rate(tokens: dict, vocab, out_dir: str, secret) -> None:
    """The DP mean of the devices' OOV rates (paper Table 6), once per run."""
    path = store.released(out_dir, store.DEVICE_METRICS)
    try:
        store.read_json(path)
        return
    except FileNotFoundError:
        pass
    rates = [[lm_data.device_oov_rate(t, vocab)] for t in tokens.values()]
    total = aggregates.compute(lm_data.OOV_RATE, rates, secret)
    store.write_json(path, {"oov_rate": {"mean": float(total.values[0]) / total.devices,
                                         "stddev": float(total.stddev[0]) / total.devices,
                                         "devices": total.devices, "dp": True,
                                         "statistic": "mean over users of each user's OOV token share"}})


def load_lm(run_dir: str):
    """(model with the run's final weights, vocabulary, LMRun) of a finished LM run directory."""
    run = LMRun(**store.finished_run_config(run_dir, "lm", "train-lm")["lm"])
    vocab = lm_data.load_vocabulary(run_dir)
    model = model_spec(run, vocab.num_ids if run.kind == "word" else CHAR_VOCAB).keras_model_fn()
    model.build((None, run.max_length))
    rd.load_model_weights(run_dir, model)
    return model, vocab, run
