"""DP aggregates of device statistics: what a modeler may learn about the devices besides the models.

Every device reports one record; the server releases only the Gaussian-noised sum, through the same
seeded tf-privacy query as training (`training.dp_query.SeededGaussianSumQuery`), with noise from the
run secret. Two record shapes:

- `BoundedSum`: d statistics, coordinate i clamped on the device to [0, upper_i] (e.g. a user's OOV
  rate in [0, 1], or the images a selector kept, capped at 512). Scaled to [0, 1]^d. Under replace-one
  the records are centred at 1/2 (norm ≤ √d/2 = clip) and the sum moves by at most the box's diagonal
  √d = 2·clip; the number of devices n is public there and adds back n/2. Under add/remove they stay
  uncentred (norm ≤ √d = clip = Δ).
- `Histogram`: a one-hot record over B bins (norm 1 = clip). Two users' records differ by at most √2
  under replace-one (nonnegative vectors of norm ≤ 1), 1 under add/remove.

`noise_multiplier` z is the noise std over the clip, as in training: the event is
`GaussianDpEvent(z·clip/Δ)`. Each release is one Gaussian over all devices (no sampling); charge
`aggregate_record(...)` (`privacy.run_ledger.charge`) before `compute`. Standard deviations of the released values are
returned with them, so reports can print "± σ".

A count over every user keeps the relative error it has at `REFERENCE_POPULATION` users (`scaled_noise`):
its noise grows with N, so its ε falls as 1/N, as a deployment's would (`privacy.deployment.releases_at`
counts it so). With a fixed z the T4 pair's four counts alone were ε = 5.0 at the paper's 3,400 writers;
scaled, 0.11 (issue 56: every release counts).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import dp_accounting
import numpy as np
import tensorflow as tf

from fedgen_debug.privacy.accounting import ACCOUNTINGS, REPLACE_ONE, sum_sensitivity
from fedgen_debug.privacy.ledger import PrivacyRecord
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.privacy.seeded_queries import SeededGaussianSumQuery
from fedgen_debug.validation import check_at_least, check_one_of, check_positive

REFERENCE_POPULATION = 100   # the demo's writers: where the image counts' z were chosen


def scaled_noise(noise_multiplier: float, population: int, reference: int = REFERENCE_POPULATION) -> float:
    """The z of a count over `population` users with the relative error `noise_multiplier` gives at
    `reference` users (the population it was chosen at; never less noise than that)."""
    check_positive("noise_multiplier", noise_multiplier)
    check_at_least("population", population, 1)
    check_at_least("reference", reference, 1)
    return noise_multiplier * max(1.0, population / reference)


def noised_sum(records, clip: float, stddev: float, l2_sensitivity: float, noise_seed) -> tuple[np.ndarray, dp_accounting.DpEvent]:
    """Σ clip(record) + N(0, stddev²) through the seeded tf-privacy query; returns (sum, its event)."""
    records = np.asarray(records, np.float32)
    if records.ndim != 2 or len(records) == 0:
        raise ValueError(f"records must be a non-empty [n, d] array. Found shape {records.shape}.")
    query = SeededGaussianSumQuery(clip, stddev, noise_seed, l2_sensitivity)
    sample_state = _clipped_sum(float(clip), records.shape[1])(records)
    result, _, event = query.get_noised_result(sample_state, query.initial_global_state())
    return result.numpy().astype(np.float64), event


@functools.lru_cache(maxsize=64)
def _clipped_sum(clip: float, dim: int):
    """Σ clip(record) over an [n, dim] float32 array by the query's own accumulate_record, one record at a
    time in order, inside one graph (a Python loop of eager calls was about ten times slower a record,
    with bit-identical sums, docs/performance.md). Traced once per (clip, dim) for any n: a dataset's
    reduce traced at each call was half a second of every release. Clipping needs no noise or seed."""
    query = SeededGaussianSumQuery(clip, 0.0, (0, 0), None)
    params = query.derive_sample_params(query.initial_global_state())

    @tf.function(input_signature=[tf.TensorSpec([None, dim], tf.float32)])
    def clipped_sum(records):
        initial = query.initial_sample_state(tf.TensorSpec([dim], tf.float32))
        return tf.data.Dataset.from_tensor_slices(records).reduce(
            initial, lambda state, record: query.accumulate_record(params, state, record))

    return clipped_sum


def _check(name: str, noise_multiplier: float, accounting: str) -> None:
    if not name:
        raise ValueError("an aggregate needs a name (it keys its noise stream and its ledger record).")
    check_positive("noise_multiplier", noise_multiplier)
    check_one_of("accounting", accounting, ACCOUNTINGS)


@dataclasses.dataclass(frozen=True)
class BoundedSum:
    name: str
    upper: tuple[float, ...]
    noise_multiplier: float
    accounting: str = REPLACE_ONE

    def __post_init__(self):
        _check(self.name, self.noise_multiplier, self.accounting)
        if not self.upper:
            raise ValueError(f"upper bounds must be a non-empty list. Found {self.upper}.")
        for bound in self.upper:
            check_positive("each upper bound", bound)

    @property
    def dim(self) -> int:
        return len(self.upper)

    @property
    def centred(self) -> bool:
        return self.accounting != "add-remove"

    @property
    def clip(self) -> float:
        d = len(self.upper)
        return math.sqrt(d) / 2 if self.centred else math.sqrt(d)

    @property
    def sensitivity(self) -> float:
        return sum_sensitivity(self.clip, self.accounting)

    @property
    def stddev(self) -> np.ndarray:
        """The noise std of each released sum, in the statistics' units."""
        return self.noise_multiplier * self.clip * np.asarray(self.upper, np.float64)

    def round_event(self) -> dp_accounting.DpEvent:
        return SeededGaussianSumQuery(self.clip, self.noise_multiplier * self.clip, (0, 0), self.sensitivity).round_event


@dataclasses.dataclass(frozen=True)
class Histogram:
    name: str
    num_bins: int
    noise_multiplier: float
    accounting: str = REPLACE_ONE

    def __post_init__(self):
        _check(self.name, self.noise_multiplier, self.accounting)
        check_at_least("num_bins", self.num_bins, 1)

    @property
    def sensitivity(self) -> float:
        return math.sqrt(2.0) if self.accounting != "add-remove" else 1.0

    @property
    def stddev(self) -> float:
        return self.noise_multiplier

    def round_event(self) -> dp_accounting.DpEvent:
        return SeededGaussianSumQuery(1.0, self.noise_multiplier, (0, 0), self.sensitivity).round_event


@dataclasses.dataclass(frozen=True)
class DpValue:
    """A released aggregate: the noised values, their noise std, the devices that reported."""

    values: np.ndarray
    stddev: np.ndarray
    devices: int

    def as_dict(self) -> dict:
        return {"values": [float(v) for v in self.values], "stddev": [float(s) for s in np.broadcast_to(
            self.stddev, self.values.shape)], "devices": self.devices, "dp": True}


def bounded_sum(records, spec: BoundedSum, noise_seed) -> DpValue:
    """The DP sum of `records` [n, d] (each device's statistics, clamped to [0, upper])."""
    upper = np.asarray(spec.upper, np.float64)
    records = np.asarray(records, np.float64).reshape(len(records), -1)
    if records.shape[1] != len(upper):
        raise ValueError(f"{spec.name}: records have {records.shape[1]} statistics, upper bounds {len(upper)}.")
    scaled = np.clip(records / upper, 0.0, 1.0) - (0.5 if spec.centred else 0.0)
    total, _ = noised_sum(scaled, spec.clip, spec.noise_multiplier * spec.clip, spec.sensitivity, noise_seed)
    if spec.centred:
        total = total + 0.5 * len(records)
    return DpValue(total * upper, spec.stddev, len(records))


def histogram(bins, spec: Histogram, noise_seed) -> DpValue:
    """The DP count of devices per bin; `bins` [n] holds each device's bin index."""
    bins = np.asarray(bins, np.int64)
    if bins.ndim != 1 or len(bins) == 0 or bins.min() < 0 or bins.max() >= spec.num_bins:
        raise ValueError(f"{spec.name}: bins must be a non-empty list of indices in [0, {spec.num_bins}).")
    one_hot = np.eye(spec.num_bins, dtype=np.float32)[bins]
    counts, _ = noised_sum(one_hot, 1.0, spec.noise_multiplier, spec.sensitivity, noise_seed)
    return DpValue(counts, np.full(spec.num_bins, spec.stddev), len(bins))


def aggregate_record(spec: BoundedSum | Histogram, population: str, devices: int, release_id: str,
                     source: str = "") -> PrivacyRecord:
    """The ledger record of one release of `spec` over `devices` devices (charge it first)."""
    return PrivacyRecord(population, devices, spec.accounting, (spec.round_event(),), f"DP aggregate {spec.name}",
                         release_id, source=source)


def compute(spec: BoundedSum | Histogram, records, secret: RunSecret) -> DpValue:
    """The aggregate, with noise from `secret` (stream "aggregate-noise", keyed by the spec's name)."""
    seed = secret.tf_seed("aggregate-noise", spec.name)
    return bounded_sum(records, spec, seed) if isinstance(spec, BoundedSum) else histogram(records, spec, seed)
