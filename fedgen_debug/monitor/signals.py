"""Drift between two periods' auxiliaries (issue 14), from their generated samples only: for text, the
Jensen-Shannon divergence between the generated OOV-word distributions; for images, the Fréchet
distance between the two periods' samples in the primary model's feature space
(`analysis.gan_analysis.frechet_distance`). The verdict statistics of one period (dark-background
share, space mass, position-1 OOV) are the analyses' own.

Drift is measured against a reference of clean periods (`drift_reference`). A calibration period (the
plan declares them clean) is compared with the pool of the *other* calibration periods (leave one out),
so its drift is a fair sample of what clean periods show and its threshold is not biased low by comparing
a period with itself. A later period is compared with the pool of the last clean periods before it, as
many as a calibration period is compared with (the calibration periods minus one): a clean period is one
whose auxiliary had every signal within its threshold and had learned its data.

Why not the calibration periods for ever: an auxiliary retrained period after period keeps learning, so
its samples move away from its first periods with no change in the data. Measured against periods 1-4
(2026-11-29, `evaluation/monitor_fleet.py`): a clean FEMNIST GAN fleet's Fréchet drift rose 7.7, 4.4, 3.5,
5.2 → 14.2 by period 7 and 21-24 in periods 8-12, over its threshold of 10.7 in 5 of 8 clean periods; the
Tiny Shakespeare char-LM's JS drift reached 0.068 after a fix (threshold 0.0084). Against the last clean
periods the drift measures what changed since the data was last clean; a bug keeps its periods out of the
reference, so the drift of a bug that stays stays high, and clears once the samples are back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np


OTHER = "\x00other"   # the bucket of words outside the `top` most frequent (no sampled word has a NUL)


def keep_top(counts_a: Mapping[str, float], counts_b: Mapping[str, float], top: int):
    """Both tables over the `top` most frequent words of the two together, the rest summed in one
    bucket: most sampled OOV words are seen once, and their noise would swamp a divergence over all of
    them (measured: 0.17 bits between clean periods at 300 samples); a glued word that matters is
    frequent, so it stays."""
    total = {w: float(counts_a.get(w, 0.0)) + float(counts_b.get(w, 0.0)) for w in set(counts_a) | set(counts_b)}
    kept = set(sorted(total, key=lambda w: (-total[w], w))[:top])

    def fold(counts):
        out = {w: float(c) for w, c in counts.items() if w in kept}
        out[OTHER] = sum(float(c) for w, c in counts.items() if w not in kept)
        return out

    return fold(counts_a), fold(counts_b)


def js_divergence(counts_a: Mapping[str, float], counts_b: Mapping[str, float], smoothing: float = 0.5,
                  top: int | None = None) -> float:
    """Jensen-Shannon divergence in bits (0 = same distribution, 1 = disjoint) between two word-count
    tables, each smoothed with `smoothing` pseudo-counts over the union of their words (a word one
    period never sampled is rare, not impossible); with `top`, over the `top` most frequent words and
    one bucket for the rest (`keep_top`)."""
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0. Found {smoothing}.")
    if top is not None:
        if top < 1:
            raise ValueError(f"top must be >= 1. Found {top}.")
        counts_a, counts_b = keep_top(counts_a, counts_b, top)
    words = sorted(set(counts_a) | set(counts_b))
    if not words:
        raise ValueError("js_divergence needs at least one word.")

    def distribution(counts):
        weights = [float(counts.get(w, 0.0)) + smoothing for w in words]
        if any(w < 0 for w in weights):
            raise ValueError("word counts must be >= 0.")
        total = sum(weights)
        if total <= 0:
            raise ValueError("a word-count table is empty.")
        return [w / total for w in weights]

    p, q = distribution(counts_a), distribution(counts_b)
    m = [(a + b) / 2 for a, b in zip(p, q)]

    def kl(x, y):
        return sum(a * math.log2(a / b) for a, b in zip(x, y) if a > 0)

    return max(0.0, (kl(p, m) + kl(q, m)) / 2)


def drift_reference(period: int, calibration_periods: int, clean: list[int]) -> list[int]:
    """The periods `period`'s drift is measured against: for a calibration period the other calibration
    periods; for a later one the last `calibration_periods - 1` periods of `clean` before it (the
    calibration periods are clean by the plan's word, so there are always some)."""
    if calibration_periods < 2:
        raise ValueError(f"drift needs at least 2 calibration periods. Found {calibration_periods}.")
    calibration = list(range(1, calibration_periods + 1))
    if period <= calibration_periods:
        return [p for p in calibration if p != period]
    before = sorted({p for p in clean if p < period} | set(calibration))
    return before[-(calibration_periods - 1):]


def reference_drift(inputs: Mapping[int, object], reference: list[int], period: int,
                    distance: Callable[[object, object], float], pool: Callable[[list], object]) -> float:
    """`distance(inputs[period], pool(reference periods other than period))`."""
    others = [inputs[p] for p in reference if p != period]
    if not others:
        raise ValueError(f"drift needs a reference period other than {period}. Found {reference}.")
    return float(distance(inputs[period], pool(others)))


def pool_counts(tables: list[Mapping[str, float]]) -> dict[str, float]:
    pooled: dict[str, float] = {}
    for table in tables:
        for word, count in table.items():
            pooled[word] = pooled.get(word, 0.0) + float(count)
    return pooled


def pool_features(arrays: list) -> np.ndarray:
    return np.concatenate([np.asarray(a) for a in arrays])
