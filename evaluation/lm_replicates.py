"""How often an LM verdict holds across independent trainings (issue 15): K demo-preset runs at 0% and K
at `--fraction` (each its own seed and run secret) on synthetic text of 300 users, every 10%-run tested
against every 0%-run (what `make demo` does once) and every 0%-run against every other 0%-run (a
false alarm when YES). The verdict's z-test counts the sampling noise of one model's samples only;
the spread between trainings of the same settings is what this measures. Prints one JSON row.

  .venv/bin/python evaluation/lm_replicates.py --kind word --replicates 3 --seed 300 --out runs/rep-word
  .venv/bin/python evaluation/lm_replicates.py --kind word --rounds 30 --cap 0 --out runs/rep-word-old

Runs are `OUT/{kind}-{fraction}-{seed}`: 0% seeds S, S + 2, ..., the others S + 1, S + 3, ...; two
train side by side (`runs.side_by_side`); finished ones are reused, and `--only none` analyses every
run directory under OUT (e.g. runs of several invocations). Runs are charged to the ledger
($FEDGEN_DEBUG_LEDGER) as any run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.runs.side_by_side import SideBySide  # noqa: E402
from fedgen_debug.experiments import sweep  # noqa: E402
from fedgen_debug.analysis import lm_analysis  # noqa: E402
from fedgen_debug.stats import Z_THRESHOLD  # noqa: E402
from fedgen_debug.training.config import ClientConfig  # noqa: E402
from fedgen_debug.training import lm_run, presets  # noqa: E402

DATA = "synthetic-text:users=300,seed=0"
RUN_NAME = re.compile(r"^(char|word)-([0-9.]+)-([0-9]+)$")


def train(run, run_dir: str, options: dict, overrides: dict) -> None:
    """The sweep's trainer on a worker: a spawned process imports the presets afresh, so the override is
    set again here."""
    preset = presets.LM_PRESETS[("demo", run.kind)]
    presets.LM_PRESETS[("demo", run.kind)] = dataclasses.replace(preset, training=dataclasses.replace(
        preset.training, **overrides))
    sweep.train_run(run, run_dir, **options)


def analysed(run_dir: str, samples: int) -> dict:
    """The verdict's body of one model (seed 0, as `analyze_lm` samples both models)."""
    return lm_analysis.analyze_model(*lm_run.load_lm(run_dir), samples, 20, 0)


def statistic(kind: str, body: dict) -> float:
    if kind == "word":
        first, oov = lm_analysis.position_one_share(body)
        return first / max(oov, 1)
    return body["space_mass"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", default="word", choices=presets.LM_KINDS)
    parser.add_argument("--replicates", type=int, default=3, help="runs per fraction")
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--rounds", type=int, help="default: the demo preset's")
    parser.add_argument("--cap", type=int, help="max examples a device trains on a round (0: all); "
                        "default: the preset's")
    parser.add_argument("--lr", type=float, help="client learning rate; default: the preset's")
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--only", default="train", choices=("train", "none"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    client = presets.LM_PRESETS[("demo", args.kind)].training.client
    overrides = {**({"rounds": args.rounds} if args.rounds else {}),
                 "client": ClientConfig(client.epochs, client.batch_size,
                                        client.learning_rate if args.lr is None else args.lr,
                                        client.max_examples if args.cap is None else (args.cap or None))}
    if args.only == "train":   # every run queued at once, two training side by side; analysed below
        comparisons = []
        for k in range(args.replicates):
            for fraction, seed in ((0.0, args.seed + 2 * k), (args.fraction, args.seed + 2 * k + 1)):
                name = f"{args.kind}-{fraction:g}-{seed}"
                run = lm_run.LMRun(args.kind, DATA, fraction, "demo", seed=seed)
                comparisons.append(sweep.Comparison(name, (sweep.Arm(name, os.path.join(args.out, name), run),)))
        with SideBySide(min(2, len(comparisons)) or 1) as workers:
            sweep.run_sweep(comparisons, lambda comparison: {}, workers=workers, ahead=len(comparisons),
                            trainer=functools.partial(train, overrides=overrides))
    runs = {}
    for name in sorted(os.listdir(args.out)):
        match = RUN_NAME.match(name)
        if match and match.group(1) == args.kind:
            runs[name] = (float(match.group(2)), analysed(os.path.join(args.out, name), args.samples))
    zero = [name for name, (fraction, _) in runs.items() if fraction == 0]
    bugged = [name for name, (fraction, _) in runs.items() if fraction > 0]
    found = [lm_analysis.verdict(args.kind, runs[a][1], runs[b][1])["z"] for a in bugged for b in zero]
    alarms = [lm_analysis.verdict(args.kind, runs[a][1], runs[b][1])["z"] for a, b in itertools.permutations(zero, 2)]
    print(json.dumps({
        "kind": args.kind, "overrides": {"rounds": args.rounds, "cap": args.cap, "lr": args.lr},
        "statistic": {name: round(statistic(args.kind, body), 4) for name, (_, body) in runs.items()},
        "bug_vs_zero": {"yes": sum(z > Z_THRESHOLD for z in found), "pairs": len(found),
                        "z_min": round(min(found), 2) if found else None,
                        "z_max": round(max(found), 2) if found else None,
                        "z_median": round(float(np.median(found)), 2) if found else None},
        "zero_vs_zero": {"yes": sum(z > Z_THRESHOLD for z in alarms), "pairs": len(alarms),
                         "z_max": round(max(alarms), 2) if alarms else None}}), flush=True)


if __name__ == "__main__":
    main()
