"""The significance tests behind the automatic verdicts (LM and GAN analyses)."""

from __future__ import annotations

import math

import numpy as np

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


def feature_statistics(features) -> tuple[np.ndarray, np.ndarray]:
    """(mean [d], covariance [d, d]) of features [n, d], n >= 2."""
    features = np.asarray(features, np.float64)
    if features.ndim != 2 or len(features) < 2:
        raise ValueError(f"features must be [n, d] with n >= 2. Found shape {list(features.shape)}.")
    return features.mean(axis=0), np.cov(features, rowvar=False).reshape(features.shape[1], -1)


def nearest_neighbour_distances(features, reference=None) -> np.ndarray:
    """Per row i of `features` [n, d]: the Euclidean distance to its nearest other row, or, given
    `reference` [m, d], to its nearest reference row j ≠ i (row i of both is one item: itself, or a
    transform of it, `analysis.image_symmetry`)."""
    features = np.asarray(features, np.float64)
    reference = features if reference is None else np.asarray(reference, np.float64)
    if features.ndim != 2 or len(features) < 2 or reference.ndim != 2 or reference.shape[1] != features.shape[1]:
        raise ValueError(f"features must be [n, d] with n >= 2 (reference [m, d]). Found shapes "
                         f"{list(features.shape)}, {list(reference.shape)}.")
    distances = (np.sum(features ** 2, axis=1)[:, None] + np.sum(reference ** 2, axis=1)[None, :]
                 - 2.0 * features @ reference.T)
    same = np.arange(min(len(features), len(reference)))
    distances[same, same] = np.inf
    return np.sqrt(np.clip(distances.min(axis=1), 0.0, None))
