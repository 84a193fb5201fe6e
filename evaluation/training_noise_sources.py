"""Where two clean trainings' difference comes from (issue 55): each property's training noise τ in
calibrations measured at other settings, against a baseline's, with a 95% interval on each ratio.

Make each calibration with `fedgen-debug calibrate RUN RUN ... --out FILE` on clean replicate runs of one
setting (e.g. the demo preset; the same without DP noise, `--noise-multiplier 0`; twice the rounds), then:

    python evaluation/training_noise_sources.py --baseline preset=PRESET.json z0=Z0.json r400=R400.json

τ is a property's run-to-run standard deviation beyond the samples' own noise (`analysis.calibration`); a
ratio τ_setting / τ_baseline below 1 means that setting's auxiliaries differ less between trainings, so a
fault of the same size reaches 1/ratio times the calibrated z. The interval is the F distribution's for
a ratio of two variances with the calibrations' degrees of freedom: runs within a setting are taken as
independent draws, which single outlying runs make optimistic (docs/analysis.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
from scipy import stats


def load(path: str) -> tuple[dict[str, float], int]:
    with open(path) as f:
        data = json.load(f)
    return {name: p["training_noise"] for name, p in data["properties"].items()}, int(data["degrees_of_freedom"])


def ratio_interval(ratio: float, dof_setting: int, dof_baseline: int, level: float = 0.95) -> tuple[float, float]:
    """95% interval of τ_setting / τ_baseline from the ratio of the two estimates (F on the variances)."""
    tail = (1 - level) / 2
    low, high = stats.f.ppf(1 - tail, dof_setting, dof_baseline), stats.f.ppf(tail, dof_setting, dof_baseline)
    return ratio / math.sqrt(low), ratio / math.sqrt(high)


def compare(baseline: tuple[dict, int], setting: tuple[dict, int]) -> dict:
    (base, dof_base), (other, dof_other) = baseline, setting
    rows = {}
    for name in sorted(set(base) & set(other)):
        if base[name] <= 0 or other[name] <= 0:   # no training noise measured: no ratio
            continue
        ratio = other[name] / base[name]
        low, high = ratio_interval(ratio, dof_other, dof_base)
        rows[name] = {"baseline": base[name], "setting": other[name], "ratio": ratio, "low": low, "high": high}
    logs = np.log([r["ratio"] for r in rows.values()])
    return {"properties": rows, "degrees_of_freedom": [dof_base, dof_other],
            "geometric_mean_ratio": float(np.exp(logs.mean())), "median_ratio": float(np.exp(np.median(logs))),
            "lower_beyond_interval": sorted(n for n, r in rows.items() if r["high"] < 1),
            "higher_beyond_interval": sorted(n for n, r in rows.items() if r["low"] > 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="NAME=CALIBRATION.json")
    parser.add_argument("settings", nargs="+", help="NAME=CALIBRATION.json, each against the baseline")
    parser.add_argument("--out", help="write every ratio as JSON")
    args = parser.parse_args(argv)
    base_name, base_path = args.baseline.split("=", 1)
    baseline = load(base_path)
    results = {}
    for item in args.settings:
        name, path = item.split("=", 1)
        result = results[name] = compare(baseline, load(path))
        dof = result["degrees_of_freedom"]
        sys.stdout.write(f"\n{name} against {base_name} (degrees of freedom {dof[1]} and {dof[0]}): τ ratio geometric "
                         f"mean {result['geometric_mean_ratio']:.2f}, median {result['median_ratio']:.2f}; "
                         f"lower beyond the 95% interval: {len(result['lower_beyond_interval'])}, higher: "
                         f"{len(result['higher_beyond_interval'])} of {len(result['properties'])}\n")
        sys.stdout.write(f"  {'property':20s} {base_name:>10s} {name:>10s}  ratio  95% interval\n")
        for prop, row in sorted(result["properties"].items(), key=lambda kv: kv[1]["ratio"]):
            sys.stdout.write(f"  {prop:20s} {row['baseline']:10.4g} {row['setting']:10.4g}  {row['ratio']:5.2f}  "
                             f"[{row['low']:.2f}, {row['high']:.2f}]\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"baseline": args.baseline, "settings": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
