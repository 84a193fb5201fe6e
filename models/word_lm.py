"""A small word-level LSTM language model (Keras) and Monte-Carlo sentence sampling.

Used as an auxiliary LM where a compact model suffices (e.g. the T6 experiment); the paper's
CIFG-LSTM word- and char-LMs arrive with the LM scenario and share the sampling code.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.data.text import Vocabulary
from fedgen_debug.models.sampling import sample_until


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
    return sample_until(model, vocab.bos_id, vocab.eos_id, [vocab.pad_id, vocab.bos_id], count, max_length, seed)
