"""Deployment-equivalent privacy (issue 56): what a simulation's noise is worth at a real deployment.

DP-FedAvg adds N(0, (zS)²) to the sum of the qN sampled users' clipped updates and applies their mean,
whose noise has standard deviation σ = zS/qN. What an auxiliary learns, and so what a diagnosis can see,
is decided by σ/S = z/qN (`mean_noise`) and the data; the ε the same σ costs is decided by how many
users share it. A simulation of a few hundred users needs a small z to learn anything and has ε in the
thousands; a deployment with more users per round reaches the same σ with a large z and a small ε. The
demo's char-LM (z = 0.1, qN = 20: σ/S = 0.005) has the noise of qN = 400 of N = 10⁶ users at z = 2,
ε ≈ 1.05 at δ = 10⁻⁸ over 200 rounds.

- `Deployment`: N, T, qN and z of a deployment, its σ/S on the mean, and its correctly accounted ε
  (fixed-size rounds, replace-one, sensitivity 2S; δ = 0.01/N).
- `deployment_from_spec("N=1000000,rounds=200,qN=400,z=2")`, or with `epsilon=1` instead of z: the
  smallest z reaching that ε (`noise_for_epsilon`); qN defaults to `DEFAULT_ROUND_SIZE` (at most N).
- `matched_noise_multiplier(deployment, qN)`: the z of a simulation with qN users per round and the
  deployment's σ/S on the mean (`--match-deployment`).
- `smallest_deployment(σ/S, T, ε)`: the fewest users N at which the same σ/S on the mean over T rounds
  is ε-DP, with rounds of `max_clients_per_round` users (or all N when fewer). Given the σ, more users per
  round mean a larger z and a smaller ε (everyone every round is the best case), so the answer depends on
  the round size a deployment can run: `DEFAULT_ROUND_SIZE`, stated wherever the number is shown.

What the equivalence assumes (`ASSUMPTIONS`, printed with it): the same σ on the mean update at the same
clip S and rounds T; users whose data are distributed as the simulated ones' (the same share with a
bug). A deployment's round also averages more users' data, so its mean update varies less from sampling
than the simulation's: at the same σ its auxiliary is at least as good, and a diagnosis that works in
the simulation is the conservative side of one at the deployment.

The searches use a sparse subset of the accountant's orders (`SEARCH_ORDERS`: the sampled Gaussian's RDP at
each integer order above 12 costs milliseconds, and a search evaluates dozens of deployments); fewer
orders give a larger ε, so a deployment they accept the full accountant accepts too, and N is at most a
little larger than the exact smallest. Every ε reported is the full accountant's.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from fedgen_debug.privacy.accounting import (DPFedAvgPrivacy, PrivacyGuarantee, default_delta,
                                             dp_fedavg_epsilon, neighboring_relation, sum_sensitivity)
from fedgen_debug.validation import check_at_least, check_non_negative, check_positive

DEFAULT_ROUND_SIZE = 1000   # users per round at a deployment, when not given (production rounds: hundreds to thousands)
EPSILON_TARGETS = (1.0, 10.0)
MAX_POPULATION = 10**10     # searches stop here: more users than any deployment has
SEARCH_ORDERS = (1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24, 28, 32, 40,
                 48, 56, 63, 512)   # a sparse subset of accounting.RDP_ORDERS
ASSUMPTIONS = ("the same noise σ on the mean update (σ/S = z/qN) at the same clip S and rounds T; users whose data are "
               "distributed as the simulated ones'; a deployment's larger rounds also average more users' data, so its "
               "auxiliary is at least as good: the simulation's diagnosis is the conservative side")
RELEASE_KEY = "deployment_equivalent"   # `release_annotation`'s key in a training release of privacy.json
SPEC_KEYS = {"N": "population", "rounds": "rounds", "T": "rounds", "qN": "clients_per_round", "z": "noise_multiplier",
             "epsilon": "epsilon", "eps": "epsilon"}


def mean_noise(noise_multiplier: float, clients_per_round: int) -> float:
    """σ/S of the noise on the mean update: z/qN."""
    return noise_multiplier / clients_per_round


@dataclasses.dataclass(frozen=True)
class Deployment:
    """A deployment's DP-FedAvg: N users, T rounds of qN users with noise zS on the sum (fixed-size rounds)."""

    population: int
    rounds: int
    clients_per_round: int
    noise_multiplier: float

    def __post_init__(self):
        DPFedAvgPrivacy(self.clients_per_round, self.population, self.noise_multiplier, self.rounds)  # validates

    @property
    def privacy(self) -> DPFedAvgPrivacy:
        return DPFedAvgPrivacy(self.clients_per_round, self.population, self.noise_multiplier, self.rounds)

    @property
    def mean_noise(self) -> float:
        return mean_noise(self.noise_multiplier, self.clients_per_round)

    @property
    def delta(self) -> float:
        return default_delta(self.population)

    def guarantee(self) -> PrivacyGuarantee:
        """(ε, δ = 0.01/N), correctly accounted (replace-one, sensitivity 2S)."""
        return dp_fedavg_epsilon(self.privacy, self.delta)

    @property
    def spec(self) -> str:
        """"N=...,rounds=...,qN=...,z=...": `deployment_from_spec` reads it back as this deployment."""
        return (f"N={self.population},rounds={self.rounds},qN={self.clients_per_round},"
                f"z={self.noise_multiplier:.12g}")

    def as_dict(self) -> dict:
        guarantee = self.guarantee()
        return {**dataclasses.asdict(self), "mean_noise": self.mean_noise, "epsilon": guarantee.epsilon,
                "delta": guarantee.delta, "accounting": guarantee.accounting}


def _search_epsilon(population: int, clients_per_round: int, noise_multiplier: float, rounds: int) -> float:
    """ε at δ = 0.01/N over `SEARCH_ORDERS`: an upper bound of the full accountant's, fast enough to search with."""
    params = DPFedAvgPrivacy(clients_per_round, population, noise_multiplier, rounds)
    return _search_epsilon_of_events([params.dp_event()], default_delta(population))


def _search_epsilon_of_events(events, delta: float, relation: str = "replace-one") -> float:
    import numpy as np
    from dp_accounting import rdp

    accountant = rdp.RdpAccountant(list(SEARCH_ORDERS), neighboring_relation(relation))
    for event in events:
        accountant.compose(event)
    return float(rdp.compute_epsilon(np.asarray(SEARCH_ORDERS), accountant.rdp, delta)[0])


@functools.lru_cache(maxsize=64)
def noise_for_epsilon(population: int, rounds: int, clients_per_round: int, epsilon: float) -> float:
    """The smallest z, to 4 significant digits (rounded up), at which qN of N users per round over T rounds
    are (ε, 0.01/N)-DP (by the search accountant: at most a little above the full accountant's smallest)."""
    check_positive("epsilon", epsilon)
    DPFedAvgPrivacy(clients_per_round, population, 1.0, rounds)   # validates N, qN, T

    def reaches(z: float) -> bool:
        return _search_epsilon(population, clients_per_round, z, rounds) <= epsilon

    high = 1.0
    while not reaches(high):
        high *= 2.0
        if high > 1e7:
            raise ValueError(f"no noise multiplier up to 1e7 makes qN = {clients_per_round} of N = {population} over "
                             f"{rounds} rounds ε = {epsilon:g}-DP.")
    low = high / 2.0
    while low > 1e-4 and reaches(low):
        low, high = low / 2.0, low
    while high / low > 1.0 + 2e-4:   # geometric bisection to a ratio of 2e-4 (4 significant digits)
        middle = math.sqrt(low * high)
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return _round_up(high, 4)


def _round_up(x: float, digits: int) -> float:
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale - 1e-9) / scale


def deployment_from_spec(spec: str, rounds: int | None = None) -> Deployment:
    """A deployment from "N=1000000,rounds=200,qN=400,z=2" or "N=1000000,rounds=200,epsilon=1[,qN=400]"
    (z: the smallest reaching ε; qN default `DEFAULT_ROUND_SIZE`, at most N). `rounds`: T when the spec
    has none (the run's, for `--match-deployment`)."""
    values = parse_spec(spec)
    population = values.get("population")
    if population is None:
        raise ValueError(f"deployment {spec!r}: give its users as N=..., e.g. N=1000000,rounds=200,epsilon=1.")
    rounds = values.get("rounds", rounds)
    if rounds is None:
        raise ValueError(f"deployment {spec!r}: give its rounds as rounds=T.")
    clients = values.get("clients_per_round")
    if ("noise_multiplier" in values) == ("epsilon" in values):
        raise ValueError(f"deployment {spec!r}: give either its noise multiplier z=... (with qN=...) or a target "
                         "epsilon=..., not both or neither.")
    if "noise_multiplier" in values:
        if clients is None:
            raise ValueError(f"deployment {spec!r}: with z=..., give its users per round as qN=....")
        return Deployment(population, rounds, clients, values["noise_multiplier"])
    clients = min(population, DEFAULT_ROUND_SIZE) if clients is None else clients
    return Deployment(population, rounds, clients, noise_for_epsilon(population, rounds, clients, values["epsilon"]))


def parse_spec(spec: str) -> dict:
    """"N=1e6,rounds=200,qN=400,z=2" → {"population": 1000000, "rounds": 200, ...}, checked."""
    values: dict = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, text = part.partition("=")
        if not sep or key.strip() not in SPEC_KEYS:
            raise ValueError(f"deployment {spec!r}: {part!r} is not KEY=VALUE with KEY one of {', '.join(SPEC_KEYS)}.")
        name = SPEC_KEYS[key.strip()]
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"deployment {spec!r}: {key.strip()} must be a number. Found {text!r}.") from None
        if name in ("population", "rounds", "clients_per_round"):
            if number != int(number):
                raise ValueError(f"deployment {spec!r}: {key.strip()} must be a whole number. Found {text!r}.")
            number = check_at_least(key.strip(), int(number), 1)
        elif name == "noise_multiplier":
            check_non_negative("z", number)
        else:
            check_positive("epsilon", number)
        values[name] = number
    return values


def matched_noise_multiplier(deployment: Deployment, clients_per_round: int) -> float:
    """z of a simulation with `clients_per_round` users per round and the deployment's σ/S on the mean."""
    check_at_least("clients_per_round", clients_per_round, 1)
    return deployment.mean_noise * clients_per_round


def smallest_deployment(noise_on_mean: float, rounds: int, epsilon: float,
                        max_clients_per_round: int = DEFAULT_ROUND_SIZE) -> Deployment | None:
    """The fewest users N, to 3 significant digits (rounded up), at which rounds of min(N,
    `max_clients_per_round`) users with σ/S = `noise_on_mean` on the mean update (z = σ/S · qN) over `rounds`
    rounds are (ε, 0.01/N)-DP; None when no N up to `MAX_POPULATION` is (or without noise)."""
    check_non_negative("noise_on_mean", noise_on_mean)
    check_positive("epsilon", epsilon)
    check_at_least("max_clients_per_round", max_clients_per_round, 1)
    return _smallest_deployment(float(noise_on_mean), int(rounds), float(epsilon), int(max_clients_per_round))


@functools.lru_cache(maxsize=256)
def _smallest_deployment(noise_on_mean: float, rounds: int, epsilon: float,
                         max_clients_per_round: int) -> Deployment | None:
    if noise_on_mean == 0:
        return None

    def at(population: int) -> Deployment:
        clients = min(population, max_clients_per_round)
        return Deployment(population, rounds, clients, noise_on_mean * clients)

    def epsilon_at(population: int) -> float:
        d = at(population)
        return _search_epsilon(d.population, d.clients_per_round, d.noise_multiplier, rounds)

    population = smallest_population(epsilon_at, epsilon, max_clients_per_round)
    return None if population is None else at(population)


def smallest_population(epsilon_at, epsilon: float, full_rounds: int, at_least: int = 1) -> int | None:
    """The fewest users N (3 significant digits, rounded up) with `epsilon_at(N)` ≤ `epsilon`, for an ε that
    falls with N on either side of `full_rounds` (N up to it: everyone every round; above: rounds of that
    size); None when not even `MAX_POPULATION` users reach it. `at_least`: a bound known to fail below
    (a run's training alone, for all its releases): the search starts there."""
    def excess(population: int) -> float:   # log ε(N) − log target: falls as N grows
        return math.log(epsilon_at(population) / epsilon)

    full_rounds = min(full_rounds, MAX_POPULATION)
    if excess(MAX_POPULATION) > 0:
        return None
    if at_least <= full_rounds and excess(full_rounds) <= 0:
        low, high = at_least, full_rounds
    elif at_least <= 1:
        low, high = full_rounds, MAX_POPULATION
    else:   # just above the bound: step up until it reaches
        low = high = max(at_least, full_rounds)
        for factor in (1.005, 1.02, 1.1, 1.5, 4.0):
            if excess(int(math.ceil(low * factor))) <= 0:
                high = int(math.ceil(low * factor))
                break
            low = int(math.ceil(low * factor))
        else:
            high = MAX_POPULATION
    if excess(low) <= 0:
        return low
    # Regula falsi (Illinois) on log N, where log ε is nearly linear, over whole N: `low` fails, `high` reaches.
    f_low, f_high, side = excess(low), excess(high), 0
    while high - low > 1 and high > low * 1.001:
        x = (math.log(low) * f_high - math.log(high) * f_low) / (f_high - f_low)
        population = min(max(int(round(math.exp(x))), low + 1), high - 1)
        f = excess(population)
        if f <= 0:
            high, f_high = population, f
            f_low = f_low / 2 if side == -1 else f_low
            side = -1
        else:
            low, f_low = population, f
            f_high = f_high / 2 if side == 1 else f_high
            side = 1
    # To 3 significant digits, rounded up: ε falls with N on either side of full rounds, so it still reaches.
    rounded = int(_round_up(high, 3))
    return rounded if (rounded <= full_rounds) == (high <= full_rounds) else high


def equivalents(noise_multiplier: float, clients_per_round: int, rounds: int, targets=EPSILON_TARGETS,
                max_clients_per_round: int = DEFAULT_ROUND_SIZE) -> dict:
    """For a run's z, qN and T: its σ/S on the mean and, per target ε, the smallest deployment where that
    noise is ε-DP (`smallest_deployment`, with its full-accountant ε), and what the equivalence assumes."""
    noise = mean_noise(noise_multiplier, clients_per_round)
    smallest = {}
    for target in targets:
        deployment = smallest_deployment(noise, rounds, target, max_clients_per_round)
        smallest[f"{target:g}"] = None if deployment is None else deployment.as_dict()
    return {"mean_noise": noise, "rounds": rounds, "max_clients_per_round": max_clients_per_round,
            "smallest_deployment": smallest, "assumes": ASSUMPTIONS}


def release_annotation(noise_multiplier: float, clients_per_round: int, rounds: int,
                       matched_deployment: str | None = None) -> dict | None:
    """What a training release's noise is worth at a deployment (privacy.json, `RELEASE_KEY`): `equivalents`
    and, for a run whose z was matched to a deployment (`--match-deployment`), that deployment with its ε.
    None without noise."""
    if noise_multiplier == 0:
        return None
    out = equivalents(noise_multiplier, clients_per_round, rounds)
    if matched_deployment is not None:
        out["matched"] = deployment_from_spec(matched_deployment).as_dict()
    return out


def summary_lines(equivalent: dict) -> list[str]:
    """`release_annotation`'s dict in words: one line per target ε and, when matched, the deployment's ε."""
    from fedgen_debug.privacy.accounting import format_epsilon

    cap = equivalent["max_clients_per_round"]
    parts = []
    for target, found in equivalent["smallest_deployment"].items():
        if found is None:
            parts.append(f"ε ≤ {target}: no deployment up to {MAX_POPULATION:.0e} users with rounds of ≤ {cap:,}")
        else:
            parts.append(f"ε ≤ {target} from N = {found['population']:,} users (qN = {found['clients_per_round']:,}, "
                         f"z = {found['noise_multiplier']:.4g}, δ = {found['delta']:.2g})")
    lines = [f"deployment-equivalent (noise on the mean update σ/S = {equivalent['mean_noise']:.4g}, "
             f"T = {equivalent['rounds']}): " + "; ".join(parts)]
    matched = equivalent.get("matched")
    if matched is not None:
        lines.append(f"matched to the deployment N = {matched['population']:,}, qN = {matched['clients_per_round']:,}, "
                     f"z = {matched['noise_multiplier']:.4g}, T = {matched['rounds']}: its ε = "
                     f"{format_epsilon(matched['epsilon'])} at δ = {matched['delta']:.2g}")
    lines.append(f"  (assumes {ASSUMPTIONS})")
    return lines


# ---- every release of a run at a deployment ------------------------------------------------------------
def scaled_event(event, population: int, deployment_population: int,
                 max_clients_per_round: int = DEFAULT_ROUND_SIZE):
    """One release's event over `population` users as the same release at a deployment of
    `deployment_population` users with the same noise per user: a sampled Gaussian (training, the T4
    quantile's rounds) keeps its noise on the mean over rounds of min(N, `max_clients_per_round`) users; a
    Gaussian over everyone (a DP count, sum or mean; the heavy hitters' counts) keeps its noise relative
    to N (σ × N_deployment/N). None for an event of another kind (kept as it is by `releases_at`)."""
    import dp_accounting as dpa

    if isinstance(event, dpa.SelfComposedDpEvent):
        inner = scaled_event(event.event, population, deployment_population, max_clients_per_round)
        return None if inner is None else dpa.SelfComposedDpEvent(inner, event.count)
    if isinstance(event, dpa.ComposedDpEvent):
        parts = [scaled_event(e, population, deployment_population, max_clients_per_round) for e in event.events]
        return None if any(p is None for p in parts) else dpa.ComposedDpEvent(parts)
    if isinstance(event, dpa.SampledWithoutReplacementDpEvent) and isinstance(event.event, dpa.GaussianDpEvent):
        clients = min(deployment_population, max_clients_per_round)
        return dpa.SampledWithoutReplacementDpEvent(
            deployment_population, clients,
            dpa.GaussianDpEvent(event.event.noise_multiplier * clients / event.sample_size))
    if isinstance(event, dpa.PoissonSampledDpEvent) and isinstance(event.event, dpa.GaussianDpEvent):
        rate = min(1.0, max_clients_per_round / deployment_population)
        expected = event.sampling_probability * population
        return dpa.PoissonSampledDpEvent(rate, dpa.GaussianDpEvent(
            event.event.noise_multiplier * rate * deployment_population / expected))
    if isinstance(event, dpa.GaussianDpEvent):
        return dpa.GaussianDpEvent(event.noise_multiplier * deployment_population / population)
    if isinstance(event, dpa.NonPrivateDpEvent | dpa.NoOpDpEvent):
        return event
    return None


def releases_at(records, deployment_population: int, max_clients_per_round: int = DEFAULT_ROUND_SIZE):
    """(the run's records as releases at a deployment of N users, labels of those kept as they are)."""
    scaled, kept = [], []
    for record in records:
        events = [scaled_event(e, record.population_size, deployment_population, max_clients_per_round)
                  for e in record.events]
        if any(e is None for e in events):
            kept.append(record.label)
            events = list(record.events)
        scaled.append(dataclasses.replace(record, events=tuple(events), population_size=deployment_population))
    return scaled, kept


def _training_noise(record) -> tuple[float, int] | None:
    """(σ/S on the mean, T) of a record that is DP-FedAvg rounds (T × sampled Gaussian), else None: its
    smallest deployment alone bounds the run's from below."""
    import dp_accounting as dpa

    (event,) = record.events if len(record.events) == 1 else (None,)
    if not (isinstance(event, dpa.SelfComposedDpEvent) and isinstance(event.event, dpa.SampledWithoutReplacementDpEvent)
            and isinstance(event.event.event, dpa.GaussianDpEvent)):
        return None
    sensitivity = sum_sensitivity(1.0, record.accounting)   # the event's noise is in units of it
    return event.event.event.noise_multiplier * sensitivity / event.event.sample_size, event.count


def total_equivalents(records, targets=EPSILON_TARGETS, max_clients_per_round: int = DEFAULT_ROUND_SIZE,
                      training: dict | None = None) -> dict:
    """Every release of a run (`ledger.PrivacyRecord`s) at a deployment (`releases_at`), composed: per target ε
    the fewest users N at which all of them together are (ε, 0.01/N + the releases' own extra δ)-DP, with
    the full accountant's ε there; and the releases kept as they are. `training`: the run's training
    release's `equivalents` when known (its smallest deployments bound the search from below)."""
    from fedgen_debug.privacy.ledger import composed_guarantee

    records = list(records)
    relation = "add-remove" if any(r.accounting == "add-remove" for r in records) else "replace-one"
    extra = sum(r.extra_delta for r in records)

    def epsilon_at(population: int) -> float:
        scaled, _ = releases_at(records, population, max_clients_per_round)
        return _search_epsilon_of_events([e for r in scaled for e in r.events], default_delta(population), relation)

    smallest = {}
    for target in targets:
        known = (training or {}).get("smallest_deployment", {}).get(f"{target:g}")
        if known is not None and training.get("max_clients_per_round") == max_clients_per_round:
            floor = known["population"]
        else:
            alone = [smallest_deployment(*noise, target, max_clients_per_round)
                     for noise in map(_training_noise, records) if noise is not None]
            floor = max([d.population for d in alone if d is not None] or [1])
        population = smallest_population(epsilon_at, target, max_clients_per_round, at_least=floor)
        if population is None:
            smallest[f"{target:g}"] = None
            continue
        scaled, _ = releases_at(records, population, max_clients_per_round)
        guarantee = composed_guarantee(scaled, default_delta(population) + extra)
        smallest[f"{target:g}"] = {"population": population, "epsilon": guarantee.epsilon, "delta": guarantee.delta}
    _, kept = releases_at(records, 1, max_clients_per_round)
    return {"releases": [r.label for r in records], "kept_as_they_are": kept, "smallest_deployment": smallest,
            "max_clients_per_round": max_clients_per_round}
