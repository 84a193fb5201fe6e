"""Monte-Carlo sampling from an autoregressive Keras LM (shared by the word- and char-LMs)."""

from __future__ import annotations

import weakref
from typing import Callable

import numpy as np
import tensorflow as tf


# Sequences drawn in one batch: the model's output for a batch is batch × steps × symbols floats
# (20,000 word-LM phrases at once, 8 steps of a 10K vocabulary: 6.4 GB, killed on a 24 GiB machine).
SAMPLING_BATCH = 2000


# A model's traced logits, made once and kept while the model lives: an analysis scores words with one
# model more than once (the top words, then the same words under the baseline), and each new
# `tf.function` traced the model again (TensorFlow's retracing warning in benchmarks/diagnose.py).
_COMPILED_LOGITS: "weakref.WeakKeyDictionary[tf.keras.Model, Callable]" = weakref.WeakKeyDictionary()


def compiled_logits(model: tf.keras.Model) -> Callable[[np.ndarray], tf.Tensor]:
    """`model(x, training=False)` for int32 [batch, time] ids of any shape, as one traced graph. Why:
    called eagerly, Keras drives each recurrent layer's loop from Python, a few small ops at a time
    (most of the LM analysis' time; docs/performance.md, "The LM stage's set-up and analysis"). Traced
    with an unknown time length, the same layers run `tf.while_loop` in the graph. The same function
    for the same model object (traced once); it holds the model weakly, so the model is not kept alive."""
    if model not in _COMPILED_LOGITS:
        held = weakref.ref(model)
        _COMPILED_LOGITS[model] = tf.function(lambda ids: held()(ids, training=False),
                                              input_signature=[tf.TensorSpec([None, None], tf.int32)])
    return _COMPILED_LOGITS[model]


def sample_until(model: tf.keras.Model, start_id: int, stop_id: int, banned_ids, count: int, max_steps: int,
                 seed: int) -> list[list[int]]:
    """`count` sequences drawn symbol by symbol after `start_id`; each ends at its first `stop_id` (not
    included) or after `max_steps` symbols. `banned_ids` are never drawn (e.g. padding, the start).
    Drawn `SAMPLING_BATCH` at a time from one random stream."""
    rng = np.random.default_rng(seed)
    draw = _draw_next(model, banned_ids)
    out = []
    for first in range(0, count, SAMPLING_BATCH):
        out.extend(_sample_batch(draw, start_id, stop_id, min(SAMPLING_BATCH, count - first), max_steps, rng))
    return out


def _draw_next(model: tf.keras.Model, banned_ids) -> Callable[[np.ndarray, np.ndarray], tf.Tensor]:
    """A traced function (prefixes [n, t], uniforms [n]) → the symbol drawn after each prefix [n]: the
    inverse CDF at its uniform of the model's next-symbol distribution without `banned_ids`."""
    last_position = _last_position_only(model)
    banned = tf.constant(sorted({int(i) for i in banned_ids}), tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.float64)])
    def draw(prefix, uniforms):
        logits = _next_logits(model, prefix) if last_position else model(prefix, training=False)[:, -1]
        return inverse_cdf(logits, banned, uniforms)

    return draw


# Symbols summed per block when drawing by inverse CDF: a cumulative sum over the blocks' totals finds
# each row's block, one over that block's symbols the symbol. A cumulative sum over a word-LM's 10K
# symbols took several times as long as exp and the block sums (docs/performance.md).
CDF_BLOCK = 128


def inverse_cdf(logits: tf.Tensor, banned: tf.Tensor, uniforms: tf.Tensor) -> tf.Tensor:
    """For each row of `logits` [n, symbols], the first symbol whose cumulative probability (softmax in
    float64, `banned` symbols at 0) reaches the row's uniform in [0, 1). Thresholds are scaled by the
    row's total instead of normalizing, and clipped into the chosen block's (0, total]: a symbol of
    probability 0 never raises the cumulative sum, so no rounding can make a banned symbol (or one past
    the last allowed) the first to reach the threshold."""
    weights = tf.cast(logits, tf.float64)
    allowed = tf.reduce_all(tf.range(tf.shape(weights)[1])[:, None] != banned[None, :], axis=1)
    weights = tf.where(allowed[None, :], weights, tf.constant(-np.inf, tf.float64))
    weights = tf.exp(weights - tf.reduce_max(weights, axis=1, keepdims=True))
    symbols = tf.shape(weights)[1]
    blocks = (symbols + CDF_BLOCK - 1) // CDF_BLOCK
    by_block = tf.reshape(tf.pad(weights, [[0, 0], [0, blocks * CDF_BLOCK - symbols]]), [-1, blocks, CDF_BLOCK])
    through_block = tf.cumsum(tf.reduce_sum(by_block, axis=2), axis=1)
    tiny = np.finfo(np.float64).tiny
    threshold = tf.maximum(uniforms * through_block[:, -1], tiny)
    block = tf.minimum(tf.reduce_sum(tf.cast(through_block < threshold[:, None], tf.int32), axis=1), blocks - 1)
    before = tf.where(block > 0, tf.gather(through_block, tf.maximum(block - 1, 0), batch_dims=1), 0.0)
    within = tf.cumsum(tf.gather(by_block, block, batch_dims=1), axis=1)
    rest = tf.clip_by_value(threshold - before, tiny, within[:, -1])
    return block * CDF_BLOCK + tf.reduce_sum(tf.cast(within < rest[:, None], tf.int32), axis=1)


def _next_logits(model: tf.keras.Model, prefix: tf.Tensor) -> tf.Tensor:
    """The model's logits [n, symbols] for the symbol after each prefix [n, t]. The layers up to the
    last recurrent one run on the whole prefix, the per-position layers after it (the output layer)
    on the last position only: on every position of every prefix, the word-LM's 10K-way output layer
    was most of its sampling time. A Sequential model without recurrent layers is per-position
    throughout, so it sees only the last symbol."""
    layers = model.layers
    mixing = [i for i, layer in enumerate(layers) if isinstance(layer, tf.keras.layers.RNN)]
    x = prefix if mixing else prefix[:, -1]
    for i, layer in enumerate(layers):
        x = layer(x, training=False)
        if mixing and i == mixing[-1]:
            x = x[:, -1]
    return x


def _last_position_only(model: tf.keras.Model) -> bool:
    """Whether `_next_logits` may run the model: a Sequential model of per-position layers and RNNs
    returning sequences. Any other model (another layer kind, a mask, an RNN that returns only its
    last output) is called whole."""
    return isinstance(model, tf.keras.Sequential) and all(_per_position_or_recurrent(layer) for layer in model.layers)


def _per_position_or_recurrent(layer) -> bool:
    if isinstance(layer, tf.keras.layers.Embedding):
        return not layer.mask_zero  # conservative: Keras carries the mask between layer calls as well
    if isinstance(layer, tf.keras.layers.RNN):
        return layer.return_sequences
    return isinstance(layer, (tf.keras.layers.Dense, tf.keras.layers.Dropout, tf.keras.layers.Activation))


def _sample_batch(draw, start_id, stop_id, count, max_steps, rng) -> list[list[int]]:
    prefix = np.full((count, 1), start_id, np.int32)
    done = np.zeros(count, bool)
    out = [[] for _ in range(count)]
    for _ in range(max_steps):
        active = np.flatnonzero(~done)
        uniforms = rng.random((count, 1))[active, 0]  # one per sequence, drawn for finished ones too
        # Only the unfinished sequences' next symbols (the model treats each row on its own).
        draws = np.full(count, stop_id)
        draws[active] = draw(prefix[active], uniforms).numpy()
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
