"""Monte-Carlo sampling from an autoregressive Keras LM (shared by the word- and char-LMs)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


# Sequences drawn in one batch: the model's output for a batch is batch × steps × symbols floats
# (20,000 word-LM phrases at once, 8 steps of a 10K vocabulary: 6.4 GB, killed on a 24 GiB machine).
SAMPLING_BATCH = 2000


def sample_until(model: tf.keras.Model, start_id: int, stop_id: int, banned_ids, count: int, max_steps: int,
                 seed: int) -> list[list[int]]:
    """`count` sequences drawn symbol by symbol after `start_id`; each ends at its first `stop_id` (not
    included) or after `max_steps` symbols. `banned_ids` are never drawn (e.g. padding, the start).
    Drawn `SAMPLING_BATCH` at a time from one random stream."""
    rng = np.random.default_rng(seed)
    out = []
    for first in range(0, count, SAMPLING_BATCH):
        out.extend(_sample_batch(model, start_id, stop_id, banned_ids, min(SAMPLING_BATCH, count - first),
                                 max_steps, rng))
    return out


def _next_logits(model: tf.keras.Model, prefix: np.ndarray) -> np.ndarray:
    """The model's logits [n, symbols] for the symbol after each prefix [n, t]. The layers up to the
    last recurrent one run on the whole prefix, the per-position layers after it (the output layer)
    on the last position only: on every position of every prefix, the word-LM's 10K-way output layer
    was most of its sampling time. A Sequential model without recurrent layers is per-position
    throughout, so it sees only the last symbol. Any other model (another layer kind, a mask, an RNN
    that returns only its last output) is called whole."""
    layers = model.layers
    if not (isinstance(model, tf.keras.Sequential) and all(_per_position_or_recurrent(layer) for layer in layers)):
        return model(prefix, training=False)[:, -1].numpy()
    mixing = [i for i, layer in enumerate(layers) if isinstance(layer, tf.keras.layers.RNN)]
    x = tf.constant(prefix) if mixing else tf.constant(prefix[:, -1])
    for i, layer in enumerate(layers):
        x = layer(x, training=False)
        if mixing and i == mixing[-1]:
            x = x[:, -1]
    return x.numpy()


def _per_position_or_recurrent(layer) -> bool:
    if isinstance(layer, tf.keras.layers.Embedding):
        return not layer.mask_zero  # conservative: Keras carries the mask between layer calls as well
    if isinstance(layer, tf.keras.layers.RNN):
        return layer.return_sequences
    return isinstance(layer, (tf.keras.layers.Dense, tf.keras.layers.Dropout, tf.keras.layers.Activation))


def _sample_batch(model, start_id, stop_id, banned_ids, count, max_steps, rng) -> list[list[int]]:
    prefix = np.full((count, 1), start_id, np.int32)
    done = np.zeros(count, bool)
    out = [[] for _ in range(count)]
    for _ in range(max_steps):
        active = np.flatnonzero(~done)
        uniforms = rng.random((count, 1))[active]  # one per sequence, drawn for finished ones too
        # Only the unfinished sequences' next symbols (the model treats each row on its own).
        logits = _next_logits(model, prefix[active]).astype(np.float64)
        logits[:, list(banned_ids)] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        # Inverse-CDF draw.
        draws = np.full(count, stop_id)
        draws[active] = (probs.cumsum(axis=1) < uniforms).sum(axis=1).clip(0, probs.shape[1] - 1)
        for i in active:
            if draws[i] == stop_id:
                done[i] = True
            else:
                out[i].append(int(draws[i]))
        if done.all():
            break
        prefix = np.concatenate([prefix, draws[:, None].astype(np.int32)], axis=1)
    return out


def expected_symbol_rate(model: tf.keras.Model, start_id: int, stop_id: int, banned_ids, samples: list[list[int]],
                         max_steps: int, symbol_ids) -> float:
    """The rate at which the model writes any of `symbol_ids` in sequences drawn as by `sample_until`,
    as expected counts along `samples` (that function's output): Σ p(symbol | prefix) / Σ p(not stop |
    prefix) over every draw. Counting the symbols in the samples estimates the same rate with the noise
    of the draws on top (a rare word appears a handful of times in a thousand sentences)."""
    ids = sorted(set(int(i) for i in symbol_ids))
    if not samples or not ids:
        return 0.0
    expected = [_expected_counts(model, start_id, stop_id, banned_ids, samples[first: first + SAMPLING_BATCH],
                                 max_steps, ids) for first in range(0, len(samples), SAMPLING_BATCH)]
    return float(sum(e[0] for e in expected) / sum(e[1] for e in expected))


def _expected_counts(model, start_id, stop_id, banned_ids, samples, max_steps, ids) -> tuple[float, float]:
    """(expected symbols, expected tokens) over the draws of `samples`."""
    draws = [min(len(s) + 1, max_steps) for s in samples]  # the stop symbol's draw counts, if one was made
    prefix = np.full((len(samples), max(draws)), start_id, np.int32)
    for row, sample in enumerate(samples):
        prefix[row, 1: draws[row]] = sample[: draws[row] - 1]
    logits = model(prefix, training=False).numpy().astype(np.float64)
    logits[..., list(banned_ids)] = -np.inf
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    made = np.arange(prefix.shape[1])[None, :] < np.array(draws)[:, None]
    return float((probs[..., ids].sum(axis=-1) * made).sum()), float(((1.0 - probs[..., stop_id]) * made).sum())
