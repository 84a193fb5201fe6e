"""(ε, δ) of DP-FedAvg training through `dp_accounting` events (augenstein2020 App. A.1).

Each round samples qN of N users and releases the Gaussian-noised average of their clipped updates:
`SampledWithoutReplacementDpEvent(N, qN, GaussianDpEvent(z))` composed T times, accounted with
replace-one neighbours (fixed-size rounds, the paper's Algorithm 2); `sampling="poisson"` accounts for
`PoissonSampledDpEvent(q, ...)` with add/remove-one neighbours instead.

Two conversions from RDP to (ε, δ):
- `"paper"`: Mironov 2017, Prop. 3, ε = min over orders α of RDP(α) + log(1/δ)/(α − 1), over the
  paper's orders (1.1, 1.2, ..., 10.9, 12, 13, ..., 63, 128, 256, 512). Reproduces the paper, e.g. its
  Stack Overflow LMs: qN=5000, N=342,477, z=1.0, T=2000, δ=2.92e-6 → ε = 9.22.
- `"tight"`: dp_accounting's own (tighter) conversion over the same orders.
"""

from __future__ import annotations

import dataclasses
import math

import dp_accounting
import numpy as np
from dp_accounting import rdp

WITHOUT_REPLACEMENT = "without-replacement"
POISSON = "poisson"
SAMPLINGS = (WITHOUT_REPLACEMENT, POISSON)
PAPER = "paper"
TIGHT = "tight"
CONVERSIONS = (PAPER, TIGHT)
RDP_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512])


@dataclasses.dataclass(frozen=True)
class DPFedAvgPrivacy:
    """What the accountant needs to know about one DP-FedAvg training run."""

    clients_per_round: int
    population: int
    noise_multiplier: float
    rounds: int
    sampling: str = WITHOUT_REPLACEMENT

    def __post_init__(self):
        if self.population < 1:
            raise ValueError(f"population (N) must be >= 1. Found {self.population}.")
        if self.clients_per_round < 1:
            raise ValueError(f"clients_per_round (qN) must be >= 1. Found {self.clients_per_round}.")
        if self.clients_per_round > self.population:
            raise ValueError(
                f"clients_per_round (qN) must be <= population (N), i.e. q <= 1. "
                f"Found qN={self.clients_per_round}, N={self.population}."
            )
        if not self.noise_multiplier >= 0 or math.isinf(self.noise_multiplier):
            raise ValueError(f"noise_multiplier (z) must be >= 0. Found {self.noise_multiplier}.")
        if self.rounds < 1:
            raise ValueError(f"rounds (T) must be >= 1. Found {self.rounds}.")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}. Found {self.sampling!r}.")

    @property
    def sampling_probability(self) -> float:
        return self.clients_per_round / self.population

    def dp_event(self) -> dp_accounting.DpEvent:
        if self.noise_multiplier == 0:
            return dp_accounting.NonPrivateDpEvent()  # no noise: ε = ∞
        gaussian = dp_accounting.GaussianDpEvent(self.noise_multiplier)
        if self.sampling == POISSON:
            round_event = dp_accounting.PoissonSampledDpEvent(self.sampling_probability, gaussian)
        else:
            round_event = dp_accounting.SampledWithoutReplacementDpEvent(
                self.population, self.clients_per_round, gaussian
            )
        return dp_accounting.SelfComposedDpEvent(round_event, self.rounds)


def neighboring_relation(sampling: str) -> dp_accounting.NeighboringRelation:
    if sampling == POISSON:
        return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    return dp_accounting.NeighboringRelation.REPLACE_ONE


def check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1). Found {delta}.")


@dataclasses.dataclass(frozen=True)
class PrivacyGuarantee:
    epsilon: float
    delta: float
    conversion: str
    sampling: str
    optimal_order: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def epsilon_of_events(events, delta: float, sampling: str = WITHOUT_REPLACEMENT,
                      conversion: str = PAPER) -> PrivacyGuarantee:
    """(ε, δ) of the composition of `events` (all accounted with `sampling`'s neighbouring relation)."""
    check_delta(delta)
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion must be one of {CONVERSIONS}. Found {conversion!r}.")
    accountant = rdp.RdpAccountant(list(RDP_ORDERS), neighboring_relation(sampling))
    for event in events:
        accountant.compose(event)
    if conversion == TIGHT:
        eps, order = accountant.get_epsilon_and_optimal_order(delta)
    else:
        orders = np.asarray(RDP_ORDERS)
        # The accountant exposes RDP only through its conversion; the pinned dp_accounting 0.4.3 keeps
        # the per-order values in `_rdp`, which Prop. 3 needs directly.
        bounds = np.asarray(accountant._rdp) + np.log(1.0 / delta) / (orders - 1.0)  # noqa: SLF001
        best = int(np.nanargmin(bounds))
        eps, order = float(bounds[best]), float(orders[best])
    return PrivacyGuarantee(float(eps), delta, conversion, sampling, float(order))


def dp_fedavg_epsilon(params: DPFedAvgPrivacy, delta: float, conversion: str = PAPER) -> PrivacyGuarantee:
    """(ε, δ) of one DP-FedAvg run."""
    return epsilon_of_events([params.dp_event()], delta, params.sampling, conversion)
