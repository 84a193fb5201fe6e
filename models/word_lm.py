"""A small word-level LSTM language model (Keras) and Monte-Carlo sentence sampling.

Used as an auxiliary LM where a compact model suffices (e.g. the T6 experiment); the paper's
CIFG-LSTM word- and char-LMs arrive with the LM scenario and share the sampling code.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.data.text import Vocabulary


def build_word_lm(num_ids: int, embedding_dim: int = 32, units: int = 64, seed: int = 0) -> tf.keras.Model:
    init = tf.keras.initializers.GlorotUniform(seed=seed)
    return tf.keras.Sequential([
        tf.keras.layers.Embedding(num_ids, embedding_dim, embeddings_initializer=tf.keras.initializers.RandomUniform(
            -0.05, 0.05, seed=seed)),
        tf.keras.layers.LSTM(units, return_sequences=True, kernel_initializer=init,
                             recurrent_initializer=tf.keras.initializers.Orthogonal(seed=seed)),
        tf.keras.layers.Dense(num_ids, kernel_initializer=init),
    ])


def sequences(token_lists, vocab: Vocabulary, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Next-word training pairs: x = bos + tokens, y = tokens + eos, both padded/cut to max_length."""
    x = np.full((len(token_lists), max_length), vocab.pad_id, np.int32)
    y = np.full((len(token_lists), max_length), vocab.pad_id, np.int32)
    for i, tokens in enumerate(token_lists):
        ids = [vocab.bos_id] + vocab.ids(tokens) + [vocab.eos_id]
        ids = ids[: max_length + 1]
        x[i, : len(ids) - 1] = ids[:-1]
        y[i, : len(ids) - 1] = ids[1:]
    return x, y


def sample_sentences(model: tf.keras.Model, vocab: Vocabulary, count: int, max_length: int,
                     seed: int) -> list[list[int]]:
    """`count` Monte-Carlo samples of id sequences (bos excluded), each stopped at eos or max_length."""
    rng = np.random.default_rng(seed)
    prefix = np.full((count, 1), vocab.bos_id, np.int32)
    done = np.zeros(count, bool)
    out = [[] for _ in range(count)]
    for _ in range(max_length):
        logits = model(prefix, training=False)[:, -1, :].numpy().astype(np.float64)
        logits[:, vocab.pad_id] = -np.inf  # never generate padding
        logits[:, vocab.bos_id] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        cumulative = probs.cumsum(axis=1)
        next_ids = (cumulative < rng.random((count, 1))).sum(axis=1).clip(0, probs.shape[1] - 1)
        for i, token in enumerate(next_ids):
            if not done[i]:
                if token == vocab.eos_id:
                    done[i] = True
                else:
                    out[i].append(int(token))
        if done.all():
            break
        prefix = np.concatenate([prefix, next_ids[:, None].astype(np.int32)], axis=1)
    return out
