"""(ε, δ) of DP-FedAvg training and DP aggregates through `dp_accounting` events (augenstein2020 App. A.1).

Each round samples qN of N users and releases the Gaussian-noised sum of their updates clipped to S
(noise std zS): `SampledWithoutReplacementDpEvent(N, qN, GaussianDpEvent(σ/Δ))` composed T times,
where Δ is the L2 sensitivity of the sum under the neighbouring relation.

Accounting conventions (`accounting`):
- `"replace-one"` (default for fixed-size rounds): neighbouring datasets differ in one user's data
  replaced. Fixed-size rounds need this relation (add/remove changes the round size), and there a sum
  of updates clipped to S moves by up to Δ = 2S, so the Gaussian event has σ/Δ = z/2. dp_accounting's
  `GaussianDpEvent` takes the noise in units of the sensitivity under either relation
  (google/differential-privacy#378), so whoever builds the event must divide by the right Δ.
- `"add-remove"` (Poisson sampling, `PoissonSampledDpEvent(q, ...)`): one user added or removed moves
  the sum by Δ = S: σ/Δ = z.
- `"paper"`: the convention of augenstein2020 / ramaswamy2020: fixed-size rounds with replace-one
  neighbours but Δ = S. It under-reports ε (Stack Overflow LMs: 9.22 reported, 58.8 with 2S, both
  with the paper's conversion); kept to reproduce the papers' tables, and always labelled.

Two conversions from RDP to (ε, δ):
- `"tight"` (default): dp_accounting's own conversion.
- `"paper"`: Mironov 2017, Prop. 3, ε = min over orders α of RDP(α) + log(1/δ)/(α − 1), over the
  paper's orders (1.1, 1.2, ..., 10.9, 12, 13, ..., 63, 128, 256, 512). With the paper's convention it
  reproduces the paper, e.g. its Stack Overflow LMs: qN=5000, N=342,477, z=1.0, T=2000, δ=2.92e-6 →
  ε = 9.22.

δ must stay below 1/N (a mechanism that publishes one random user's data outright is (0, 1/N)-DP);
the default is 0.01/N, as the paper's tables. A release with ε above `EPSILON_WARNING` is marked
wherever it is shown.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import dp_accounting
import numpy as np
from dp_accounting import rdp

from fedgen_debug.privacy import rdp_cache
from fedgen_debug.validation import check_at_least, check_in_range, check_non_negative, check_one_of, check_positive

WITHOUT_REPLACEMENT = "without-replacement"
POISSON = "poisson"
SAMPLINGS = (WITHOUT_REPLACEMENT, POISSON)
PAPER = "paper"
TIGHT = "tight"
CONVERSIONS = (PAPER, TIGHT)
REPLACE_ONE = "replace-one"
ADD_REMOVE = "add-remove"
PAPER_CONVENTION = "paper"
ACCOUNTINGS = (REPLACE_ONE, ADD_REMOVE, PAPER_CONVENTION)
RDP_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512])
# How `_computed_rdp_of_event` computes, in the disk cache's key: values computed another way are other values.
RDP_METHOD = "dp-accounting, sampled-without-replacement capped at unsampled"
EPSILON_WARNING = 10.0
EPSILON_DIGITS = 4   # significant digits of every ε shown to a person (`format_epsilon`)


def default_accounting(sampling: str) -> str:
    """The correct convention for a sampling scheme: replace-one for fixed-size rounds, add/remove for Poisson."""
    return ADD_REMOVE if sampling == POISSON else REPLACE_ONE


def check_accounting(sampling: str, accounting: str) -> None:
    check_one_of("accounting", accounting, ACCOUNTINGS)
    if (sampling == POISSON) != (accounting == ADD_REMOVE):
        raise ValueError(f"{sampling} sampling is accounted with {default_accounting(sampling)!r} "
                         f"(or 'paper' for fixed-size rounds). Found accounting {accounting!r}.")


def sum_sensitivity(clip: float, accounting: str) -> float:
    """L2 sensitivity of a sum of records in the L2 ball of radius `clip` (zero-centred)."""
    check_one_of("accounting", accounting, ACCOUNTINGS)
    return 2.0 * clip if accounting == REPLACE_ONE else clip


def gaussian_event(stddev: float, l2_sensitivity: float) -> dp_accounting.DpEvent:
    """The event of one Gaussian sum with noise std `stddev` and L2 sensitivity `l2_sensitivity`."""
    check_positive("l2_sensitivity", l2_sensitivity)
    check_non_negative("stddev", stddev, allow_inf=True)
    if stddev == 0:
        return dp_accounting.NonPrivateDpEvent()  # no noise: ε = ∞
    return dp_accounting.GaussianDpEvent(stddev / l2_sensitivity)


def neighboring_relation(accounting: str) -> dp_accounting.NeighboringRelation:
    if accounting == ADD_REMOVE:
        return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    return dp_accounting.NeighboringRelation.REPLACE_ONE


@dataclasses.dataclass(frozen=True)
class DPFedAvgPrivacy:
    """What the accountant needs to know about one DP-FedAvg training run."""

    clients_per_round: int
    population: int
    noise_multiplier: float
    rounds: int
    sampling: str = WITHOUT_REPLACEMENT
    accounting: str | None = None   # None: the correct one for `sampling` (default_accounting)

    def __post_init__(self):
        if self.accounting is None:
            object.__setattr__(self, "accounting", default_accounting(self.sampling))
        check_at_least("population (N)", self.population, 1)
        check_at_least("clients_per_round (qN)", self.clients_per_round, 1)
        if self.clients_per_round > self.population:
            raise ValueError(
                f"clients_per_round (qN) must be <= population (N), i.e. q <= 1. "
                f"Found qN={self.clients_per_round}, N={self.population}."
            )
        check_non_negative("noise_multiplier (z)", self.noise_multiplier)
        check_at_least("rounds (T)", self.rounds, 1)
        check_one_of("sampling", self.sampling, SAMPLINGS)
        check_accounting(self.sampling, self.accounting)

    @property
    def sampling_probability(self) -> float:
        return self.clients_per_round / self.population

    def round_gaussian(self) -> dp_accounting.DpEvent:
        """One round's Gaussian sum (noise zS on records clipped to S) under this accounting."""
        return gaussian_event(self.noise_multiplier, sum_sensitivity(1.0, self.accounting))

    def dp_event(self, round_gaussian: dp_accounting.DpEvent | None = None) -> dp_accounting.DpEvent:
        """T rounds of sampling + a Gaussian sum. `round_gaussian`: the event the DP query itself
        reports (what a training run records); by default the one these parameters imply."""
        gaussian = round_gaussian or self.round_gaussian()
        if isinstance(gaussian, dp_accounting.NonPrivateDpEvent):
            return gaussian
        if self.sampling == POISSON:
            round_event = dp_accounting.PoissonSampledDpEvent(self.sampling_probability, gaussian)
        else:
            round_event = dp_accounting.SampledWithoutReplacementDpEvent(
                self.population, self.clients_per_round, gaussian
            )
        return dp_accounting.SelfComposedDpEvent(round_event, self.rounds)


def default_delta(population: int) -> float:
    """δ = 0.01/N, as the paper's tables."""
    return 0.01 / population


def check_delta(delta: float, population: int | None = None) -> None:
    check_in_range("delta", delta, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    if population is not None and not delta < 1.0 / population:
        raise ValueError(f"delta must be < 1/N = {1.0 / population:.3g} (N = {population}): a larger δ allows "
                         f"publishing a random user's data. Found {delta}.")


@dataclasses.dataclass(frozen=True)
class PrivacyGuarantee:
    epsilon: float
    delta: float
    conversion: str
    accounting: str
    optimal_order: float

    @property
    def above_warning(self) -> bool:
        return not self.epsilon <= EPSILON_WARNING

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "above_warning": self.above_warning}


def _dp_accountings_rdp(event, accounting: str) -> np.ndarray:
    accountant = rdp.RdpAccountant(list(RDP_ORDERS), neighboring_relation(accounting))
    accountant.compose(event)
    return accountant.rdp


def _computed_rdp_of_event(event, accounting: str) -> np.ndarray:
    """dp_accounting's RDP, except that a round sampled without replacement is capped, order by order, at
    the RDP of the same round run on everyone. Why the cap holds: for replace-one neighbours the sampled
    round's outputs are the same mixture over subsets on both sides, each pair of components identical or
    replace-one neighbours, and Rényi divergence of two such mixtures is at most the largest pair's (joint
    convexity of exp((α − 1)·D_α)). Why it is needed: dp_accounting's bound for it (Wang, Balle,
    Kasiviswanathan 2019, Thm. 27) is looser than no sampling near q = 1, so ε at qN = N − 1 came out
    larger than at qN = N (476 against 283 at N = 100, z = 1, T = 100). The papers' convention keeps
    dp_accounting's bound as it is: it is there to reproduce their tables (Table 3's simulation row,
    ε = 9.99e6, was computed with it)."""
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * _computed_rdp_of_event(event.event, accounting)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum((_computed_rdp_of_event(e, accounting) for e in event.events), np.zeros(len(RDP_ORDERS)))
    values = _dp_accountings_rdp(event, accounting)
    if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent) and accounting != PAPER_CONVENTION:
        values = np.minimum(values, _dp_accountings_rdp(event.event, accounting))
    return values


@functools.lru_cache(maxsize=4096)
def _cached_rdp_of_event(event, accounting: str) -> np.ndarray:
    values = rdp_cache.rdp_values(event, accounting, RDP_ORDERS, lambda: _computed_rdp_of_event(event, accounting),
                                  method=RDP_METHOD)
    values.setflags(write=False)  # shared by every caller of the cache
    return values


def rdp_of_event(event, accounting: str = REPLACE_ONE) -> np.ndarray:
    """RDP of one event at `RDP_ORDERS`. Cached per (event, accounting), in the process and on disk
    (`rdp_cache`, for every later process): a sampled Gaussian's RDP is slow to compute
    (docs/performance.md), and a ledger recomposes the same events over and over (every release check,
    every command, every prefix of the app's ε-over-time curve). RDP composes by addition, so caching
    changes no value."""
    try:
        return _cached_rdp_of_event(event, accounting)
    except TypeError:  # an unhashable event (ComposedDpEvent holds a list): computed, not cached
        return _cached_rdp_of_event.__wrapped__(event, accounting)


def rdp_of_events(events, accounting: str = REPLACE_ONE) -> np.ndarray:
    """RDP of the composition of `events`: the sum of theirs, added in order as dp_accounting's
    `RdpAccountant.compose` does."""
    total = np.zeros(len(RDP_ORDERS))
    for event in events:
        total = total + rdp_of_event(event, accounting)
    return total


def epsilon_of_events(events, delta: float, accounting: str = REPLACE_ONE,
                      conversion: str = TIGHT) -> PrivacyGuarantee:
    """(ε, δ) of the composition of `events` (all accounted with `accounting`'s neighbouring relation)."""
    check_delta(delta)
    check_one_of("conversion", conversion, CONVERSIONS)
    orders, values = np.asarray(RDP_ORDERS), rdp_of_events(events, accounting)
    if conversion == TIGHT:
        eps, order = rdp.compute_epsilon(orders, values, delta)
    else:  # Prop. 3 over the same orders
        bounds = values + np.log(1.0 / delta) / (orders - 1.0)
        best = int(np.nanargmin(bounds))
        eps, order = float(bounds[best]), float(orders[best])
    return PrivacyGuarantee(float(eps), delta, conversion, accounting, float(order))


def default_conversion(accounting: str) -> str:
    """The paper's conversion under the paper's convention (to reproduce its tables), else dp_accounting's."""
    return PAPER if accounting == PAPER_CONVENTION else TIGHT


def dp_fedavg_epsilon(params: DPFedAvgPrivacy, delta: float, conversion: str | None = None) -> PrivacyGuarantee:
    """(ε, δ) of one DP-FedAvg run. Pure arithmetic: δ < 1/N is enforced where releases are checked
    (the ledger, the CLI), so the paper's simulation rows at δ = 1/N still reproduce."""
    return epsilon_of_events([params.dp_event()], delta, params.accounting,
                             conversion or default_conversion(params.accounting))


def format_epsilon(epsilon: float | None) -> str:
    """ε as every person-facing line shows it (CLI, logs, reports, the app): 4 significant digits
    (`EPSILON_DIGITS`, as '9.217', '58.84', '0.1234', '1.235e+04'), '∞' without noise, '–' when unknown.
    One rule for released, composed, budget and empirical ε alike, so the same ε reads the same
    wherever it appears and a release can be compared with its budget digit by digit."""
    if epsilon is None:
        return "–"
    if math.isinf(epsilon):
        return "∞" if epsilon > 0 else "-∞"
    return f"{epsilon:.{EPSILON_DIGITS}g}"


def weak_privacy() -> str:
    """How every report marks an ε above `EPSILON_WARNING`."""
    return f"WARNING: ε > {format_epsilon(EPSILON_WARNING)}, weak privacy"


def format_guarantee(guarantee: PrivacyGuarantee) -> str:
    """'ε = 4.2 at δ = 1e-05' (`format_epsilon`) with a loud mark above the warning threshold."""
    text = f"ε = {format_epsilon(guarantee.epsilon)} at δ = {guarantee.delta:.3g}"
    if guarantee.accounting == PAPER_CONVENTION:
        text += " (paper convention: sensitivity S under replace-one, under-reports ε)"
    if guarantee.above_warning:
        text += f"  [{weak_privacy()}]"
    return text
