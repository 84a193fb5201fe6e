"""Char-LM data and analysis: words as byte sequences, joint probability (paper Eq. 1), sampling.

A word is [BOW] + its UTF-8 bytes + [EOW]. Its joint probability is the product of the model's
conditional probabilities of every symbol after BOW, end-of-word included, so shorter and longer
words compete on equal terms (paper Tables 2/8 rank generated OOV words by it).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.models.lm import BOW, EOW
from fedgen_debug.models.sampling import compiled_logits, sample_until


def encode_word(word: str) -> list[int]:
    return [BOW] + list(word.encode("utf-8")) + [EOW]


def decode_symbols(symbols) -> str:
    return bytes(s for s in symbols if s < 256).decode("utf-8", errors="replace")


def word_sequences(words, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """x = BOW + bytes, y = bytes + EOW, padded with EOW (and cut) to max_length."""
    x = np.full((len(words), max_length), EOW, np.int32)
    y = np.full((len(words), max_length), EOW, np.int32)
    for i, word in enumerate(words):
        ids = encode_word(word)[: max_length + 1]
        x[i, : len(ids) - 1] = ids[:-1]
        y[i, : len(ids) - 1] = ids[1:]
    return x, y


# Words scored in one call: the model's output is words × symbols × 258 floats.
JOINT_BATCH = 512


def joint_log_prob(model: tf.keras.Model, words) -> np.ndarray:
    """log p(word) = Σ_t log p(s_{t+1} | s_0..s_t), over bytes and the end-of-word (Eq. 1);
    `JOINT_BATCH` words at a time through one traced graph of the model."""
    words = list(words)
    if not words:
        return np.zeros(0)
    logits_of = compiled_logits(model)
    return np.concatenate([_joint_log_prob(logits_of, words[first: first + JOINT_BATCH])
                           for first in range(0, len(words), JOINT_BATCH)])


def _joint_log_prob(logits_of, words) -> np.ndarray:
    encoded = [encode_word(w) for w in words]
    length = max(len(e) for e in encoded) - 1
    x = np.full((len(words), length), EOW, np.int32)
    y = np.full((len(words), length), EOW, np.int32)
    for i, e in enumerate(encoded):
        x[i, : len(e) - 1] = e[:-1]
        y[i, : len(e) - 1] = e[1:]
    log_probs = tf.nn.log_softmax(logits_of(x), axis=-1).numpy()
    scored = np.take_along_axis(log_probs, y[..., None], axis=-1)[..., 0]
    made = np.arange(length)[None, :] < np.array([len(e) - 1 for e in encoded])[:, None]
    return (scored * made).sum(axis=1, dtype=np.float64)


def sample_words(model: tf.keras.Model, count: int, max_length: int, seed: int) -> list[str]:
    """Monte-Carlo samples; each stops at its first end-of-word (or after max_length bytes)."""
    return [decode_symbols(w) for w in sample_until(model, BOW, EOW, [BOW], count, max_length + 1, seed)]
