"""Calibration against training noise (issue 55, part 1): how far two auxiliaries of the same users differ
when nothing but the training's randomness (its secret: DP noise, client sampling; its initialisation)
differs, so that `diagnose` calls a difference only beyond that.

The model. A property's difference between two runs (mean B − mean A in the property's unit,
`differences.compare`'s "difference"; not Cliff's delta, which cannot pass ±1 while clean GAN pairs
already reach ±0.5) is e = μ + t + s: μ a systematic offset the pair type has without any bug, t the training noise (variance τ²,
the same for any sample count), s the samples' own noise (variance SE², the pair's DeLong standard error,
shrinking with the sample count: its Welch standard error). Then

    calibrated z = (e − μ̂) / √(SE² + τ²_upper + SE(μ̂)²)

is a standard normal for a pair without a bug, whatever the sample count; the sampling-only z of
`differences` is the special case τ = 0, μ = 0.

Estimating τ and μ from clean pairs (no bug on either side):
- "replicate" pairs (before vs after an update, two populations of the same kind, the same users twice):
  A and B are exchangeable, so μ = 0, and τ² = mean(e² − SE²) over the clean pairs. The pairs may be all
  pairs among R replicate runs, which share runs: they carry R − 1 degrees of freedom, not R(R − 1)/2.
- "selection" pairs (low- vs high-accuracy users, misclassified vs correct): the two sides are different
  users by construction and differ without a bug (messier writers write messier characters), so μ is the
  clean pairs' mean effect and τ² their variance about it beyond the samples' noise, K − 1 degrees of
  freedom from K independent pairs.
- Class mix (`kind` "categories": a total-variation distance ≥ 0, one-sided): μ is the clean pairs' mean
  distance and the noise their whole spread (samples included), since the distance's sampling part is
  not a spread about zero.

τ is used at its 95% upper confidence bound (chi-square on the degrees of freedom): with 10 replicate runs
the bound is 1.5× the estimate. A property the calibration does not know is not called. A property is called
beyond Bonferroni's threshold over the properties, raised to the clean pairs' own where their tails are
heavier than normal (`clean_pairs_threshold`: with 19 or more clean pairs, a conformal bound on the largest
|calibrated z| of a new clean pair; clean T4 pairs need it).

Several sources of data. Training noise depends on the data as well as on the settings: at the demo
settings, GANs on real FEMNIST differ from run to run 2.2-2.6× as much as on synthetic writers in edge
steepness, edge width, stroke slant and the primary model's confidence, and a calibration from synthetic
runs alone alarmed on 28 of 120 clean FEMNIST pairs (docs/analysis.md, 2026-12-04). So clean runs of
several sources are calibrated source by source (a pair is two runs of one source: runs of two sources are
not a clean pair), and each property takes the widest of them (`envelope`): offset the sources' mean μ̄, noise max over sources of
√(τ_s² + (μ_s − μ̄)²), so a clean pair of any source measured stays within its own source's noise. The
calibration keeps each source's own noise too (`by_source`): a pair of runs on one of its sources uses
that source's (`for_data`), and a pair on data none of them is uses the envelope, widened.

Data none of the sources is (`other_data`). τ is in the property's unit, and a property that hardly
varies in the sources has hardly any τ: synthetic text holds no symbols, so a word-LM's symbol share had
τ ≈ 0 there and in Tiny Shakespeare, and 36 of 66 clean pairs of word-LMs on another text alarmed on it.
Training noise grows with the property's spread across samples, so each property also keeps
`relative_noise` = τ_upper / its median per-sample spread in the clean pairs (the envelope: the largest;
`Calibration.widened`: a property no source saw vary, the largest of the others), and on other data its
noise is max(τ_upper, relative_noise × the pair's smaller per-sample spread) (`training_noise_for`).
Measured with one source left out of three (docs/analysis.md, 2026-12-04), clean pairs of the left-out
source alarmed on 29, 0 and 36 of 66 word-LM pairs unwidened and on 0, 0 and 7 widened; GANs on 0, 2 and 17
(of 91, 120 and 28), widened 0, 0 and 9: a source noisier than any measured still alarms.

`false_alarms` is measured, not assumed: each clean pair is diagnosed with a calibration estimated without
its two runs (leave-pair-out; of its own source's pairs when there are several sources), and a pair whose
properties pass the threshold anywhere is a false alarm. How the envelope does on a source it has not
measured cannot be measured on its own runs: `evaluation/calibration_transfer.py` measures one source's
calibration on another's clean pairs.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import os
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

from fedgen_debug.analysis import differences
from fedgen_debug.validation import check_at_least, check_one_of

SCHEMA = "fedgen-debug/calibration/1"
PAIR_TYPES = ("replicate", "selection")
CONFIDENCE = 0.95          # of the upper bound on τ
FAMILY_WISE_RATE = 0.05    # the chance a clean pair passes the threshold on any property (Bonferroni)
MIN_DEGREES_OF_FREEDOM = 2


@dataclasses.dataclass(frozen=True)
class PropertyNoise:
    """One property's clean-pair behaviour: `offset` μ̂, `training_noise` τ's estimate and
    `training_noise_upper` its upper bound (module docstring), from `pairs` clean pairs; `offset_error`:
    the standard error of μ̂ (0 for replicate pairs, whose offset is 0 by symmetry, not estimated);
    `relative_noise`: `training_noise_upper` in units of the property's per-sample spread in the clean pairs
    (their median), for data none of the sources is (module docstring); None when not measured."""
    offset: float
    training_noise: float
    training_noise_upper: float
    pairs: int
    offset_error: float = 0.0
    relative_noise: float | None = None

    def __post_init__(self):
        for name in ("offset", "training_noise", "training_noise_upper", "offset_error"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite. Found {value}.")
        if self.relative_noise is not None and not (math.isfinite(self.relative_noise) and self.relative_noise >= 0):
            raise ValueError(f"relative_noise must be finite and >= 0. Found {self.relative_noise}.")
        if self.offset_error < 0 or self.training_noise < 0 or self.training_noise_upper < self.training_noise:
            raise ValueError(f"need 0 <= training_noise <= training_noise_upper. Found {self.training_noise}, "
                             f"{self.training_noise_upper}.")


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Which pairs a calibration is for (`kind`: "gan", "char" or "word"; `preset`; `pair_type`), what it
    was measured on (`source`: data, rounds, runs, a free description), each property's noise, the
    threshold, and the false alarms it had on its own clean pairs left out."""
    name: str
    kind: str
    preset: str
    pair_type: str
    properties: Mapping[str, PropertyNoise]
    degrees_of_freedom: int
    z_threshold: float
    source: Mapping
    false_alarms: Mapping | None = None
    by_source: Mapping[str, Mapping] | None = None   # data spec → {"degrees_of_freedom", "properties"}
    other_data: bool = False   # applied to runs on data none of its sources is (`for_data`; not saved)

    def __post_init__(self):
        check_one_of("kind", self.kind, ("gan", "char", "word"))
        check_one_of("pair_type", self.pair_type, PAIR_TYPES)
        check_at_least("degrees_of_freedom", self.degrees_of_freedom, MIN_DEGREES_OF_FREEDOM)
        if not self.properties:
            raise ValueError("a calibration needs at least one property.")

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "name": self.name, "kind": self.kind, "preset": self.preset,
                "pair_type": self.pair_type, "degrees_of_freedom": self.degrees_of_freedom,
                "z_threshold": self.z_threshold, "source": dict(self.source),
                "false_alarms": None if self.false_alarms is None else dict(self.false_alarms),
                "properties": _properties_json(self.properties),
                **({} if self.by_source is None else {"by_source": {
                    data: {"degrees_of_freedom": own["degrees_of_freedom"],
                           "properties": _properties_json(own["properties"])}
                    for data, own in self.by_source.items()}})}

    def for_data(self, data_specs: Sequence[str | None]) -> tuple["Calibration", str | None]:
        """(the calibration for runs on `data_specs`, the source whose own noise it holds or None): the own
        noise of a source every run trains on (the same spec, or the same synthetic generator), else the
        envelope of all sources, `widened` (each noise at least its relative noise times the pair's
        spread, `training_noise_for`)."""
        measured = list(self.by_source or []) or [self.source.get("data")]
        matches = {matching_source([m for m in measured if m], spec) for spec in data_specs}
        if len(matches) != 1 or None in matches:
            return self.widened(), None
        if not self.by_source:
            return self, None
        (data,) = matches
        own = self.by_source[data]
        listed = next((x for x in self.source.get("sources", []) if x.get("data") == data), {})
        alarms = None if "tested" not in listed else {
            "pairs": listed["tested"], "alarms": listed["false_alarms"],
            "rate_upper_95": _rate_upper(listed["false_alarms"], listed["tested"]) if listed["tested"] else None}
        return dataclasses.replace(self, properties=own["properties"], degrees_of_freedom=own["degrees_of_freedom"],
                                   source={**self.source, "used": data}, false_alarms=alarms, by_source=None), data

    def widened(self) -> "Calibration":
        """For runs on data none of the sources is (`other_data`): a property no source saw vary (no relative
        noise: no digits in any source's text) takes the largest relative noise of the others, since how
        much it varies from training to training on this data was never measured."""
        relatives = [n.relative_noise for n in self.properties.values() if n.relative_noise is not None]
        fallback = max(relatives, default=None)
        return dataclasses.replace(self, other_data=True, properties={
            name: n if n.relative_noise is not None else dataclasses.replace(n, relative_noise=fallback)
            for name, n in self.properties.items()})

    def other_order(self, distances: Sequence[str] = ()) -> "Calibration":
        """For pairs of the same two selections in the other order (the measured B side given first): each
        offset negated, since a difference is mean B − mean A, except the `distances`' (the class mix's
        total-variation distance is the same either way round). The noise, its bound, the offset's error, the
        degrees of freedom, the threshold and the false alarms are the same clean pairs' and stay: a pair's
        |calibrated z| is the same in either order."""
        if self.pair_type != "selection":
            raise ValueError(f"only a selection calibration has an order; {self.name} is {self.pair_type}.")

        def negated(properties: Mapping[str, PropertyNoise]) -> dict[str, PropertyNoise]:
            return {name: n if name in distances else dataclasses.replace(n, offset=-n.offset)
                    for name, n in properties.items()}

        selections = self.source.get("selections")
        return dataclasses.replace(
            self, properties=negated(self.properties),
            source={**self.source, **({"selections": list(selections[::-1])} if selections else {})},
            by_source=None if self.by_source is None else {
                data: {**own, "properties": negated(own["properties"])} for data, own in self.by_source.items()})

    @classmethod
    def from_json(cls, data: Mapping) -> "Calibration":
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a calibration ({SCHEMA}). Found schema {data.get('schema')!r}.")
        return cls(name=data["name"], kind=data["kind"], preset=data["preset"], pair_type=data["pair_type"],
                   properties={k: PropertyNoise(**v) for k, v in data["properties"].items()},
                   degrees_of_freedom=int(data["degrees_of_freedom"]), z_threshold=float(data["z_threshold"]),
                   source=data.get("source", {}), false_alarms=data.get("false_alarms"),
                   by_source=None if "by_source" not in data else {
                       spec: {"degrees_of_freedom": int(own["degrees_of_freedom"]),
                              "properties": {k: PropertyNoise(**v) for k, v in own["properties"].items()}}
                       for spec, own in data["by_source"].items()})


def _properties_json(properties: Mapping[str, PropertyNoise]) -> dict:
    return {name: dataclasses.asdict(noise) for name, noise in sorted(properties.items())}


def matching_source(measured: Sequence[str], spec: str | None) -> str | None:
    """The measured data spec that `spec` is: the same spec, the only one of the same synthetic generator
    (another size or seed of the tool's own synthetic users), or the only file of the same scheme and name
    (the same file reached by another path: `npz:/data/femnist.npz` is `npz:../data/femnist.npz`, whose
    relative path named it from wherever the calibration was measured); None for a modeler's other file."""
    if spec is None:
        return None
    if spec in measured:
        return spec
    scheme, _, rest = spec.strip().partition(":")
    if scheme.startswith("synthetic-"):
        same = [m for m in measured if m.strip().partition(":")[0] == scheme]
    else:
        def file_and_options(one):   # "npz:PATH,background=black" → ("npz", "NAME", "background=black")
            kind, _, where = one.strip().partition(":")
            path, _, options = where.partition(",")
            return kind, os.path.basename(path), options
        same = [m for m in measured if file_and_options(m) == file_and_options(spec)]
    return same[0] if len(same) == 1 else None


def threshold_for(properties: int, family_wise_rate: float = FAMILY_WISE_RATE) -> float:
    """The |calibrated z| one property must pass among `properties` for a clean pair to pass anywhere with
    probability `family_wise_rate` (two-sided Bonferroni): 3.5 for 26 properties at 0.05."""
    check_at_least("properties", properties, 1)
    return statistics.NormalDist().inv_cdf(1.0 - family_wise_rate / (2.0 * properties))


def clean_pairs_threshold(largest: Sequence[float], rate: float = FAMILY_WISE_RATE) -> float | None:
    """The |calibrated z| that a new clean pair's largest property passes with probability at most `rate`,
    whatever the shape of the training noise's tails: the ⌈(n + 1)(1 − rate)⌉-th smallest of n clean pairs'
    largest |calibrated z| (`largest`, each pair left out). A new clean pair of the same protocol is
    exchangeable with those n, so its largest ranks uniformly among the n + 1 (split conformal prediction).
    None with fewer than 1/rate − 1 pairs (19 at 0.05): then no clean pair's value bounds it.

    Why: Bonferroni over the properties assumes each calibrated z is normal. Clean T4 pairs have heavier
    tails (a low-accuracy GAN with a quarter of faint samples moves mid_level 4 training noises): 2 of 19
    left out and 5 of 19 unseen pairs passed Bonferroni's threshold (docs/analysis.md). The threshold a
    calibration uses is the larger of the two (`threshold_with_clean_pairs`)."""
    check_at_least("rate", rate, 1e-9)
    values = sorted(abs(float(v)) for v in largest)
    rank = math.ceil((len(values) + 1) * (1.0 - rate))
    return values[rank - 1] if 1 <= rank <= len(values) else None


def threshold_with_clean_pairs(properties: int, false_alarms: Mapping | None) -> float:
    """The threshold of a calibration of `properties` properties: Bonferroni's (`threshold_for`), raised to
    its clean pairs' own (`false_alarms["clean_pairs_threshold"]`, from `false_alarms_left_out`) where their
    tails are heavier than normal; never lowered, since the upper bound on τ already makes most clean pairs'
    largest z smaller than Bonferroni assumes (word-LMs: 1.9 against 2.96)."""
    own = None if false_alarms is None else false_alarms.get("clean_pairs_threshold")
    return max(threshold_for(properties), own or 0.0)


def upper_bound_factor(degrees_of_freedom: int) -> float:
    """τ_upper / τ̂ when the pairs differ exactly as their own estimate says: √(dof / χ²₀.₀₅(dof)), 2.37 at 4
    degrees of freedom (5 replicate runs), 1.59 at 10, 1.27 at 30. A difference must be this much more than
    the estimated training noise to reach the same calibrated z: the power few clean runs cost."""
    check_at_least("degrees_of_freedom", degrees_of_freedom, 1)
    return math.sqrt(_upper_variance(float(degrees_of_freedom), degrees_of_freedom))   # Σ = dof: σ̂² = 1


def _upper_variance(sum_of_squares: float, dof: int) -> float:
    """The CONFIDENCE upper bound on σ² from Σ(x − mean)² ~ σ² χ²(dof)."""
    return sum_of_squares / float(stats.chi2.ppf(1.0 - CONFIDENCE, dof))


@dataclasses.dataclass(frozen=True)
class SelectionDesign:
    """How selection pairs share runs, for the offset and the spread about it. Each run adds its own training
    noise (τ²/2 a side) to every pair it is in; with c_r the pairs of run r and P pairs:
    E[Σ(d − d̄)²] = τ² (P − Σc_r² / 2P) (`spread_terms`) and Var(d̄) = τ² Σc_r² / 2P² (`offset_share`).
    Disjoint pairs (every c_r = 1) give the textbook P − 1 and 1/P; every A run against every B run (n a side)
    gives n(n − 1) and 1/n, where P − 1 = n² − 1 would understate τ² and 1/P = 1/n² the offset's error.
    Degrees of freedom: runs minus connected groups (`replicate_degrees_of_freedom`) minus the offset."""
    pairs: int
    squared_counts: int   # Σ over runs of (pairs the run is in)²

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, int]]) -> "SelectionDesign":
        counts = collections.Counter(r for pair in pairs for r in pair)
        return cls(len(pairs), sum(c * c for c in counts.values()))

    @classmethod
    def disjoint(cls, pairs: int) -> "SelectionDesign":
        return cls(pairs, 2 * pairs)

    @property
    def spread_terms(self) -> float:
        return self.pairs - self.squared_counts / (2.0 * self.pairs)

    @property
    def offset_share(self) -> float:
        return self.squared_counts / (2.0 * self.pairs ** 2)


def estimate_noise(pair_comparisons: Sequence[Sequence[Mapping]], pair_type: str,
                   degrees_of_freedom: int | None = None,
                   design: SelectionDesign | None = None) -> tuple[dict[str, PropertyNoise], int]:
    """Each property's `PropertyNoise` from the comparisons (`differences.compare_properties` rows, one list
    per clean pair), and the degrees of freedom used: `degrees_of_freedom` when the pairs share runs
    (R − 1 for all pairs among R replicate runs, R − 2 for every A run against every B run), else the pairs'
    count (replicate) or count − 1 (selection). `design`: how selection pairs share runs (default: disjoint)."""
    check_one_of("pair_type", pair_type, PAIR_TYPES)
    pairs = len(pair_comparisons)
    design = design or SelectionDesign.disjoint(pairs)
    if design.pairs != pairs:
        raise ValueError(f"the design has {design.pairs} pairs; {pairs} were compared.")
    dof = degrees_of_freedom if degrees_of_freedom is not None else pairs - (pair_type == "selection")
    if dof < MIN_DEGREES_OF_FREEDOM:
        raise ValueError(f"calibration needs at least {MIN_DEGREES_OF_FREEDOM} degrees of freedom (3 replicate runs "
                         f"or 3 selection pairs). Found {dof} from {pairs} pairs.")
    by_property: dict[str, list[Mapping]] = {}
    for comparisons in pair_comparisons:
        for c in comparisons:
            by_property.setdefault(c["property"], []).append(c)
    noise = {}
    for name, rows in by_property.items():
        if len(rows) < pairs:    # measured in some pairs only: not calibrated
            continue
        effects = np.array([r["difference"] for r in rows], np.float64)
        errors = np.array([r["difference_standard_error"] for r in rows], np.float64)
        spread = float(np.median([sample_spread(r) for r in rows]))
        if rows[0].get("kind") == "categories":
            offset = float(effects.mean())
            squares = float(np.sum((effects - offset) ** 2))
            terms = max(design.spread_terms, 1.0)
            estimate = math.sqrt(squares / terms)
            upper_dof = max(dof - (pair_type == "replicate"), 1)
            scale = upper_dof / terms if pair_type == "selection" else 1.0   # 1 for disjoint pairs
            upper = math.sqrt(_upper_variance(squares * scale, upper_dof))
            offset_error = estimate * math.sqrt(design.offset_share)
        else:
            offset = float(effects.mean()) if pair_type == "selection" else 0.0
            deviations = effects - offset
            sampling = float(np.mean(errors ** 2))
            terms = max(design.spread_terms, 1.0) if pair_type == "selection" else pairs
            mean_square = float(np.sum(deviations ** 2)) / terms
            estimate = math.sqrt(max(mean_square - sampling, 0.0))
            upper = math.sqrt(max(_upper_variance(mean_square * dof, dof) - sampling, 0.0))
            offset_error = math.sqrt(mean_square * design.offset_share) if pair_type == "selection" else 0.0
        upper = max(upper, estimate)
        relative = upper / spread if spread > 0 and rows[0].get("kind") != "categories" else None
        noise[name] = PropertyNoise(offset=offset, training_noise=estimate, training_noise_upper=upper,
                                    pairs=pairs, offset_error=offset_error, relative_noise=relative)
    return noise, dof


def envelope(noises: Sequence[Mapping[str, PropertyNoise]]) -> dict[str, PropertyNoise]:
    """Per property measured in every source, the widest noise of the sources' (module docstring): the mean
    offset, and each noise (estimate, upper bound, the offset's error) the sources' largest with its offset's
    distance from the mean added in quadrature. One source: itself."""
    if len(noises) == 1:
        return dict(noises[0])
    combined = {}
    for name in set.intersection(*(set(n) for n in noises)):
        each = [n[name] for n in noises]
        offset = float(np.mean([e.offset for e in each]))

        def widest(field):
            return max(math.hypot(getattr(e, field), e.offset - offset) for e in each)

        estimate, upper = widest("training_noise"), widest("training_noise_upper")
        relative = [e.relative_noise for e in each if e.relative_noise is not None]
        combined[name] = PropertyNoise(offset=offset, training_noise=estimate,
                                       training_noise_upper=max(upper, estimate), pairs=sum(e.pairs for e in each),
                                       offset_error=max(e.offset_error for e in each),
                                       relative_noise=max(relative) if relative else None)
    return combined


def all_pairs(runs: int, source_of_run: Sequence | None = None) -> list[tuple[int, int]]:
    """Every pair of replicate runs of one source of data (`source_of_run`: each run's; None: one source)."""
    return [(i, j) for i, j in itertools.combinations(range(runs), 2)
            if source_of_run is None or source_of_run[i] == source_of_run[j]]


def check_one_source_per_pair(pairs: Sequence[tuple[int, int]], source_of_run: Sequence | None) -> None:
    mixed = [p for p in pairs if source_of_run is not None and len({source_of_run[r] for r in p}) > 1]
    if mixed:
        i, j = mixed[0]
        raise ValueError(f"a clean pair is two runs of one source of data. Found runs {i} and {j} of "
                         f"{source_of_run[i]} and {source_of_run[j]}.")


def estimate_by_source(rows_by_pair: Mapping[tuple, Sequence[Mapping]], pair_type: str,
                       source_of_run: Sequence | None = None) -> tuple[dict[str, PropertyNoise], int, list[dict]]:
    """`estimate_noise` for each source's clean pairs ((run, run) → comparison rows; `source_of_run`: each
    run's source of data, None: one source) and their `envelope`; the degrees of freedom are the smallest
    source's, and each source's (its pairs, degrees of freedom and noise) is listed. A pair of two sources
    is refused."""
    check_one_source_per_pair(list(rows_by_pair), source_of_run)
    if not rows_by_pair:
        raise ValueError("calibration needs clean pairs. Found none.")
    by_source: dict = {}
    for pair, rows in rows_by_pair.items():
        by_source.setdefault(None if source_of_run is None else source_of_run[pair[0]], {})[pair] = rows
    estimates, listed = [], []
    for source, pairs in by_source.items():
        dof = replicate_degrees_of_freedom(list(pairs)) - (pair_type == "selection")
        design = SelectionDesign.of(list(pairs)) if pair_type == "selection" else None
        noise, dof = estimate_noise(list(pairs.values()), pair_type, dof, design)
        estimates.append(noise)
        listed.append({"data": source, "pairs": len(pairs), "degrees_of_freedom": dof, "properties": noise})
    return envelope(estimates), min(s["degrees_of_freedom"] for s in listed), listed


def sample_spread(comparison: Mapping) -> float:
    """The property's per-sample standard deviation in a pair, the unit of `PropertyNoise.relative_noise`:
    the smaller side's, since a fault on some of one side's devices widens that side's spread (a mixture of
    faulty and clean samples), and the noise must not grow with the fault it should expose. Without the
    sides' spreads (older rows), from the difference's standard error and the measured counts."""
    if "spread_a" in comparison and "spread_b" in comparison:
        return min(comparison["spread_a"], comparison["spread_b"])
    n_a, n_b = comparison.get("measured_a", 0), comparison.get("measured_b", 0)
    if not n_a or not n_b:
        return 0.0
    return comparison["difference_standard_error"] / math.sqrt(1.0 / n_a + 1.0 / n_b)


def training_noise_for(comparison: Mapping, noise: PropertyNoise, other_data: bool = False) -> float:
    """τ_upper; on data none of the sources is (`other_data`), at least `relative_noise` × the pair's own
    per-sample spread: a property the sources hardly vary in (no symbols in synthetic text) carries no
    noise in τ_upper, but does on data where it varies."""
    if not other_data or noise.relative_noise is None or comparison.get("kind") == "categories":
        return noise.training_noise_upper
    return max(noise.training_noise_upper, noise.relative_noise * sample_spread(comparison))


def calibrated_z(comparison: Mapping, noise: PropertyNoise | None, other_data: bool = False) -> float | None:
    """(e − μ̂) / √(SE² + τ²_upper + SE(μ̂)²) (module docstring), τ_upper widened for other data
    (`training_noise_for`); None when the property is not calibrated."""
    if noise is None:
        return None
    deviation = comparison["difference"] - noise.offset
    if comparison.get("kind") == "categories":
        scale = math.hypot(noise.training_noise_upper, noise.offset_error)   # the clean distances' whole spread
        deviation = max(deviation, 0.0)          # a distance below the clean ones is no difference
    else:
        scale = math.sqrt(comparison["difference_standard_error"] ** 2
                          + training_noise_for(comparison, noise, other_data) ** 2 + noise.offset_error ** 2)
    if scale <= 0.0:
        return 0.0 if deviation == 0.0 else math.copysign(differences.MAX_STANDARDIZED, deviation)
    return float(np.clip(deviation / scale, -differences.MAX_STANDARDIZED, differences.MAX_STANDARDIZED))


def apply(comparisons: Sequence[Mapping], calibration: Calibration) -> list[dict]:
    """The comparisons with "calibrated_z" and "training_noise" (τ_upper in the property's unit, as the
    "difference"; None when not calibrated), ranked
    by the calibrated z (`differences.rank` with it in place of the sampling z) and significant beyond the
    calibration's threshold. The sampling-only z stays as "z"."""
    rows = []
    for c in comparisons:
        noise = calibration.properties.get(c["property"])
        z = calibrated_z(c, noise, calibration.other_data)
        rows.append({**c, "calibrated_z": z, "training_noise": None if noise is None
                     else training_noise_for(c, noise, calibration.other_data)})
    return differences.rank(rows, z_threshold=calibration.z_threshold, z_key="calibrated_z")


def replicate_degrees_of_freedom(pairs: Sequence[tuple[int, int]]) -> int:
    """The degrees of freedom replicate pairs carry about τ: runs minus connected groups of runs (each pair
    an edge). All pairs among R runs: R − 1; K disjoint pairs: K."""
    parent: dict[int, int] = {}

    def root(r):
        while parent.setdefault(r, r) != r:
            r = parent[r]
        return r

    for i, j in pairs:
        parent[root(i)] = root(j)
    runs = {r for p in pairs for r in p}
    return len(runs) - len({root(r) for r in runs})


def left_out(rows_by_pair: Mapping[tuple, Sequence[Mapping]], excluded: set, pair_type: str, kind: str,
             source_of_run: Sequence | None = None) -> Calibration:
    """A calibration from the clean pairs (`rows_by_pair`: (run, run) → comparison rows) that share no run
    with `excluded`: a pair is never calibrated by itself, nor by its own runs' other pairs. With
    `source_of_run` (each run's source of data), from the pairs of the excluded runs' source only: a
    diagnosis of runs on a source the calibration measured uses that source's own noise (`for_data`)."""
    kept = {p: rows for p, rows in rows_by_pair.items() if not set(p) & set(excluded)}
    if source_of_run is not None:
        own = {source_of_run[r] for r in excluded}
        kept = {p: rows for p, rows in kept.items() if source_of_run[p[0]] in own}
    noise, dof, _ = estimate_by_source(kept, pair_type, source_of_run)
    properties = len(next(iter(rows_by_pair.values())))
    return Calibration(name="left-out", kind=kind, preset="-", pair_type=pair_type, properties=noise,
                       degrees_of_freedom=dof, z_threshold=threshold_for(properties), source={})


def leave_pair_out_false_alarms(values_by_run: Sequence, compare_pair, pair_type: str, kind: str,
                                pairs: Sequence[tuple[int, int]] | None = None,
                                source_of_run: Sequence | None = None) -> dict:
    """Each clean pair (i, j) of runs diagnosed against a calibration estimated without runs i and j
    (`left_out`): how many pass the threshold on any property. `compare_pair(values_a, values_b)` returns
    the comparison rows; `pairs` defaults to all pairs among the runs (replicate) and must be given for
    selection pairs; `source_of_run`: each run's source of data (None: one source). A pair with too few
    others of its source left to calibrate is not tested."""
    pairs = all_pairs(len(values_by_run), source_of_run) if pairs is None else list(pairs)
    check_one_source_per_pair(pairs, source_of_run)
    rows_by_pair = {(i, j): compare_pair(values_by_run[i], values_by_run[j]) for i, j in pairs}
    return false_alarms_left_out(rows_by_pair, pair_type, kind, source_of_run)


def false_alarms_left_out(rows_by_pair: Mapping[tuple, Sequence[Mapping]], pair_type: str, kind: str,
                          source_of_run: Sequence | None = None, base: Calibration | None = None) -> dict:
    """`leave_pair_out_false_alarms` of clean pairs already compared ((run, run) → comparison rows). With
    `base` (a calibration these runs supplement, `calibrate.supplement`), each pair is diagnosed as the
    supplemented calibration would: base's noise for the properties base holds (measured on other runs, so
    not left out), the left-out noise of these runs for the rest, the threshold over all of them (at least
    base's). Without `base`, "clean_pairs_threshold" is the pairs' own (`clean_pairs_threshold` of their
    largest left-out |z|), and each pair alarms beyond Bonferroni's and the one of the other pairs
    ("alarms_at_bonferroni": beyond Bonferroni's alone; both None with `base`)."""
    check_one_source_per_pair(list(rows_by_pair), source_of_run)
    details = []
    for pair, rows in rows_by_pair.items():
        try:
            calibration = left_out(rows_by_pair, set(pair), pair_type, kind, source_of_run)
        except ValueError:
            continue
        if base is not None:
            held = base.for_data([None if source_of_run is None else source_of_run[pair[0]]] * 2)[0].properties
            properties = {**calibration.properties, **held}
            calibration = dataclasses.replace(calibration, properties=properties,
                                              z_threshold=max(threshold_for(len(properties)), base.z_threshold))
        top = apply(rows, calibration)[0]
        details.append({"pair": list(pair), "alarm": top["significant"], "top_property": top["property"],
                        "top_calibrated_z": top["calibrated_z"], "threshold": top["z_threshold"],
                        **({} if source_of_run is None else {"data": source_of_run[pair[0]]})})
    largest = [abs(d["top_calibrated_z"] or 0.0) for d in details]
    at_bonferroni = None if base is not None else sum(d["alarm"] for d in details)
    if base is None:   # each pair also against the clean-pairs threshold of the others (left out as its noise)
        for i, d in enumerate(details):
            own = clean_pairs_threshold(largest[:i] + largest[i + 1:])
            d["threshold"] = max(d["threshold"], own or 0.0)
            d["alarm"] = bool(largest[i] > d["threshold"])
    alarms, tested = sum(d["alarm"] for d in details), len(details)
    return {"pairs": tested, "alarms": alarms,
            "rate_upper_95": _rate_upper(alarms, tested) if tested else None,
            "clean_pairs_threshold": None if base is not None else clean_pairs_threshold(largest),
            "alarms_at_bonferroni": at_bonferroni, "details": details}


def _rate_upper(events: int, trials: int) -> float:
    """Clopper–Pearson 95% upper bound on a rate."""
    return 1.0 if events >= trials else float(stats.beta.ppf(0.95, events + 1, trials - events))
