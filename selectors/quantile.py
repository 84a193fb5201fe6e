"""T4 thresholds from a DP quantile over users (tff.aggregators.PrivateQuantileEstimationProcess).

Each round, qN sampled users report whether their metric (e.g. accuracy) lies below the current
estimate; the noised count moves the estimate towards the target quantile (Andrew et al. 2021,
arithmetic update for values in [0, 1]). Records are ±0.5, so each round is a Gaussian mechanism
with sensitivity 0.5 and noise multiplier z = below_estimate_stddev / 0.5 on a without-replacement
sample: the estimate's privacy cost, recorded in the population's privacy ledger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import tensorflow_federated as tff
import tensorflow_privacy as tfp

from fedgen_debug.privacy.accounting import DPFedAvgPrivacy
from fedgen_debug.privacy.ledger import PrivacyRecord
from fedgen_debug.progress import progress
from fedgen_debug.training.sampling import sample_clients


@dataclasses.dataclass(frozen=True)
class QuantileConfig:
    target_quantile: float
    clients_per_round: int = 100
    rounds: int = 100
    noise_multiplier: float = 1.0
    learning_rate: float = 0.03
    initial_estimate: float = 0.5
    seed: int = 0

    def __post_init__(self):
        if not 0.0 < self.target_quantile < 1.0:
            raise ValueError(f"target_quantile must be in (0, 1). Found {self.target_quantile}.")
        if self.clients_per_round < 1 or self.rounds < 1:
            raise ValueError(f"clients_per_round and rounds must be >= 1. Found {self.clients_per_round}, "
                             f"{self.rounds}.")
        if self.noise_multiplier < 0:
            raise ValueError(f"noise_multiplier must be >= 0. Found {self.noise_multiplier}.")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0. Found {self.learning_rate}.")

    @property
    def below_estimate_stddev(self) -> float:
        return self.noise_multiplier * 0.5


@dataclasses.dataclass(frozen=True)
class QuantileEstimate:
    value: float
    trajectory: tuple[float, ...]
    privacy: PrivacyRecord


def dp_quantile(user_values: Mapping[str, float], config: QuantileConfig, population: str,
                label: str = "") -> QuantileEstimate:
    """Estimates the `target_quantile` of per-user values with DP; returns it with its privacy record.

    `user_values[client_id]` is computed on that client's device; only the noised count of users below
    the estimate is aggregated.
    """
    ids = sorted(user_values)
    if config.clients_per_round > len(ids):
        raise ValueError(f"clients_per_round ({config.clients_per_round}) exceeds the population ({len(ids)}).")
    query = tfp.QuantileEstimatorQuery(
        initial_estimate=config.initial_estimate, target_quantile=config.target_quantile,
        learning_rate=config.learning_rate, below_estimate_stddev=config.below_estimate_stddev,
        expected_num_records=config.clients_per_round, geometric_update=False,
    )
    process = tff.aggregators.PrivateQuantileEstimationProcess(query)
    state = process.initialize()
    trajectory = []
    for round_num in progress(range(config.rounds), desc="DP quantile", unit="round"):
        sampled = sample_clients(ids, config.clients_per_round, config.seed, round_num)
        state = process.next(state, [np.float32(user_values[c]) for c in sampled])
        trajectory.append(float(process.report(state)))
    accounting = DPFedAvgPrivacy(config.clients_per_round, len(ids), config.noise_multiplier, config.rounds)
    record = PrivacyRecord(population, len(ids), accounting.sampling, (accounting.dp_event(),),
                           label or f"T4 DP quantile q={config.target_quantile}")
    return QuantileEstimate(trajectory[-1], tuple(trajectory), record)
