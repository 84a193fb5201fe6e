"""The word-LM check of the power curve against training noise (issue 56): the check's z counts the samples'
noise only, and two clean trainings differ by more (clean pairs' z spread 2.9 at 5,000 samples, 2026-12-05).

  .venv/bin/python evaluation/power_check_noise.py runs/power-word-a runs/power-word-b --out rows.json

Reads the word-LM runs `evaluation/power.py --story concat --kind word` left in its out directories (each
run's `released/analysis.json`; no model is loaded). Per ε, every run trained without the bug (`concat0`)
is a clean replicate. The check's statistic is position 1's share of the OOV tokens sampled at positions 1-8
(`lm_analysis.position_one_share`); for a pair, d = share(B) − share(A), SE the two binomial errors. The
training noise of d is τ² = mean over the clean pairs of (d² − SE²), each ε's pairs apart and pooled over ε
(`--per-epsilon`: that ε's alone), taken at its 95% upper bound (chi-square, Σ (runs − 1) degrees of freedom,
as `analysis.calibration`), and

    calibrated z = d / √(SE² + τ²₉₅),   one-sided, threshold 3 (the check's own).

Each pair is calibrated without its own runs (a fault pair without its clean run A; a clean pair without
both), so a clean pair's calibrated z is its false-alarm test. Rows: one per pair, with the check's z and the
calibrated one, and the cells' "found k of n" both ways.
"""

from __future__ import annotations

import argparse
import collections
import glob
import itertools
import json
import math
import os
import re

import numpy as np
from power_rates import grid
from scipy import stats

from fedgen_debug.analysis.lm_analysis import position_one_share
from fedgen_debug.stats import Z_THRESHOLD as THRESHOLD   # the check's own

_RUN = re.compile(r"word-eps(?P<epsilon>[^-]+)-concat(?P<fraction>[0-9.]+)-seed(?P<seed>\d+)$")
CONFIDENCE = 0.95


def difference(a: tuple[int, int], b: tuple[int, int]) -> tuple[float, float]:
    """(share(B) − share(A), its standard error from the samples)."""
    (k_a, n_a), (k_b, n_b) = a, b
    p_a, p_b = k_a / max(n_a, 1), k_b / max(n_b, 1)
    return p_b - p_a, math.sqrt(p_a * (1 - p_a) / max(n_a, 1) + p_b * (1 - p_b) / max(n_b, 1))


def training_variance(groups: list[list[tuple[int, int]]]) -> float:
    """τ²₉₅ of d between two clean runs of one group (an ε): the 95% upper bound of mean(d² − SE²) over
    every group's pairs, with Σ (runs − 1) degrees of freedom; 0 when the samples' noise explains them."""
    pairs = [difference(a, b) for clean in groups for a, b in itertools.combinations(clean, 2)]
    excess = float(np.mean([d * d - se * se for d, se in pairs]))
    dof = sum(len(clean) - 1 for clean in groups if len(clean) > 1)
    return max(excess, 0.0) * dof / float(stats.chi2.ppf(1.0 - CONFIDENCE, dof))


def load_runs(directories: list[str]) -> dict:
    """{(ε, fraction, out dir, seed): (k, n)} of every finished run, read from its analysis.json or from
    the analysis of the run it was the baseline of."""
    runs = {}
    for out in directories:
        for path in sorted(glob.glob(os.path.join(out, "word-*", "released", "analysis.json"))):
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
            run = os.path.basename(os.path.dirname(os.path.dirname(path)))
            match = _RUN.match(run)
            if not match or "-init" in run:
                continue
            key = (match["epsilon"], float(match["fraction"]), out, int(match["seed"]))
            runs[key] = position_one_share(report["current"])
            if "baseline" in report:   # the clean reference A of this pair: seed 2S for B's seed 2S + 1
                runs[(match["epsilon"], 0.0, out, int(match["seed"]) - 1)] = position_one_share(report["baseline"])
    return runs


def at_epsilons(runs: dict, epsilons: str) -> dict:
    """The runs at the comma-separated ε only ("inf" for ∞): their clean runs alone set the training noise."""
    wanted = {float(e) for e in epsilons.split(",")}
    return {k: v for k, v in runs.items() if float(k[0]) in wanted}


def calibrate(runs: dict, pooled: bool = True) -> list[dict]:
    """Rows of every fault pair and clean pair, calibrated against the clean runs of their ε (`pooled`: of
    every ε, each ε's pairs apart; then one τ for all ε), their own runs left out."""
    rows = []
    epsilons = sorted({k[0] for k in runs}, key=float)
    every_clean = {k: v for k, v in runs.items() if k[1] == 0.0}

    def pair_row(epsilon, a, b, left_out, two_sided: bool, **about) -> dict:
        """B against A, calibrated against the clean runs other than `left_out` (one-sided as the check;
        `two_sided` for a clean pair of no set order)."""
        kept = {k: v for k, v in every_clean.items() if k not in left_out and (pooled or k[0] == epsilon)}
        tau2 = training_variance([[v for k, v in kept.items() if k[0] == e] for e in epsilons])
        d, se = difference(a, b)
        z_samples, z = d / se if se > 0 else 0.0, d / math.sqrt(se * se + tau2)
        size = abs if two_sided else (lambda x: x)
        return {"epsilon": float(epsilon), **about, "difference": d, "standard_error": se,
                "training_noise": math.sqrt(tau2), "clean_runs": len(kept), "z_samples": z_samples,
                "calibrated_z": z, "found_samples": size(z_samples) > THRESHOLD, "found_calibrated": size(z) > THRESHOLD}

    for epsilon in epsilons:
        clean = {k: v for k, v in every_clean.items() if k[0] == epsilon}
        for b_key, b in sorted(runs.items()):
            if b_key[0] != epsilon or b_key[3] % 2 == 0:
                continue   # B runs have odd seeds (2S + 1); their A is seed 2S of the same out directory
            a_key = (epsilon, 0.0, b_key[2], b_key[3] - 1)
            if a_key not in clean:
                continue
            rows.append(pair_row(epsilon, clean[a_key], b, (a_key, b_key), False,
                                 fraction=b_key[1], out=b_key[2], seed=b_key[3]))
        # every other clean pair (not a designated A/B pair above), for the false-alarm rate
        for (ka, a), (kb, b) in itertools.combinations(sorted(clean.items()), 2):
            if ka[2] == kb[2] and kb[3] == ka[3] + 1 and ka[3] % 2 == 0:
                continue   # already a row as a designated pair of fraction 0
            rows.append({**pair_row(epsilon, a, b, (ka, kb), True, fraction=0.0, out=f"{ka[2]}|{kb[2]}",
                                    seed=f"{ka[3]}|{kb[3]}"), "any_pair": True})
    return rows


def markdown(rows: list[dict]) -> str:
    """Fraction × ε: "k of n (calibrated z, ...)", the clean row counting every clean pair (|z|, either order)."""
    def cell(epsilon, fraction) -> str:
        pairs = [r for r in rows if r["epsilon"] == epsilon and r["fraction"] == fraction]
        if not pairs:
            return ""
        found = f"{sum(r['found_calibrated'] for r in pairs)} of {len(pairs)}"
        if fraction == 0.0:
            largest = max(abs(r["calibrated_z"]) for r in pairs)
            return f"{found} (largest {largest:.1f}; check's z: {sum(abs(r['z_samples']) > THRESHOLD for r in pairs)})"
        return f"{found} ({', '.join(format(r['calibrated_z'], '.1f') for r in pairs)})"

    return grid({r["epsilon"] for r in rows}, {r["fraction"] for r in rows}, cell, "0 (clean pairs: false alarms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", help="power.py --story concat --kind word out directories")
    parser.add_argument("--out", required=True, help="the rows (JSON)")
    parser.add_argument("--per-epsilon", action="store_true",
                        help="each ε's clean runs alone (default: one training noise from every ε's pairs)")
    parser.add_argument("--epsilons", help="comma-separated: read only the runs at these ε (e.g. leave out an ε "
                                           "whose clean runs disagree far more than the others', pooled apart)")
    args = parser.parse_args()
    runs = load_runs(args.directories)
    if args.epsilons:
        runs = at_epsilons(runs, args.epsilons)
    rows = calibrate(runs, pooled=not args.per_epsilon)
    cells = collections.defaultdict(list)
    for r in rows:
        cells[(r["epsilon"], r["fraction"], bool(r.get("any_pair")))].append(r)
    table = []
    for (epsilon, fraction, any_pair), cell in sorted(cells.items()):
        table.append({"epsilon": epsilon, "fraction": fraction, "clean_pairs_both_sides": any_pair, "pairs": len(cell),
                      "found_samples": sum(r["found_samples"] for r in cell),
                      "found_calibrated": sum(r["found_calibrated"] for r in cell),
                      "calibrated_z": [round(r["calibrated_z"], 2) for r in cell],
                      "training_noise": [round(r["training_noise"], 4) for r in cell]})
        print(f"ε {epsilon:g} fraction {fraction:g}{' (other clean pairs, |z|)' if any_pair else ''}: found "
              f"{table[-1]['found_samples']} of {len(cell)} by the check's z, {table[-1]['found_calibrated']} calibrated "
              f"(z {', '.join(format(r['calibrated_z'], '.1f') for r in cell[:8])}{' ...' if len(cell) > 8 else ''})")
    print(markdown(rows))
    with open(args.out, "w") as f:
        json.dump({"rows": rows, "table": table}, f, indent=1)


if __name__ == "__main__":
    main()
