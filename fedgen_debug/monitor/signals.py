"""Drift between periods' auxiliaries (issue 14), from their generated samples only: the Fréchet distance
between a GAN's samples in the primary model's feature space (`analysis.gan_analysis.frechet_distance`).
The verdict statistics of one period (dark-background share, space mass, position-1 OOV) are the
analyses' own. (The char-LM's drift, a Jensen-Shannon divergence of the sampled OOV words, is not computed
any more: `measure` says why.)

Drift is measured against a reference of clean periods (`drift_reference`). A calibration period (the
plan declares them clean) is compared with the pool of the *other* calibration periods (leave one out),
so its drift is a fair sample of what clean periods show and its threshold is not biased low by comparing
a period with itself. A later period is compared with the pool of the last clean periods before it, as
many as a calibration period is compared with (the calibration periods minus one): a clean period is one
whose auxiliary had every signal within its threshold and had learned its data.

Why not the calibration periods for ever: an auxiliary retrained period after period keeps learning, so
its samples move away from its first periods with no change in the data. Measured against periods 1-4
(2026-11-29, `evaluation/monitor_fleet.py`): a clean FEMNIST GAN fleet's Fréchet drift rose 7.7, 4.4, 3.5,
5.2 → 14.2 by period 7 and 21-24 in periods 8-12, over its threshold of 10.7 in 5 of 8 clean periods
(15 of 24 in three clean fleets; 1 of 24 against the last clean periods of the same models). Against the last clean
periods the drift measures what changed since the data was last clean; a bug keeps its periods out of the
reference, so the drift of a bug that stays stays high, and clears once the samples are back. An
auxiliary restarted from scratch (`runner`: it had stopped learning) is a new model, which differs from
the long-trained one by itself (measured: a FEMNIST GAN restarted after a fix sat at Fréchet drift 105 for
3 periods against its predecessor's clean periods, threshold 53): its drift is measured against its own
clean periods, and not at all until it has one; its verdict statistics carry the detection meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np


def drift_reference(period: int, calibration_periods: int, clean: list[int], since: int = 1) -> list[int]:
    """The periods `period`'s drift is measured against: for a calibration period the other calibration
    periods; for a later one the last `calibration_periods - 1` periods of `clean` (and of the calibration
    periods, clean by the plan's word) from `since`, where the auxiliary last started from scratch, up to
    `period`. A restarted auxiliary is a new model: it is compared with its own clean periods only, and
    until it has one there is nothing to compare it with (an empty reference: its drift is not measured)."""
    if calibration_periods < 2:
        raise ValueError(f"drift needs at least 2 calibration periods. Found {calibration_periods}.")
    calibration = list(range(1, calibration_periods + 1))
    if period <= calibration_periods:
        return [p for p in calibration if p != period]
    pool = sorted({p for p in [*clean, *calibration] if since <= p < period})
    return pool[-(calibration_periods - 1):]


def reference_drift(inputs: Mapping[int, object], reference: list[int], period: int,
                    distance: Callable[[object, object], float], pool: Callable[[list], object]) -> float:
    """`distance(inputs[period], pool(reference periods other than period))`."""
    others = [inputs[p] for p in reference if p != period]
    if not others:
        raise ValueError(f"drift needs a reference period other than {period}. Found {reference}.")
    return float(distance(inputs[period], pool(others)))


def pool_features(arrays: list) -> np.ndarray:
    return np.concatenate([np.asarray(a) for a in arrays])
