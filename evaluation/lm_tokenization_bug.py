"""The tokenization-bug scenario at evaluation size: a 0% baseline, then one run per bug fraction,
each analyzed against the baseline. Prints one row per (kind, fraction) with the verdict statistic.

  .venv/bin/python evaluation/lm_tokenization_bug.py --data synthetic-text:users=300 \\
      --fractions 0,0.01,0.03,0.1,1 --out runs/eval-sweep            # sensitivity sweep
  .venv/bin/python evaluation/lm_tokenization_bug.py \\
      --data play:../shared/data/tinyshakespeare.txt --out runs/eval-shakespeare   # speakers = users

Run directories resume, so an interrupted evaluation continues where it stopped. The baseline uses
seed 2S and the other runs seed 2S + 1 (`--seed S`, default 0: seeds 0 and 1): a 0% run is then an
independent replicate of the baseline, and its verdict is the false-positive check; another S is
another replicate (model initialisations, bug placement; every run draws its own secret anyway). Every run is charged to the privacy ledger
($FEDGEN_DEBUG_LEDGER): an evaluation needs a budget that covers its runs (`fedgen-debug ledger budget`).
Rows hold each model's ε and the DP mean OOV rate.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.runs.store import write_json  # noqa: E402
from fedgen_debug.training.lm_run import LMRun  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402
from fedgen_debug.analysis.lm_analysis import analyze_lm  # noqa: E402


def row(kind: str, fraction: float, report: dict, seconds: float) -> dict:
    current, evidence = report["current"], report["evidence"]
    out = {"kind": kind, "bug_fraction": fraction, "train_seconds": round(seconds),
           "epsilon": round(current["privacy"]["run"]["epsilon"], 2),
           "baseline_epsilon": round(report["baseline"]["privacy"]["run"]["epsilon"], 2),
           "dp_mean_oov_rate": round(current["device_reported_oov_rate"], 4),
           "z": round(evidence["z"], 2), "suspected": report["tokenization_bug_suspected"]}
    if kind == "char":
        out.update(space_mass=round(current["space_mass"], 4),
                   split_into_vocabulary_mass=round(current["split_into_vocabulary_mass"], 4),
                   in_vocabulary_mass=round(current.get("in_vocabulary_mass", float("nan")), 4),
                   top20_with_space=current["top_k_with_space"],
                   top5=[t["word"] for t in current["top_k"][:5]])
    else:
        first = current["oov_by_position"][0]
        out.update(position_1_oov_rate=round(first["oov"] / max(first["tokens"], 1), 4),
                   positions_2_8_oov_rate=round(sum(p["oov"] for p in current["oov_by_position"][1:])
                                                / max(sum(p["tokens"] for p in current["oov_by_position"][1:]), 1), 4))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic-text:users=300")
    parser.add_argument("--fractions", default="0,0.1", help="comma-separated bug fractions")
    parser.add_argument("--kinds", default="char,word")
    parser.add_argument("--rounds", type=int, help="override the demo preset's rounds")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--vocab", help="dp, file:PATH or public:SPEC (default: the scenario's)")
    parser.add_argument("--noise-multiplier", type=float, help="override the demo preset's z")
    parser.add_argument("--clients-per-round", type=int, help="override the demo preset's qN")
    parser.add_argument("--clip", type=float, help="override the demo preset's clip S (the first round's with --adaptive-clip)")
    parser.add_argument("--adaptive-clip", type=float, metavar="Q", dest="clip_quantile",
                        help="adapt the clip to the Q quantile of update norms (same ε)")
    parser.add_argument("--tag", default="", help="suffix of the run directories")
    parser.add_argument("--selection", choices=("strict", "paper"), default="strict")
    parser.add_argument("--samples", type=int, default=5000, help="Monte-Carlo samples per analysis")
    parser.add_argument("--seed", type=int, default=0, help="replicate S: baseline seed 2S, runs seed 2S + 1")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    fractions = [float(f) for f in args.fractions.split(",")]

    def arm(name: str, kind: str, fraction: float, seed: int) -> Arm:
        run_dir = os.path.join(args.out, f"{kind}-{fraction:g}-seed{seed}" + (f"-{args.tag}" if args.tag else ""))
        return Arm(name, run_dir, LMRun(kind, args.data, fraction, "demo", rounds=args.rounds, seed=seed,
                                        vocab_size=args.vocab_size, vocab=args.vocab,
                                        noise_multiplier=args.noise_multiplier,
                                        clients_per_round=args.clients_per_round, selection=args.selection,
                                        clip=args.clip, clip_quantile=args.clip_quantile))

    # Each kind's baseline trains first, then each fraction's run, analysed against it as it finishes.
    comparisons = [Comparison(f"{kind}-{fraction:g}", (arm("baseline", kind, 0.0, 2 * args.seed),
                                                        arm("current", kind, fraction, 2 * args.seed + 1)),
                              {"kind": kind, "fraction": fraction})
                   for kind in args.kinds.split(",") for fraction in fractions]
    sweep = Sweep(comparisons)

    def analyze(comparison) -> dict:
        dirs = comparison.run_dirs
        report = analyze_lm(dirs["current"], dirs["baseline"], samples=args.samples)
        out = {**row(comparison.about["kind"], comparison.about["fraction"], report,
                     sweep.train_seconds.get(dirs["current"], 0.0)), "seed": args.seed}
        print(json.dumps(out), flush=True)
        return out

    rows = sweep.collect(analyze)
    summary = f"summary-seed{args.seed}.json" if args.seed else "summary.json"
    write_json(os.path.join(args.out, summary), {"data": args.data, "rounds": args.rounds, "rows": rows,
                                                 "noise_multiplier": args.noise_multiplier,
                                                 "clients_per_round": args.clients_per_round})


if __name__ == "__main__":
    main()
