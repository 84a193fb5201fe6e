"""T6 end to end: a topic dense in private text but absent from public text.

Public text (another seed's users, with every sentence about `topic` removed) trains the public
unigram LM that devices use to score their sentences. Two auxiliary word-LMs are trained with
DP-FedAvg on the same private users: one on T1 (all sentences), one on T6 (sentences with
p_public ≤ eps). Sampling both shows how much more often the T6 auxiliary writes about the topic.

Both train under strict selection (every user may be sampled; a device without a selected sentence
sends a zero update). Their vocabulary is the public text's words plus DP heavy hitters of what the
devices selected with T6 (`privacy.heavy_hitters`): the words public text lacks are what T6 is for,
and no single user can put one in. The report's `ground_truth` (selected sizes, topic rates of the
training data) is simulation bookkeeping for evaluation; the run store releases none of it.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

from fedgen_debug import rng_streams
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import synthetic_text
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.data.text import Vocabulary, tokenize
from fedgen_debug.models.sampling import expected_symbol_rate
from fedgen_debug.models.word_lm import build_word_lm, sample_sentences, sequences
from fedgen_debug.privacy.heavy_hitters import HeavyHittersConfig, dp_heavy_hitters, heavy_hitters_record, user_top_words
from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import charge, open_run
from fedgen_debug.selectors.base import Selector
from fedgen_debug.selectors.criteria import PublicDensity, RandomExamples
from fedgen_debug.selectors.public_lm import PublicWordLM
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig


@dataclasses.dataclass(frozen=True)
class T6Config:
    users: int = 200
    public_users: int = 200
    seed: int = 0
    topic: str = "databases"
    eps: float = 1e-5
    vocab_size: int = 1500
    max_length: int = 14
    rounds: int = 30
    clients_per_round: int = 20
    client_epochs: int = 3
    client_learning_rate: float = 1.0
    clip: float = 1.0
    noise_multiplier: float = 0.3
    # The DP vocabulary: each device contributes its k most frequent words missing from the public
    # vocabulary (it was shipped with it). At N = 120 a topic word is held by ~10 users: σ = 0.5 and
    # k = 8 let words held by ≥ 9 pass (σ/Δ = 0.35 → ε ≈ 15 for the vocabulary alone; σ = 2, k = 16,
    # the LM scenario's, would need ~40 users).
    vocab_noise_multiplier: float = 0.5
    vocab_words_per_user: int = 8
    samples: int = 1000

    def __post_init__(self):
        if self.topic not in synthetic_text.TOPICS:
            raise ValueError(f"topic must be one of {sorted(synthetic_text.TOPICS)}. Found {self.topic!r}.")


def _topic_words(topic: str) -> set[str]:
    return {t for w in synthetic_text.TOPICS[topic].split() for t in tokenize(w)}


def _selected(selector: Selector, tokens_by_client, log_probs_by_client) -> dict:
    """Each device's selected sentences (on the device; empty if it opts out)."""
    kept = {}
    for cid, tokens in tokens_by_client.items():
        mask = selector(cid, {"text": np.arange(len(tokens))}, {"public_log_prob": log_probs_by_client[cid]})
        kept[cid] = [] if mask is None else [t for t, m in zip(tokens, mask) if m]
    return kept


def _vocabulary(public_sentences, t6_selected: dict, config: T6Config, population: str, run_dir: str) -> Vocabulary:
    """DP heavy hitters of the words the T6-selected sentences hold beyond the public vocabulary, then
    the public words (released once)."""
    hh = HeavyHittersConfig(size=config.vocab_size, max_words_per_user=config.vocab_words_per_user,
                            noise_multiplier=config.vocab_noise_multiplier, threshold_delta=0.001 / len(t6_selected))
    public = Vocabulary.from_sentences(public_sentences, config.vocab_size).words
    config_json = {"t6-vocabulary": dataclasses.asdict(config)}
    with store.exclusive(run_dir):
        secret, _ = open_run(run_dir, config_json)
        charge(heavy_hitters_record(hh, population, len(t6_selected), f"{secret.run_id}/vocabulary", run_dir), run_dir,
               secret=secret, config_json=config_json)
        path = store.released(run_dir, store.VOCAB)
        if not os.path.exists(path):
            shipped = set(public)
            top = {cid: user_top_words((w for t in toks for w in t if w not in shipped), hh.max_words_per_user)
                   for cid, toks in t6_selected.items()}
            found = dp_heavy_hitters(top, hh, secret.tf_seed("vocabulary-noise"))
            words = list(dict.fromkeys(list(found) + list(public)))[:config.vocab_size]
            store.write_json(path, {"words": words, "source": "public text + DP heavy hitters of T6-selected text"})
        return Vocabulary(tuple(store.read_json(path)["words"]))


def _train_auxiliary(name, kept: dict, vocab, config, run_root, population: str):
    kept_tokens = [vocab.ids([w])[0] for toks in kept.values() for t in toks for w in t]
    everyone = loop.Population(population, tuple(kept))
    training = TrainingConfig(
        rounds=config.rounds,
        dp=DPConfig(config.clients_per_round, config.noise_multiplier, config.clip),
        client=ClientConfig(epochs=config.client_epochs, batch_size=8, learning_rate=config.client_learning_rate),
        server=ServerConfig("sgd", 1.0), seed=config.seed, checkpoint_every=max(1, config.rounds // 4),
    )
    spec = dp_fedavg.ModelSpec(
        lambda: build_word_lm(vocab.num_ids, seed=config.seed),
        lambda: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        (tf.TensorSpec([None, config.max_length], tf.int32), tf.TensorSpec([None, config.max_length], tf.int32)),
    )

    def client_dataset(cid, round_num):
        x, y = sequences(kept[cid], vocab, config.max_length)
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices((x, y)), training)

    result = loop.train(lambda secret: dp_fedavg.build_process(spec, training, secret.tf_seed("dp-noise")), everyone,
                        client_dataset, training, os.path.join(run_root, name), label=f"T6 experiment: {name} auxiliary")
    model = spec.keras_model_fn()
    model.build((None, config.max_length))
    result.model_weights.assign_weights_to(model)
    samples = sample_sentences(model, vocab, config.samples, config.max_length, seed=config.seed)
    ground_truth = {"clients_selecting": sum(bool(k) for k in kept.values()), "clients": len(kept),
                    "examples_kept": sum(len(k) for k in kept.values())}
    return ground_truth, samples, kept_tokens, result, model


def run(config: T6Config, run_root: str) -> dict:
    private = synthetic_text.generate(synthetic_text.SyntheticTextConfig(users=config.users, seed=config.seed))
    public_data = synthetic_text.generate(
        synthetic_text.SyntheticTextConfig(users=config.public_users, seed=config.seed + rng_streams.PUBLIC_STAND_IN_SEED_OFFSET))
    topic = _topic_words(config.topic)
    public = [t for t in (tokenize(s) for s in synthetic_text.all_sentences(public_data)) if not topic & set(t)]
    public_lm = PublicWordLM.fit(public)

    tokens_by_client = {cid: [tokenize(s.decode()) for s in cd.client_numpy(private, cid)["text"]]
                        for cid in private.client_ids}
    # On each device: its sentences' public density, from the shipped public LM.
    log_probs = {cid: np.array([public_lm.log_prob_per_token(t) for t in toks]) for cid, toks in tokens_by_client.items()}
    population = population_key(f"synthetic-text:users={config.users},seed={config.seed}", private.client_ids)
    selected = {name: _selected(selector, tokens_by_client, log_probs)
                for name, selector in (("t1", RandomExamples()), ("t6", PublicDensity(config.eps)))}
    vocab = _vocabulary(public, selected["t6"], config, population, os.path.join(run_root, "vocabulary"))
    in_vocab_topic = {w for w in topic if w in vocab}

    report = {"topic": config.topic, "topic_words_in_vocab": sorted(in_vocab_topic)}
    for name in ("t1", "t6"):
        ground_truth, samples, kept_tokens, result, model = _train_auxiliary(name, selected[name], vocab, config,
                                                                             run_root, population)
        topic_ids = {vocab.ids([w])[0] for w in in_vocab_topic}
        tokens = [i for s in samples for i in s]
        report[name] = {
            "epsilon": result.run_record.guarantee().epsilon,
            # Simulation ground truth, for evaluation only: how much and how topical the selected data is.
            "ground_truth": ground_truth,
            "training_data_topic_token_rate": sum(i in topic_ids for i in kept_tokens) / max(len(kept_tokens), 1),
            "generated_tokens": len(tokens),
            "topic_token_rate": sum(i in topic_ids for i in tokens) / max(len(tokens), 1),
            # The same rate from the model's probabilities along its samples: no draw noise on ~10 words.
            "expected_topic_token_rate": expected_symbol_rate(model, vocab.bos_id, vocab.eos_id,
                                                              [vocab.pad_id, vocab.bos_id], samples,
                                                              config.max_length, topic_ids),
            "sentences_with_topic": sum(any(i in topic_ids for i in s) for s in samples) / len(samples),
        }
    report["topic_rate_ratio_t6_over_t1"] = (report["t6"]["expected_topic_token_rate"]
                                             / max(report["t1"]["expected_topic_token_rate"], 1e-12))
    return report
