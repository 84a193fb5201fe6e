"""How two sets of generated samples differ, property by property, ranked (issue 55, "How they differ").

A *property* is one interpretable number (or yes/no) per sample, e.g. an image's background level or a
sentence's length (`image_properties`, `text_properties`), with a `family` from the fixed vocabulary
`FAMILIES` and a pair of words for its direction ("darker"/"lighter"). `compare` sets the values of side A
(the reference: high accuracy, before a bug, ...) against side B's:

- summaries: each side's mean, or share for a yes/no property (values all 0 or 1); samples where a
  property is not defined (nan: an image without ink has no ink centroid) are left out and counted.
- effect: Cliff's delta of B against A, P(b > a) − P(b < a) in [−1, 1] (2·AUC − 1). It does not depend on
  the property's unit, so effects of different properties can be ranked together, and for a yes/no
  property it is exactly the difference of the two shares. Its standard error is DeLong's (unconditional,
  from the placement values), for a confidence interval on the effect.
- z: the Mann–Whitney statistic with the tie correction, i.e. the effect over its standard error when
  both sides come from one distribution. A large z says "this difference is not sampling noise among this
  many samples"; it does not say it is not training noise, which is the calibration's job (issue 55,
  part 1). A property constant on both sides has effect 0, z 0, never nan.
- standardized difference: (mean B − mean A) / the pooled standard deviation (Cohen's d), how far the
  property moved in units of its own spread.
- difference: mean B − mean A in the property's own unit, with its standard error (Welch's). This is what
  the calibration against training noise compares (`calibration`): two DP GANs of the same users can
  differ by a Cliff's delta of ±0.5 in stroke width, and a delta cannot pass ±1, so a fault that moves a
  property several times further than the training noise does would still be capped; a mean difference
  is not.

`rank` orders by |z| up to `Z_CERTAIN`, then by |standardized difference|: z alone cannot order two
differences that are both beyond doubt (complete separation gives the same z to every property, up to
ties), and then the property that moved furthest in its own spread names the change (blur moves
sharpness by several spreads and stroke width, through the softer edges, by about one).

Categorical properties (the primary model's class of each sample) are compared by `compare_categories`:
total-variation distance between the two class mixes as the effect, and the chi-square test of
homogeneity turned into a z on the same scale (the normal quantile of the same p-value, two-sided), and
as standardized difference the d that would give that z between two continuous samples of these sizes.

Every output is plain floats, ints, strings, lists and dicts (JSON-serializable).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import special, stats

from fedgen_debug.stats import Z_THRESHOLD

# The fixed vocabulary of families (issue 55). Images: what a faulty camera or preprocessing step changes.
IMAGE_FAMILIES = (
    "orientation",   # rotation, transposition, mirror, upside down
    "polarity",      # inverted pixels: light ink on a dark background
    "brightness",    # the whole image lighter or darker
    "contrast",      # ink and background closer together (or further apart)
    "sharpness",     # blur (a resize, a smoothing filter) or over-sharpening
    "position",      # the character off centre, or cut off by the edge
    "scale",         # the character smaller or larger in its frame
    "stroke",        # thinner or thicker strokes
    "resolution",    # upsampled from fewer pixels (blocks), compression blocks
    "noise",         # speckle on the background
    "artefact",      # a mark drawn into every image: a ruled line, a frame, a stamp
    "class_mix",     # which classes the primary model sees
    "confidence",    # how sure the primary model is
)
# Text: what a faulty tokenizer, decoder or scraper changes.
TEXT_FAMILIES = (
    "spacing",       # glued or split tokens
    "characters",    # digits, punctuation, symbols, non-ASCII, HTML entities, encoding damage
    "length",        # characters and tokens per sample, truncation
    "repetition",    # repeated tokens or character runs
    "case",          # upper/lower case
    "vocabulary",    # out-of-vocabulary tokens, overall and at the first position (a word-LM's UNK)
)
FAMILIES = IMAGE_FAMILIES + TEXT_FAMILIES


@dataclasses.dataclass(frozen=True)
class Property:
    """One per-sample property: `lower`/`higher` are the words for side B's values being lower/higher than
    side A's (e.g. "darker"/"lighter")."""
    name: str
    family: str
    lower: str
    higher: str
    description: str

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}. Found {self.family!r}.")
        if not self.name or not self.lower or not self.higher:
            raise ValueError(f"a property needs a name and two direction words. Found {self!r}.")


MIN_SPREAD = 1e-3
MAX_STANDARDIZED = 1e3
# Beyond this |z| (p < 1e-15) a difference is certain; `rank` then orders by how far it moved.
Z_CERTAIN = 8.0


def _measured(values) -> np.ndarray:
    values = np.asarray(values, np.float64).ravel()
    return values[~np.isnan(values)]


def _is_yes_no(values: np.ndarray) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


def compare(values_a, values_b, lower: str = "lower", higher: str = "higher") -> dict:
    """Side B's values of one property against side A's (module docstring). nan = not measured.

    Returns {"kind": "share" | "mean", "a", "b" (the summaries), "measured_a", "measured_b", "effect" (Cliff's
    delta of B vs A), "standard_error" (of the effect), "z" (Mann–Whitney), "direction" (`lower`, `higher`,
    or "no change" when z is 0), "spread_a", "spread_b" (each side's per-sample standard deviation)}."""
    a, b = _measured(values_a), _measured(values_b)
    if np.any(np.isinf(a)) or np.any(np.isinf(b)):
        raise ValueError("property values must be finite or nan (not measured). Found inf.")
    kind = "share" if _is_yes_no(np.concatenate([a, b])) else "mean"
    result = {"kind": kind, "a": float(a.mean()) if len(a) else None, "b": float(b.mean()) if len(b) else None,
              "measured_a": int(len(a)), "measured_b": int(len(b)),
              "effect": 0.0, "standard_error": 0.0, "z": 0.0, "standardized_difference": 0.0,
              "difference": 0.0, "difference_standard_error": 0.0, "direction": "no change",
              "spread_a": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
              "spread_b": float(b.std(ddof=1)) if len(b) > 1 else 0.0}
    if len(a) == 0 or len(b) == 0:
        return result
    n_a, n_b = len(a), len(b)
    pooled = np.concatenate([a, b])
    ranks = stats.rankdata(pooled)  # average ranks for ties
    u_b = float(ranks[n_a:].sum() - n_b * (n_b + 1) / 2)  # pairs with b > a, ties counted as half
    auc = u_b / (n_a * n_b)
    effect = 2.0 * auc - 1.0
    # Mann–Whitney null variance of U with the tie correction: 0 only when all values are equal.
    _, tie_sizes = np.unique(pooled, return_counts=True)
    n = n_a + n_b
    tie_term = float(np.sum(tie_sizes.astype(np.float64) ** 3 - tie_sizes)) / (n * (n - 1)) if n > 1 else 0.0
    null_variance = n_a * n_b / 12.0 * ((n + 1) - tie_term)
    z = (u_b - n_a * n_b / 2.0) / math.sqrt(null_variance) if null_variance > 1e-12 else 0.0
    # DeLong: each b's share of a's below it (ties half), each a's share of b's above it.
    placement_b = (ranks[n_a:] - stats.rankdata(b)) / n_a
    placement_a = 1.0 - (ranks[:n_a] - stats.rankdata(a)) / n_b
    auc_variance = (np.var(placement_b, ddof=1 if n_b > 1 else 0) / n_b
                    + np.var(placement_a, ddof=1 if n_a > 1 else 0) / n_a)
    # Both sides constant (a yes/no property all "no" on one side, all "yes" on the other): the spread is
    # floored so that the difference is large and finite, not inf.
    spread = max(math.sqrt((a.var() + b.var()) / 2.0), MIN_SPREAD)
    standardized = float(np.clip((b.mean() - a.mean()) / spread, -MAX_STANDARDIZED, MAX_STANDARDIZED))
    difference_variance = ((a.var(ddof=1) / n_a if n_a > 1 else 0.0) + (b.var(ddof=1) / n_b if n_b > 1 else 0.0))
    result.update(effect=float(effect), standard_error=float(2.0 * math.sqrt(max(auc_variance, 0.0))),
                  z=float(z), standardized_difference=standardized if z != 0 else 0.0,
                  difference=float(b.mean() - a.mean()), difference_standard_error=float(math.sqrt(difference_variance)),
                  direction=higher if z > 0 else lower if z < 0 else "no change")
    return result


# Cochran's rule: the chi-square approximation needs expected counts of about 5 or more; rarer classes
# are pooled into one "other" cell.
MIN_EXPECTED_COUNT = 5.0


def _two_sided_z(log_p: float) -> float:
    """The |z| whose two-sided normal p-value is exp(log_p) (finite however small p is)."""
    return float(-special.ndtri_exp(log_p - math.log(2.0))) if log_p < 0.0 else 0.0


def compare_categories(labels_a, labels_b, names: Sequence[str] | None = None, top: int = 3) -> dict:
    """Side B's class mix against side A's: labels are class indices (e.g. the primary model's argmax).

    Returns {"kind": "categories", "a", "b" (each side's share of the `top` classes whose share changed
    most), "measured_a", "measured_b", "effect" (total-variation distance in [0, 1]), "standard_error"
    (the effect's
    expected size under no difference: the distance is ≥ 0, so sampling noise is a floor under it, not a
    spread about it), "z" (chi-square of homogeneity as a
    two-sided normal z, ≥ 0), "direction" (e.g. "more 7, fewer 1")}."""
    a = np.asarray(labels_a).ravel().astype(np.int64)
    b = np.asarray(labels_b).ravel().astype(np.int64)
    if len(a) == 0 or len(b) == 0:
        return {"kind": "categories", "a": {}, "b": {}, "measured_a": int(len(a)), "measured_b": int(len(b)),
                "effect": 0.0, "standard_error": 0.0, "z": 0.0, "standardized_difference": 0.0,
                "difference": 0.0, "difference_standard_error": 0.0, "direction": "no change"}
    if min(a.min(), b.min()) < 0:
        raise ValueError("class labels must be >= 0.")
    classes = int(max(a.max(), b.max())) + 1
    names = [str(c) for c in range(classes)] if names is None else [str(x) for x in names]
    if len(names) < classes:
        raise ValueError(f"names must name every class. Found {len(names)} names for class {classes - 1}.")
    count_a = np.bincount(a, minlength=classes).astype(np.float64)
    count_b = np.bincount(b, minlength=classes).astype(np.float64)
    share_a, share_b = count_a / len(a), count_b / len(b)
    effect = 0.5 * float(np.abs(share_b - share_a).sum())
    # Homogeneity test on the cells with enough expected counts, the rest pooled into one.
    pooled = count_a + count_b
    expected_min = pooled * min(len(a), len(b)) / (len(a) + len(b))
    kept = expected_min >= MIN_EXPECTED_COUNT
    table = np.stack([count_a[kept], count_b[kept]])
    if np.any(~kept) and pooled[~kept].sum() > 0:
        table = np.concatenate([table, [[count_a[~kept].sum()], [count_b[~kept].sum()]]], axis=1)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        z = 0.0
    else:
        chi2, _, dof, _ = stats.chi2_contingency(table, correction=False)
        z = _two_sided_z(float(stats.chi2.logsf(chi2, dof)))
    # Under no difference each class's share difference is about N(0, σ²), σ² = p(1−p)(1/n_a + 1/n_b), so
    # E[TV] ≈ ½ Σ σ·√(2/π): the size of effect that sampling alone produces.
    p = pooled / pooled.sum()
    spread = float(0.5 * np.sum(np.sqrt(2.0 / math.pi * p * (1 - p) * (1 / len(a) + 1 / len(b)))))
    changed = np.argsort(-np.abs(share_b - share_a), kind="stable")[:top]
    more = [names[c] for c in changed if share_b[c] > share_a[c]]
    fewer = [names[c] for c in changed if share_b[c] < share_a[c]]
    words = ([f"more {', '.join(more)}"] if more else []) + ([f"fewer {', '.join(fewer)}"] if fewer else [])
    return {"kind": "categories",
            "a": {names[c]: float(share_a[c]) for c in changed}, "b": {names[c]: float(share_b[c]) for c in changed},
            "measured_a": int(len(a)), "measured_b": int(len(b)), "effect": effect, "standard_error": spread,
            "z": z, "standardized_difference": z * math.sqrt(1 / len(a) + 1 / len(b)),
            "difference": effect, "difference_standard_error": spread,
            "direction": "; ".join(words) if z > 0 and words else "no change"}


def significance_z(tests: int) -> float:
    """The |z| one property must exceed among `tests` so that all of them together call a difference as
    rarely as one one-sided test at `stats.Z_THRESHOLD` (p ≈ 0.0013; two-sided Bonferroni): 4.1 for 35."""
    normal = statistics.NormalDist()
    return normal.inv_cdf(1.0 - (1.0 - normal.cdf(Z_THRESHOLD)) / (2.0 * max(tests, 1)))


def compare_properties(properties: Sequence[Property], values_a: Mapping[str, np.ndarray],
                       values_b: Mapping[str, np.ndarray]) -> list[dict]:
    """`compare` for each property (in `properties`' order), with its name, family and description."""
    missing = [p.name for p in properties if p.name not in values_a or p.name not in values_b]
    if missing:
        raise ValueError(f"values of both sides needed for every property. Missing: {', '.join(missing)}.")
    return [{"property": p.name, "family": p.family, "description": p.description,
             **compare(values_a[p.name], values_b[p.name], p.lower, p.higher)} for p in properties]


def rank(comparisons: Sequence[Mapping], z_threshold: float | None = None, z_key: str = "z") -> list[dict]:
    """The comparisons ordered by |z| up to `Z_CERTAIN`, then |standardized difference| (module docstring),
    each with its "rank" (1 = first) and "significant" (|z| above `z_threshold`, by default
    `significance_z(len(comparisons))`). `z_key` names the z to rank by ("calibrated_z": the calibration's,
    `calibration.apply`); a comparison whose z is None (not calibrated) ranks last and is never significant."""
    threshold = significance_z(len(comparisons)) if z_threshold is None else float(z_threshold)

    def size(c) -> float:
        return 0.0 if c[z_key] is None else abs(c[z_key])

    ordered = sorted(comparisons, key=lambda c: (c[z_key] is None, -min(size(c), Z_CERTAIN),
                                                 -abs(c["standardized_difference"])))
    return [{**c, "rank": i + 1, "significant": bool(size(c) > threshold), "z_threshold": threshold}
            for i, c in enumerate(ordered)]


def family_ranks(ranked: Sequence[Mapping]) -> dict[str, int]:
    """Each family's best rank in a `rank`ed list (its first property's), families in that order."""
    best = {}
    for c in ranked:
        best.setdefault(c["family"], c["rank"])
    return best


def significant_families(ranked: Sequence[Mapping]) -> list[str]:
    """The families with at least one significant property, most significant first."""
    return list(dict.fromkeys(c["family"] for c in ranked if c["significant"]))
