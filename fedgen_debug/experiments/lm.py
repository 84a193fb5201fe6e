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

from fedgen_debug.device.tokenization import tokenize_client
from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.models.char_lm import word_sequences
from fedgen_debug.models.lm import CHAR_VOCAB
from fedgen_debug.models.word_lm import sequences
from fedgen_debug.privacy import aggregates
from fedgen_debug.privacy.accounting import check_delta
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.privacy.heavy_hitters import heavy_hitters_record
from fedgen_debug.privacy.subpopulation import PAPER_SELECTION_WARNING, SubpopulationBound
from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import charge, open_run
from fedgen_debug.device import lm_canaries, lm_data
from fedgen_debug.experiments import public_init
from fedgen_debug.training import dp_fedavg, loop, update_canaries
from fedgen_debug.training.lm_run import LMRun, model_spec

logger = logging.getLogger(__name__)
SMALL_DP_VOCABULARY = 1000
SMALL_DP_VOCABULARY_WARNING = (
    "the DP vocabulary holds only %d words (heavy hitters of %d users): ordinary words are out of vocabulary, so "
    "%s; pass the production vocabulary (vocab file:PATH, one word a line)")
SMALL_DP_VOCABULARY_EFFECT = {
    "char": "the char-LM learns them and glued words are a small share of its samples",
    "word": "the word-LM sees most words as UNK and a fault inside words barely moves its samples"}
# Selection 'paper': the DP count of the users who qualified (char-LM: a device with OOV words; word-LM:
# a device with any sentence), σ = 4 × 1/2 = 2 users up to 300 users, then 300 users' relative error.
QUALIFIED_NOISE = 4.0


def qualified_count(users: int) -> aggregates.BoundedSum:
    return aggregates.BoundedSum("qualified", (1.0,), aggregates.scaled_noise(QUALIFIED_NOISE, users,
                                                                              lm_data.TEXT_REFERENCE_USERS))

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
            logger.warning(SMALL_DP_VOCABULARY_WARNING, vocab.size, population.size,
                           SMALL_DP_VOCABULARY_EFFECT[run.kind])
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
    bug = run.app_bug()
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
    records = [aggregates.aggregate_record(lm_data.oov_rate_spec(everyone.size), everyone.key, everyone.size,
                                           f"{secret.run_id}/oov-rate", out_dir)]
    if run.vocab == lm_data.DP_VOCABULARY:
        records.append(heavy_hitters_record(lm_data.heavy_hitters_config(run.vocab_size, everyone.size), everyone.key,
                                            everyone.size, f"{secret.run_id}/vocabulary", out_dir))
    if run.selection == "paper":
        records.append(aggregates.aggregate_record(qualified_count(everyone.size), everyone.key, everyone.size,
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

    vocab = _vocabulary(run, client_data, everyone, secret, out_dir)   # the production one: clean text
    fault = run.device_fault()
    if fault is not None:
        client_data = fault.apply(client_data)    # the devices' text after their faulty pipeline
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

    def pretrained():   # called only when the run starts (a resume reads its checkpoint)
        return public_init.pretrained_weights(run, spec, vocab, run.seed)

    return loop.train(build_process, population, client_dataset, config, out_dir, label=label,
                      extra_config=extra, secret=secret, delta=run.delta, warm_start_from=warm_start_from,
                      initial_weights=pretrained if run.init is not None else None)


def _release_qualified_count(qualified: set, everyone: loop.Population, run: LMRun, out_dir: str, secret) -> dict:
    """The DP count of the users who qualified (selection 'paper'), released once per run in
    population.json (as the GAN's selection counts); returns it."""
    path = store.released(out_dir, store.POPULATION)
    if os.path.exists(path):
        return store.read_json(path)
    total = aggregates.compute(qualified_count(everyone.size),
                               [[1.0 if cid in qualified else 0.0] for cid in everyone.client_ids], secret)
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
    total = aggregates.compute(lm_data.oov_rate_spec(len(rates)), rates, secret)
    store.write_json(path, {"oov_rate": {"mean": float(total.values[0]) / total.devices,
                                         "stddev": float(total.stddev[0]) / total.devices,
                                         "devices": total.devices, "dp": True,
                                         "statistic": "mean over users of each user's OOV token share"}})
