"""Monte-Carlo sampling from an autoregressive Keras LM (shared by the word- and char-LMs)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def sample_until(model: tf.keras.Model, start_id: int, stop_id: int, banned_ids, count: int, max_steps: int,
                 seed: int) -> list[list[int]]:
    """`count` sequences drawn symbol by symbol after `start_id`; each ends at its first `stop_id` (not
    included) or after `max_steps` symbols. `banned_ids` are never drawn (e.g. padding, the start)."""
    rng = np.random.default_rng(seed)
    prefix = np.full((count, 1), start_id, np.int32)
    done = np.zeros(count, bool)
    out = [[] for _ in range(count)]
    for _ in range(max_steps):
        logits = model(prefix, training=False)[:, -1, :].numpy().astype(np.float64)
        logits[:, list(banned_ids)] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        # Inverse-CDF draw, one uniform per sequence.
        draws = (probs.cumsum(axis=1) < rng.random((count, 1))).sum(axis=1).clip(0, probs.shape[1] - 1)
        for i, symbol in enumerate(draws):
            if done[i]:
                continue
            if symbol == stop_id:
                done[i] = True
            else:
                out[i].append(int(symbol))
        if done.all():
            break
        prefix = np.concatenate([prefix, draws[:, None].astype(np.int32)], axis=1)
    return out
