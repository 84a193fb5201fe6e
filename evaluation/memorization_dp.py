"""Memorization with and without DP: the same LM configuration trained with canaries at several noise
multipliers, each checked with `check-memorization`. Prints one JSON row per (z, canary config).

  .venv/bin/python evaluation/memorization_dp.py --data synthetic-text:users=300 --out runs/eval-mem
  .venv/bin/python evaluation/memorization_dp.py --data play:../shared/data/tinyshakespeare.txt \\
      --out runs/eval-mem-shakespeare
  .venv/bin/python evaluation/memorization_dp.py --kind gan --data synthetic-images:writers=100 \\
      --canaries ramaswamy:n_u=4,n_e=200+ramaswamy:n_u=1,n_e=200 --out runs/eval-mem-gan
  (GAN: --cycle-client-data, --gen-ema D, --gen-upsample bilinear as train-gan's)

Runs resume; rows go into OUT/summary.json as soon as they are measured. Every run is charged to the
privacy ledger ($FEDGEN_DEBUG_LEDGER): z = 0 needs a budget of ε = ∞ (`fedgen-debug ledger budget`).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.cli.gan_cmd import add_sample_quality_flags, sample_quality_settings  # noqa: E402
from fedgen_debug.memorization.check import CheckConfig, check_lm_run  # noqa: E402
from fedgen_debug.memorization.gan_check import GanCheckConfig, check_gan_run  # noqa: E402
from fedgen_debug.memorization.report import plot_exposure  # noqa: E402
from fedgen_debug.runs.store import read_json, training_release, write_json  # noqa: E402
from fedgen_debug.training.gan_run import GANRun  # noqa: E402
from fedgen_debug.training.lm_run import LMRun  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402


def rows_of(report: dict, z: float, seconds: float) -> list[dict]:
    training = training_release(report["privacy"])
    common = {"kind": report["kind"], "z": z, "epsilon": training["epsilon"], "train_seconds": round(seconds),
              "control_exposure_max": report["verdict"]["control_exposure_max"], "passed": report["verdict"]["passed"]}
    out = [{**common, "design": "thakkar", **t} for t in report["thakkar"]]
    return out + [{**common, "design": "ramaswamy", **t} for t in report["ramaswamy"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic-text:users=300")
    parser.add_argument("--kind", choices=("word", "char", "gan"), default="word")
    parser.add_argument("--select", default="random", help="GAN: the selector (default: every image)")
    parser.add_argument("--canaries", default="ramaswamy")
    parser.add_argument("--noise-multipliers", default="0,0.1,1.0")
    parser.add_argument("--rounds", type=int, help="override the demo preset's rounds")
    parser.add_argument("--clients-per-round", type=int)
    parser.add_argument("--references", type=int, help="default: 2,000,000 suffixes (LM), 2,000 glyphs (GAN)")
    add_sample_quality_flags(parser)   # GAN only
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    summary_path = os.path.join(args.out, "summary.json")
    try:
        summary = read_json(summary_path)
    except FileNotFoundError:
        summary = {"data": args.data, "kind": args.kind, "canaries": args.canaries, "rows": []}
    comparisons = []
    for z in (float(v) for v in args.noise_multipliers.split(",")):
        settings = dict(preset="demo", rounds=args.rounds, clients_per_round=args.clients_per_round,
                        noise_multiplier=z, canaries=args.canaries)
        run = (GANRun(args.data, args.select, **sample_quality_settings(args), **settings) if args.kind == "gan"
               else LMRun(args.kind, args.data, **settings))
        comparisons.append(Comparison(f"z{z:g}", (Arm("run", os.path.join(args.out, f"{args.kind}-z{z:g}"), run),),
                                      {"z": z}))
    sweep = Sweep(comparisons)

    def analyze(comparison) -> list[dict]:
        z, run_dir = comparison.about["z"], comparison.run_dirs["run"]
        if args.kind == "gan":
            report = check_gan_run(run_dir, GanCheckConfig(references=args.references or 2_000))
        else:
            report = check_lm_run(run_dir, CheckConfig(references=args.references or 2_000_000))
        plot_exposure(report, run_dir)
        rows = rows_of(report, z, sweep.seconds(comparison))
        summary["rows"] = [r for r in summary["rows"] if r["z"] != z] + rows
        write_json(summary_path, summary)
        for row in rows:
            print(json.dumps(row), flush=True)
        return rows

    sweep.collect(analyze)


if __name__ == "__main__":
    main()
