"""The paper's subpopulation (`selection="paper"`) without its exact size: training accounted with a DP
lower bound of how many users qualified.

Under selection "paper" the server trains on the M users a selector picked, and training's ε is that of
sampling qN of them a round, as if who qualified were public (augenstein2020's accounting). An ε
computed over exactly M publishes M: through ε itself, the ledger record's population size, the
realistic-scale line. So the modeler learns M only as a DP count M̃ = M + N(0, σ²) of the qualified
users, released over all N users and charged to the ledger as its own release; training is accounted
with a lower bound computed from M̃ alone:

    M_low = max(qN, ⌊M̃ − t·σ⌋),   t = Φ⁻¹(1 − β),   β = `FAILURE_SHARE` × 0.01/N (a tenth of the
                                                        default δ, as the heavy hitters' threshold δ)

and M̃ < qN refuses the run (`PaperSelectionRefused`, which names M̃ ± σ, never M).

Formal guarantee, under the paper's neighbouring relation (one qualified user's data replaced, or for
Poisson sampling added or removed; who qualified is treated as public, as in the paper), composed with
the count's own release:
- Fixed-size rounds, M_low > qN: the server samples qN of the M qualified users; the record is T rounds
  of `SampledWithoutReplacementDpEvent(M_low, qN, G)`. dp_accounting's bound for sampling without
  replacement does not increase with the population size above qN (checked over z, qN and N in
  tests/test_attacks_paper_mode.py), so when M ≥ M_low it bounds the rounds the server runs
  (q = qN/M ≤ qN/M_low). P[M < M_low] ≤ P[M̃ − M > t·σ] = β for every dataset (the floor, and the
  clamp of the released M̃ to [0, N], never move a bound at or below M above it), and under the
  relation above M, hence this failure event, is the same for neighbouring datasets: the run is
  (ε, δ_RDP + β)-DP with ε at δ_RDP, whatever the server does in the failure event. β is the
  record's `extra_delta`, which the ledger adds to δ. That bound can exceed the one without
  amplification when M_low is close to qN (dp_accounting's bound for qN of qN + 1 is looser than
  q = 1's); the tighter of the two at the default δ is recorded.
- Fixed-size rounds, M_low = qN (or where q = 1 is tighter): T rounds of G alone, no amplification,
  which bounds any subsampling of the qualified users: no failure event, `extra_delta` 0. When fewer
  than qN users qualified the round takes all of them and qN − M users who did not
  (`pad_population`): those train on nothing and send zero updates, as under strict selection, so no
  round shows that fewer than qN qualified.
- Poisson rounds: every user of the population takes part with probability p = qN/M_low, a number of
  M̃ alone: the record `PoissonSampledDpEvent(p, G)` holds exactly, `extra_delta` 0. (A round then
  averages about qN·M/M_low updates over the fixed qN: a weak bound costs step size, not privacy.)
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import dp_accounting

from fedgen_debug.privacy.accounting import (ADD_REMOVE, POISSON, REPLACE_ONE, DPFedAvgPrivacy, default_delta,
                                             epsilon_of_events)
from fedgen_debug.validation import check_at_least, check_finite, check_positive

FAILURE_SHARE = 0.1   # β as a share of the default δ = 0.01/N
PAPER_SELECTION_WARNING = ("selection 'paper': the server learns which users qualified and ε is computed over "
                           "them only, as if membership were public (augenstein2020's accounting); how many "
                           "qualified is released only as a DP count, and ε is over a DP lower bound of it")


class PaperSelectionRefused(ValueError):
    """The DP count of qualified users is below the clients a round samples."""


def failure_probability(population_size: int) -> float:
    """β = `FAILURE_SHARE` × 0.01/N: P[M < M_low] for every dataset."""
    return FAILURE_SHARE * default_delta(population_size)


@dataclasses.dataclass(frozen=True)
class SubpopulationBound:
    """The released DP count of qualified users (`count` M̃ with noise std `stddev`, over
    `population_size` N, the ledger record's size) and what training over the qualified users is
    accounted with (the module docstring)."""

    count: float
    stddev: float
    population_size: int
    clients_per_round: int

    def __post_init__(self):
        check_finite("count", self.count)
        check_positive("stddev", self.stddev, note="a DP count")
        check_at_least("population_size", self.population_size, 1)
        check_at_least("clients_per_round", self.clients_per_round, 1)
        if self.clients_per_round > self.population_size:
            raise ValueError(f"clients_per_round must be <= population_size. Found {self.clients_per_round} > "
                             f"{self.population_size}.")
        if self.count < self.clients_per_round:
            raise PaperSelectionRefused(
                f"selection 'paper': the DP count of qualifying users is {self.count:.1f} ± {self.stddev:.1f}, "
                f"below the clients a round samples (qN = {self.clients_per_round}); refusing to train on too "
                "small a subpopulation. Sample fewer clients per round, or use selection 'strict' (every user may "
                "be sampled, ε over all of them).")

    @property
    def failure_probability(self) -> float:
        return failure_probability(self.population_size)

    @property
    def z_score(self) -> float:
        """t = Φ⁻¹(1 − β)."""
        return statistics.NormalDist().inv_cdf(1.0 - self.failure_probability)

    @property
    def lower_bound(self) -> int:
        """M_low = max(qN, ⌊M̃ − t·σ⌋)."""
        return max(self.clients_per_round, math.floor(self.count - self.z_score * self.stddev))

    def sampling_probability(self) -> float:
        """Poisson rounds: p = qN / M_low."""
        return self.clients_per_round / self.lower_bound

    def training_event(self, noise_multiplier: float, rounds: int, sampling: str, accounting: str,
                       round_gaussian: dp_accounting.DpEvent) -> tuple[dp_accounting.DpEvent, float]:
        """(the event of `rounds` rounds over the qualified users, the extra δ it needs): the module
        docstring's cases. `round_gaussian` is the event the DP query reports for one round."""
        if isinstance(round_gaussian, dp_accounting.NonPrivateDpEvent):
            return round_gaussian, 0.0
        unsampled = dp_accounting.SelfComposedDpEvent(round_gaussian, rounds)
        if self.lower_bound == self.clients_per_round:
            return unsampled, 0.0
        params = DPFedAvgPrivacy(self.clients_per_round, self.lower_bound, noise_multiplier, rounds, sampling,
                                 accounting)
        sampled = params.dp_event(round_gaussian)
        if sampling == POISSON:
            return sampled, 0.0
        # Both bound the rounds (the sampled one outside the failure event): the tighter at the default δ.
        delta = default_delta(self.population_size)
        relation = ADD_REMOVE if accounting == ADD_REMOVE else REPLACE_ONE
        with_sampling = epsilon_of_events([sampled], delta - self.failure_probability, relation).epsilon
        if with_sampling < epsilon_of_events([unsampled], delta, relation).epsilon:
            return sampled, self.failure_probability
        return unsampled, 0.0


def pad_population(qualified, everyone, clients_per_round: int) -> tuple[str, ...]:
    """The ids a round samples from: the qualified users, and when fewer than qN qualified, as many
    users who did not (sorted ids: which ones does not matter, they train on nothing) as reach qN."""
    qualified = sorted(set(qualified))
    chosen = set(qualified)
    missing = max(0, clients_per_round - len(qualified))
    return tuple(qualified + [cid for cid in sorted(everyone) if cid not in chosen][:missing])
