"""Empirical ε (Andrew et al. 2023) against the accountant's, over noise multipliers: the same word-LM
trained with update canaries at each z, then `check-memorization`'s empirical-privacy section.
Prints one JSON row per z and a table.

  .venv/bin/python evaluation/empirical_epsilon.py --out runs/eval-empirical-eps

Runs resume; every run is charged to the privacy ledger ($FEDGEN_DEBUG_LEDGER): z = 0 needs ε = ∞.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.memorization.check import check_lm_run  # noqa: E402
from fedgen_debug.runs.store import read_json, write_json  # noqa: E402
from fedgen_debug.training.lm_run import LMRun  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic-text:users=100")
    parser.add_argument("--kind", choices=("word", "char"), default="word")
    parser.add_argument("--preset", default="test")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--clients-per-round", type=int, default=20)
    parser.add_argument("--update-canaries", type=int, default=50)
    parser.add_argument("--noise-multipliers", default="0,0.3,1,3")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    summary_path = os.path.join(args.out, "summary.json")
    try:
        summary = read_json(summary_path)
    except FileNotFoundError:
        summary = {**vars(args), "rows": []}
    comparisons = [Comparison(f"z{z:g}", (Arm("run", os.path.join(args.out, f"{args.kind}-z{z:g}"), LMRun(
        args.kind, args.data, preset=args.preset, rounds=args.rounds, clients_per_round=args.clients_per_round,
        noise_multiplier=z, update_canaries=args.update_canaries)),), {"z": z})
                   for z in (float(v) for v in args.noise_multipliers.split(","))]
    sweep = Sweep(comparisons)

    def analyze(comparison) -> dict:
        z = comparison.about["z"]
        e = check_lm_run(comparison.run_dirs["run"])["empirical_privacy"]
        row = {"z": z, "accountant_epsilon": e["accountant_epsilon"], "estimate": e["estimate"],
               "lower_bound": e["lower_bound"], "seen_mean": e["seen_mean"], "seen_std": e["seen_std"],
               "null_std": e["null_std"], "delta": e["delta"], "dimension": e["dimension"], "seen": e["seen"],
               "train_seconds": round(sweep.seconds(comparison))}
        summary["rows"] = [r for r in summary["rows"] if r["z"] != z] + [row]
        write_json(summary_path, summary)
        print(json.dumps(row), flush=True)
        return row

    sweep.collect(analyze)
    print(f"{'z':>5} {'accountant ε':>13} {'empirical ε̂':>12} {'lower bound (95%)':>18}")
    for r in sorted(summary["rows"], key=lambda r: r["z"]):
        print(f"{r['z']:>5g} {r['accountant_epsilon']:>13.4g} {r['estimate']:>12.3g} {r['lower_bound']:>18.3g}")


if __name__ == "__main__":
    main()
