"""The significance tests behind the automatic verdicts (LM and GAN analyses)."""

from __future__ import annotations

import math

Z_THRESHOLD = 3.0  # one-sided p ≈ 0.0013: a verdict says "suspected" only above it
EMPTY_SELECTION_SIGMAS = 2.0   # a DP count under this many noise σ cannot be told from zero


def indistinguishable_from_empty(count: float, stddev: float) -> bool:
    """Is a DP count of selected users too small to tell the selection from an empty one? (Measured: a
    DP 1st percentile of 184 FEMNIST writers without a bug held 0-1 of them; that GAN drew noise.)"""
    return count < EMPTY_SELECTION_SIGMAS * stddev


def z_two_proportions(k1: int, n1: int, k2: int, n2: int) -> float:
    """z of p1 > p2 (pooled standard error); 0 when both proportions are 0 or 1."""
    p = (k1 + k2) / (n1 + n2)
    se = math.sqrt(max(p * (1 - p) * (1 / n1 + 1 / n2), 1e-12))
    return (k1 / n1 - k2 / n2) / se


def z_one_proportion(k: int, n: int, p0: float) -> float:
    """z of p > p0 for k successes out of n."""
    return (k / n - p0) / math.sqrt(p0 * (1 - p0) / n)
