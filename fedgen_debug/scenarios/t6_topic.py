"""T6 end to end: a topic dense in private text but absent from public text.

Public text (another seed's users, with every sentence about `topic` removed) trains the public
unigram LM that devices use to score their sentences. Two auxiliary word-LMs are trained with
DP-FedAvg on the same private users: one on T1 (all sentences), one on T6 (sentences with
p_public ≤ eps). Sampling both shows how much more often the T6 auxiliary writes about the topic.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.data import client_data as cd
from fedgen_debug.data import synthetic_text
from fedgen_debug.data.text import Vocabulary, tokenize
from fedgen_debug.models.word_lm import build_word_lm, sample_sentences, sequences
from fedgen_debug.selectors.base import Selector
from fedgen_debug.selectors.criteria import PublicDensity, RandomExamples
from fedgen_debug.selectors.population import select_population
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
    noise_multiplier: float = 0.0
    samples: int = 1000

    def __post_init__(self):
        if self.topic not in synthetic_text.TOPICS:
            raise ValueError(f"topic must be one of {sorted(synthetic_text.TOPICS)}. Found {self.topic!r}.")


def _topic_words(topic: str) -> set[str]:
    return {t for w in synthetic_text.TOPICS[topic].split() for t in tokenize(w)}


def _train_auxiliary(name, selector: Selector, tokens_by_client, log_probs_by_client, vocab, config, run_root):
    def device_view(cid):
        return ({"text": np.arange(len(tokens_by_client[cid]))}, {"public_log_prob": log_probs_by_client[cid]})

    population = select_population(sorted(tokens_by_client), device_view, selector)
    kept = {}
    for cid in population.client_ids:
        mask = selector(cid, *device_view(cid))
        kept[cid] = [t for t, m in zip(tokens_by_client[cid], mask) if m]
    kept_tokens = [vocab.ids([w])[0] for toks in kept.values() for t in toks for w in t]
    training = TrainingConfig(
        rounds=config.rounds,
        dp=DPConfig(min(config.clients_per_round, population.size), config.noise_multiplier, config.clip),
        client=ClientConfig(epochs=config.client_epochs, batch_size=8, learning_rate=config.client_learning_rate),
        server=ServerConfig("sgd", 1.0), seed=config.seed, checkpoint_every=max(1, config.rounds // 4),
    )
    spec = dp_fedavg.ModelSpec(
        lambda: build_word_lm(vocab.num_ids, seed=config.seed),
        lambda: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        (tf.TensorSpec([None, config.max_length], tf.int32), tf.TensorSpec([None, config.max_length], tf.int32)),
    )

    def client_dataset(cid):
        x, y = sequences(kept[cid], vocab, config.max_length)
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices((x, y)), training)

    result = loop.train(dp_fedavg.build_process(spec, training), population.client_ids, client_dataset, training,
                        os.path.join(run_root, name), f"synthetic-text:users={config.users},seed={config.seed}",
                        label=f"T6 experiment: {name} auxiliary")
    model = spec.keras_model_fn()
    model.build((None, config.max_length))
    result.model_weights.assign_weights_to(model)
    samples = sample_sentences(model, vocab, config.samples, config.max_length, seed=config.seed)
    return population, samples, kept_tokens


def run(config: T6Config, run_root: str) -> dict:
    private = synthetic_text.generate(synthetic_text.SyntheticTextConfig(users=config.users, seed=config.seed))
    public_data = synthetic_text.generate(
        synthetic_text.SyntheticTextConfig(users=config.public_users, seed=config.seed + 1000))
    topic = _topic_words(config.topic)
    public = [t for t in (tokenize(s) for s in synthetic_text.all_sentences(public_data)) if not topic & set(t)]
    public_lm = PublicWordLM.fit(public)

    tokens_by_client = {cid: [tokenize(s.decode()) for s in cd.client_numpy(private, cid)["text"]]
                        for cid in private.client_ids}
    # On each device: its sentences' public density, from the shipped public LM.
    log_probs = {cid: np.array([public_lm.log_prob_per_token(t) for t in toks]) for cid, toks in tokens_by_client.items()}
    vocab = Vocabulary.from_sentences((t for toks in tokens_by_client.values() for t in toks), config.vocab_size)
    in_vocab_topic = {w for w in topic if w in vocab}

    report = {"topic": config.topic, "topic_words_in_vocab": sorted(in_vocab_topic)}
    for name, selector in (("t1", RandomExamples()), ("t6", PublicDensity(config.eps))):
        population, samples, kept_tokens = _train_auxiliary(name, selector, tokens_by_client, log_probs, vocab,
                                                             config, run_root)
        topic_ids = {vocab.ids([w])[0] for w in in_vocab_topic}
        tokens = [i for s in samples for i in s]
        report[name] = {
            "population": population.as_dict(),
            # Evaluation only (the simulation can look): how topical the selected training data is.
            "training_data_topic_token_rate": sum(i in topic_ids for i in kept_tokens) / max(len(kept_tokens), 1),
            "generated_tokens": len(tokens),
            "topic_token_rate": sum(i in topic_ids for i in tokens) / max(len(tokens), 1),
            "sentences_with_topic": sum(any(i in topic_ids for i in s) for s in samples) / len(samples),
        }
    report["topic_rate_ratio_t6_over_t1"] = report["t6"]["topic_token_rate"] / max(report["t1"]["topic_token_rate"], 1e-9)
    return report
