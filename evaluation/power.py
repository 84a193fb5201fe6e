"""The power curve (issue 56): how often each story's bug is detected against the deployment-equivalent ε
of the auxiliaries' noise and the share of devices with the bug.

  .venv/bin/python evaluation/power.py --story concat --kind word --out runs/power-word \\
      --epsilons inf,10,4,2,1,0.5 --fractions 0.5,0.1,0.05,0.01 --seeds 0,1,2
  .venv/bin/python evaluation/power.py --story invert --out runs/power-gan --epsilons inf,4,1 --fractions 0.5,0.1

Each ε is the noise of a deployment (`--deployment`, default N = 10,000 users in rounds of 1,000 over the
run's own rounds: `privacy.deployment`): every run trains with `--match-deployment N=...,qN=...,epsilon=E`,
the z with the same noise on the mean update as that deployment at ε (ε = inf: no noise, z = 0). The
demo preset, synthetic data unless `--data`; for each (ε, seed) one clean reference run (seed 2S) and one
run per fraction (seed 2S + 1):
- `concat`: char- or word-LMs before (clean) and after (the bug on FRACTION of devices); detected: the
  named check `tokenization_bug_suspected` of `analyze_lm(after, before)`.
- `invert`: the paper's T4 pair on the data with the bug (the high-accuracy users' GAN against the
  low-accuracy users'); detected: `pixel_inversion_suspected` of `analyze_gan(low, high)` (not
  inconclusive).
Rows (one JSON line each, and `summary.json` with the detection rate per cell) name the z each run
trained at. Every run is charged to $FEDGEN_DEBUG_LEDGER; synthetic users get an unlimited budget there
(use a ledger of its own, as `any_bug.py`).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from any_bug import DEFAULT_DATA, unlimited_budget  # noqa: E402
from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402
from fedgen_debug.runs.store import write_json  # noqa: E402
from power_figures import draw_rates  # noqa: E402

DEFAULT_DEPLOYMENT = "N=10000,qN=1000"


def noise_settings(epsilon: float, deployment: str) -> dict:
    """The run's privacy settings at a deployment-equivalent ε: z = 0 at ε = inf, else matched."""
    if math.isinf(epsilon):
        return {"noise_multiplier": 0.0}
    return {"match_deployment": f"{deployment},epsilon={epsilon:g}"}


def run_config(story: str, kind: str, data: str, fraction: float, seed: int, epsilon: float, deployment: str,
               select: str = "random", rounds: int | None = None, preset: str = "demo", init: str | None = None,
               vocab: str | None = None):
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    settings = {**noise_settings(epsilon, deployment), "rounds": rounds}
    if story == "invert":
        bug = bug_settings(f"invert:{fraction}", "images") if fraction else {}
        return GANRun(data, select, preset=preset, seed=seed, init=init, **bug, **settings)
    bug = bug_settings(f"concat:{fraction}", "text") if fraction else {}
    return LMRun(kind, data, preset=preset, seed=seed, init=init, vocab=vocab, **bug, **settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--story", choices=("concat", "invert"), required=True)
    parser.add_argument("--kind", choices=("char", "word"), default="word", help="concat: the LM")
    parser.add_argument("--data", help="default: synthetic data (100 writers, 300 users)")
    parser.add_argument("--epsilons", default="inf,10,4,2,1,0.5")
    parser.add_argument("--fractions", default="0.5,0.1,0.05,0.01")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--deployment", default=DEFAULT_DEPLOYMENT,
                        help="the deployment the ε are at, without ε: N=USERS,qN=PER_ROUND[,rounds=T]")
    parser.add_argument("--rounds", type=int, help="override the preset's rounds")
    parser.add_argument("--preset", default="demo", help="the runs' preset (test: a smoke run)")
    parser.add_argument("--samples", type=int, default=5000, help="samples per side for the named check")
    parser.add_argument("--init", metavar="public:SPEC", help="both auxiliaries start from public pretraining "
                        "(`train-lm --init`, `train-gan --init`); run directories get an -init suffix")
    parser.add_argument("--vocab", help="concat: the LMs' vocabulary (file:PATH, public:SPEC or dp; default: the "
                        "run's own default), e.g. a play's production-like vocabulary from split_play.py")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    modality = "images" if args.story == "invert" else "text"
    data = args.data or DEFAULT_DATA[modality]
    unlimited_budget(data)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    fractions = [float(f) for f in args.fractions.split(",")]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    tag = "gan" if args.story == "invert" else args.kind

    def arm(name: str, epsilon: float, fraction: float, seed: int, select: str = "random") -> Arm:
        side = "" if select == "random" else f"-{select.rsplit(':', 1)[-1]}"
        directory = os.path.join(args.out, f"{tag}-eps{epsilon:g}-{args.story}{fraction:g}-seed{seed}{side}"
                                 + ("-init" if args.init else ""))
        return Arm(name, directory, run_config(args.story, args.kind, data, fraction, seed, epsilon,
                                               args.deployment, select, args.rounds, args.preset, args.init,
                                               args.vocab))

    comparisons = []
    for epsilon in epsilons:
        for s in seeds:
            for fraction in fractions:
                about = {"story": args.story, "epsilon": epsilon, "fraction": fraction, "seed": s}
                if args.story == "invert":   # both sides on the data with the bug, as the paper's T4 pair
                    arms = (arm("a", epsilon, fraction, 2 * s, "by-user-accuracy:high"),
                            arm("b", epsilon, fraction, 2 * s + 1, "by-user-accuracy:low"))
                else:
                    arms = (arm("a", epsilon, 0.0, 2 * s), arm("b", epsilon, fraction, 2 * s + 1))
                comparisons.append(Comparison(f"eps{epsilon:g}-{fraction:g}-seed{s}", arms, about))

    def analyze(comparison) -> dict:
        from fedgen_debug.runs import store

        dirs = comparison.run_dirs
        if args.story == "invert":
            from fedgen_debug.analysis.gan_report import analyze_gan

            report = analyze_gan(dirs["b"], compare_dir=dirs["a"], samples=args.samples)
            detected = bool(report["pixel_inversion_suspected"]) and not report.get("inconclusive")
        else:
            from fedgen_debug.analysis.lm_analysis import analyze_lm

            report = analyze_lm(dirs["b"], dirs["a"], samples=args.samples)
            detected = bool(report["tokenization_bug_suspected"]) and not report.get("inconclusive")
        z = {side: store.read_config(d)["training"]["dp"]["noise_multiplier"] for side, d in dirs.items()}
        out = {**comparison.about, "init": args.init, "detected": detected, "z": report.get("evidence", {}).get("z"),
               "noise_multiplier": z}
        print(json.dumps(out), flush=True)
        return out

    rows = Sweep(comparisons).collect(analyze)
    cells = collections.defaultdict(list)
    for r in rows:
        cells[(r["epsilon"], r["fraction"])].append(r["detected"])
    table = [{"epsilon": e, "fraction": f, "detected": sum(v), "seeds": len(v)} for (e, f), v in sorted(cells.items())]
    write_json(os.path.join(args.out, "summary.json"), {"story": args.story, "data": data,
                                                        "kind": tag,
                                                        "vocab": args.vocab,
                                                        "deployment": args.deployment, "rows": rows, "table": table})
    for cell in table:
        print(f"ε = {cell['epsilon']:g}, fraction {cell['fraction']:g}: detected {cell['detected']} of {cell['seeds']}")
    draw_rates(table, os.path.join(args.out, "power.png"), f"{args.story} ({tag}), deployment {args.deployment}")


if __name__ == "__main__":
    main()
