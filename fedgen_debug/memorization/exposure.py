"""Exposure of a canary (Carlini et al. 2019, "The Secret Sharer", §4).

A canary is one filling of a format's holes, drawn uniformly from the space R of all fillings. Its
score is the model's log-perplexity in bits, Px(s) = −Σ_t log2 P(s_t | s_<t), over the canary's tokens.
The rank of the canary is its position among all fillings ordered by score (1 = the model prefers it
to every other filling); its exposure is

    exposure = log2 |R| − log2 rank,

0 for a canary the model does not favour over a random filling, log2 |R| for one it ranks first.

|R| is usually too large to enumerate (10⁴⁵ for five random words of a 10K vocabulary), so:
- `exposure_interpolation`: the canary's quantile in R estimated from m reference fillings drawn
  uniformly from R: with c of them scoring ≤ the canary its rank among the m + 1 is 1 + c and
  exposure ≈ log2(m + 1) − log2(1 + c). When the references are every other filling (m + 1 = |R|)
  this is exact. Ties count against the canary (≤), so a model that scores every filling alike gives
  exposure 0, never a false alarm. It saturates at log2(m + 1): m references cannot resolve a
  quantile below 1/(m + 1).
- `exposure_extrapolation`: the reference scores' distribution fitted by a skew-normal (scipy's
  `skewnorm.fit`, as Carlini §4.3 and TF-Privacy's `compute_exposure_extrapolation`), exposure
  = −log2 CDF(canary score). It reaches past log2 m where interpolation saturates.

Both are written here: TF-Privacy's `secret_sharer` is not in its 0.9.0 wheel.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def log_perplexity_bits(token_log_probs) -> np.ndarray:
    """Σ_t −log2 P(s_t | s_<t) per row, from natural-log token probabilities [n, L] (or one row [L])."""
    values = np.asarray(token_log_probs, np.float64)
    return -np.sum(values, axis=-1) / math.log(2.0)


def _scores(name: str, values) -> np.ndarray:
    array = np.atleast_1d(np.asarray(values, np.float64))
    if array.ndim != 1 or not len(array):
        raise ValueError(f"{name} must be a non-empty 1-D array of scores. Found shape {array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite. Found {array[~np.isfinite(array)][:3]}.")
    return array


def rank(canary_scores, reference_scores) -> np.ndarray:
    """1 + the number of references scoring ≤ each canary (lower score = more likely; ties count against
    the canary). Sorted once, so 2·10⁶ references cost one sort."""
    canaries = _scores("canary_scores", canary_scores)
    references = np.sort(_scores("reference_scores", reference_scores))
    return 1 + np.searchsorted(references, canaries, side="right")


def exposure_interpolation(canary_scores, reference_scores) -> np.ndarray:
    """log2(m + 1) − log2 rank per canary, rank = 1 + the m references scoring ≤ it."""
    references = _scores("reference_scores", reference_scores)
    return exposure_from_rank(rank(canary_scores, references), len(references))


def exposure_from_rank(ranks, num_references: int) -> np.ndarray:
    """The interpolated exposure of canaries whose rank among `num_references` references is known:
    for callers that count instead of keeping millions of scores."""
    ranks = np.atleast_1d(np.asarray(ranks, np.float64))
    m = int(num_references)
    if m < 1:
        raise ValueError(f"num_references must be >= 1. Found {num_references}.")
    if np.any(ranks < 1) or np.any(ranks > m + 1):
        raise ValueError(f"ranks must be in [1, {m + 1}]. Found {ranks[(ranks < 1) | (ranks > m + 1)][:3]}.")
    return np.log2(m + 1.0) - np.log2(ranks)


def exposure_extrapolation(canary_scores, reference_scores) -> np.ndarray:
    """−log2 CDF(canary score) under a skew-normal fitted to the reference scores."""
    canaries = _scores("canary_scores", canary_scores)
    references = _scores("reference_scores", reference_scores)
    if len(references) < 3 or np.ptp(references) == 0:
        raise ValueError("the skew-normal fit needs at least 3 reference scores that are not all equal.")
    shape, loc, scale = stats.skewnorm.fit(references)
    # logcdf, not log(cdf): a memorized canary sits far in the left tail where cdf underflows to 0.
    return -stats.skewnorm.logcdf(canaries, shape, loc, scale) / math.log(2.0)
