"""Drift between two periods' auxiliaries (issue 14), from their generated samples only: for text, the
Jensen-Shannon divergence between the generated OOV-word distributions; for images, the Fréchet
distance between the two periods' samples in the primary model's feature space
(`scenarios.gan_analysis.frechet_distance`). The verdict statistics of one period (dark-background
share, space mass, position-1 OOV) are the analyses' own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def js_divergence(counts_a: Mapping[str, float], counts_b: Mapping[str, float], smoothing: float = 0.5) -> float:
    """Jensen-Shannon divergence in bits (0 = same distribution, 1 = disjoint) between two word-count
    tables, each smoothed with `smoothing` pseudo-counts over the union of their words (a word one
    period never sampled is rare, not impossible)."""
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0. Found {smoothing}.")
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
