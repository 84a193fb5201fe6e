"""Empirical ε from canary clients (Andrew et al. 2023, "One-shot empirical privacy estimation for
federated learning"): how distinguishable the released model makes a client that took part.

Each canary client sends a random unit direction (scaled to the clip); after training, the cosine of
the final model delta with each inserted direction is one draw of the "seen" statistic. A direction no
client sent has a cosine distributed as that of a random unit vector in d dimensions, ≈ N(0, 1/d) for
d ≥ 1000 (the "null"). Two numbers come out:

- `estimate`: Gaussians fitted to the seen cosines and the null, and the ε at which the pair is
  (ε, δ)-indistinguishable (the paper's one-shot estimate; not a bound, a point estimate).
- `lower_bound`: a hypothesis test with a threshold at each seen cosine — exact false-positive rate
  from the null, Jeffreys upper confidence limit (1 − α) on the false-negative rate — turned into ε by
  the DP inequalities TPR ≤ e^ε FPR + δ and TNR ≤ e^ε FNR + δ (Jagielski et al. 2020). With probability
  ≥ 1 − α over the canaries, the run's true ε for one client is at least this.
Both compare with the accountant's ε of the same run: neither may exceed it if the accounting holds
(up to the estimate's sampling error).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.optimize
import scipy.stats

MIN_DIMENSION = 1000  # below, the cosine null is not Gaussian enough for N(0, 1/d)


def _hockey_stick(mu_p, sd_p, mu_q, sd_q, epsilon: float) -> float:
    """sup_A P(A) − e^ε Q(A) for P = N(mu_p, sd_p²), Q = N(mu_q, sd_q²): the δ at which P is
    (ε, δ)-close to Q. A is where log p/q > ε, a quadratic inequality a y² + b y + c > 0 in y."""
    a = 0.5 / sd_q ** 2 - 0.5 / sd_p ** 2
    b = mu_p / sd_p ** 2 - mu_q / sd_q ** 2
    c = 0.5 * (mu_q / sd_q) ** 2 - 0.5 * (mu_p / sd_p) ** 2 + math.log(sd_q / sd_p) - epsilon

    def mass(mu, sd, lo, hi):  # P(lo < Y < hi), accurate in both tails
        return max(scipy.stats.norm.cdf(hi, mu, sd) - scipy.stats.norm.cdf(lo, mu, sd),
                   scipy.stats.norm.sf(lo, mu, sd) - scipy.stats.norm.sf(hi, mu, sd), 0.0)

    if abs(a) < 1e-12 * max(abs(b), 1.0) / max(sd_p, sd_q) ** 2:
        if b == 0:
            return 0.0 if c <= 0 else 1.0 - math.exp(epsilon)
        regions = [(-c / b, math.inf)] if b > 0 else [(-math.inf, -c / b)]
    else:
        disc = b * b - 4 * a * c
        if disc <= 0:
            regions = [(-math.inf, math.inf)] if a > 0 else []
        else:
            r1, r2 = sorted(((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)))
            regions = [(-math.inf, r1), (r2, math.inf)] if a > 0 else [(r1, r2)]
    p = sum(mass(mu_p, sd_p, lo, hi) for lo, hi in regions)
    q = sum(mass(mu_q, sd_q, lo, hi) for lo, hi in regions)
    if q == 0.0:
        return p
    return max(p - math.exp(min(epsilon, 700.0)) * q, 0.0)


def epsilon_two_gaussians(mu0: float, sd0: float, mu1: float, sd1: float, delta: float) -> float:
    """The smallest ε ≥ 0 such that N(mu0, sd0²) and N(mu1, sd1²) are (ε, δ)-indistinguishable (both
    directions). Equal stds: the Gaussian mechanism with sensitivity |mu1 − mu0| and noise sd."""
    if not (sd0 > 0 and sd1 > 0):
        raise ValueError(f"standard deviations must be > 0. Found {sd0}, {sd1}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1). Found {delta}.")

    def excess(eps):
        return max(_hockey_stick(mu0, sd0, mu1, sd1, eps), _hockey_stick(mu1, sd1, mu0, sd0, eps)) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(scipy.optimize.brentq(excess, hi / 2 if hi > 1 else 0.0, hi, xtol=1e-9, rtol=1e-9))


def jeffreys_upper(successes, trials: int, alpha: float):
    """One-sided (1 − alpha) Jeffreys upper confidence limit of a binomial proportion."""
    successes = np.asarray(successes, float)
    upper = scipy.stats.beta.ppf(1 - alpha, successes + 0.5, trials - successes + 0.5)
    return np.where(successes >= trials, 1.0, upper)


def epsilon_lower_bound(seen_cosines, dimension: int, delta: float, alpha: float = 0.05) -> float:
    """The best ε the threshold tests "cosine ≥ t" prove with confidence 1 − alpha, t over the seen
    cosines, the null N(0, 1/d) exact (so only the false-negative rate carries a confidence limit)."""
    seen = np.sort(np.asarray(seen_cosines, float))
    if seen.size == 0:
        raise ValueError("no seen canary cosines.")
    _check_dimension(dimension)
    # At threshold t = seen[i], the i cosines below it are the test's false negatives.
    log_fpr = scipy.stats.norm.logsf(seen, scale=dimension ** -0.5)
    fnr = jeffreys_upper(np.arange(seen.size), seen.size, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr_side = np.log(1 - delta - fnr) - log_fpr
        tnr_side = np.log(1 - delta - np.exp(log_fpr)) - np.log(fnr)
    bounds = np.fmax(np.nan_to_num(tpr_side, nan=-np.inf), np.nan_to_num(tnr_side, nan=-np.inf))
    return float(max(np.max(bounds), 0.0))


def _check_dimension(dimension: int) -> None:
    if dimension < MIN_DIMENSION:
        raise ValueError(f"the model has {dimension} parameters; the Gaussian null of the cosine needs "
                         f">= {MIN_DIMENSION}.")


@dataclasses.dataclass(frozen=True)
class EmpiricalEpsilon:
    estimate: float
    lower_bound: float
    alpha: float
    delta: float
    seen_mean: float
    seen_std: float
    null_std: float
    seen: int
    dimension: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def empirical_epsilon(seen_cosines, dimension: int, delta: float, alpha: float = 0.05) -> EmpiricalEpsilon:
    """Both numbers for one run: the canaries' cosines with the final model delta, d its parameters."""
    seen = np.asarray(seen_cosines, float)
    if seen.size < 2:
        raise ValueError(f"need at least 2 seen canaries to fit a Gaussian. Found {seen.size}.")
    _check_dimension(dimension)
    null_std = dimension ** -0.5
    mean, std = float(seen.mean()), float(seen.std(ddof=1))
    estimate = epsilon_two_gaussians(0.0, null_std, mean, max(std, 1e-12), delta)
    return EmpiricalEpsilon(estimate, epsilon_lower_bound(seen, dimension, delta, alpha), alpha, delta, mean, std,
                            null_std, int(seen.size), int(dimension))
