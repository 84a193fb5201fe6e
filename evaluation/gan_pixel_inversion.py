"""The pixel-inversion scenario at evaluation size: for each inverted-device fraction, DP-FedAvg-GANs on
two subpopulations (T4: low vs high user accuracy, or T2: misclassified vs correct examples) and the
verdict comparing them. Prints one JSON row per (selection, fraction).

  .venv/bin/python evaluation/gan_pixel_inversion.py --data synthetic-images:writers=100 \\
      --fractions 0,0.1,0.25,0.5 --out runs/eval-gan-sweep                    # sensitivity sweep
  .venv/bin/python evaluation/gan_pixel_inversion.py \\
      --data npz:../shared/data/femnist_real_184_writers.npz --selections t4,t2 \\
      --fractions 0.5,0 --primary-from-data --out runs/eval-gan-femnist      # real FEMNIST writers

A fraction of 0 is the pipeline after the fix. `--primary-from-data` trains the primary CNN centrally
on the clean data itself (the modeler's pre-update model of those writers, as in the paper, where the
classifier was trained before the bug shipped); otherwise on clean synthetic stand-in writers. Run
directories resume. Every run is charged to the privacy ledger ($FEDGEN_DEBUG_LEDGER): an evaluation
needs a budget that covers its runs (`fedgen-debug ledger budget ...`). Rows hold each GAN's ε and
the DP counts of its subpopulation (what a modeler sees), not the exact sizes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.cli.gan_cmd import add_sample_quality_flags, sample_quality_settings  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402
from fedgen_debug.runs.store import read_json, write_json  # noqa: E402
from fedgen_debug.training import presets, primary_cnn  # noqa: E402
from fedgen_debug.training.gan_run import D_STEPS, GANRun  # noqa: E402
from fedgen_debug.experiments.gan import train_public_primary  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402
from fedgen_debug.analysis.gan_report import analyze_gan  # noqa: E402

SELECTIONS = {"t4": ("by-user-accuracy:low", "by-user-accuracy:high"),
              "t2": ("by-example:misclassified", "by-example:correct"),
              # T4 & T2: the misclassified images of low-accuracy users vs the correct ones of high-accuracy
              # users; concentrates a small inverted population (10% of devices) in the first GAN's data.
              "t4t2": ("by-user-accuracy:low&by-example:misclassified", "by-user-accuracy:high&by-example:correct"),
              # T4 cut sharper: users below the DP 5th percentile of accuracy before the update (a bug on 5%
              # of devices is then most of the first GAN's users, not a fifth: DP counts 52 qualified with
              # 5% of 1,000 writers inverted, 8 without) vs the 75th as in T4.
              "t4sharp": ("by-user-accuracy:low,quantile=0.05", "by-user-accuracy:high"),
              # Sharper still: the threshold is a quantile of accuracy before the update, so a 5th-percentile
              # cut holds the 5% lowest clean writers as well as a 5% bug's (on 184 FEMNIST writers: 9 + 9, and
              # the GAN drew the clean mode). The high-accuracy GAN is t4sharp's (same run directory).
              "t4sharper": ("by-user-accuracy:low,quantile=0.025", "by-user-accuracy:high"),
              # The DP 1st percentile: on 184 writers ~2 clean ones below it, so a 5% bug's 9 are ~80% of
              # the first GAN's users (at 69%, 9 of 13, the GAN drew the clean mode).
              "t4sharpest": ("by-user-accuracy:low,quantile=0.01", "by-user-accuracy:high")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic-images:writers=100")
    parser.add_argument("--fractions", default="0.5,0")
    parser.add_argument("--selections", default="t4", help="comma-separated: " + ", ".join(SELECTIONS))
    parser.add_argument("--rounds", type=int, help="override the demo preset's rounds")
    parser.add_argument("--noise-multiplier", type=float, help="override the demo preset's z")
    parser.add_argument("--clients-per-round", type=int, help="override the demo preset's qN")
    parser.add_argument("--clip", type=float, help="override the demo preset's clip S (same ε: ε depends on z)")
    parser.add_argument("--adaptive-clip", type=float, metavar="Q", dest="clip_quantile",
                        help="adapt the clip to the Q quantile of update norms, starting at S (same ε)")
    parser.add_argument("--selection", choices=("strict", "paper"), default="strict")
    parser.add_argument("--d-step", choices=D_STEPS, default="fixed",
                        help="D's server step: over qN, or over the DP estimate of qualifying clients")
    add_sample_quality_flags(parser)
    parser.add_argument("--tag", default="", help="suffix of the run directories (e.g. z0.3)")
    parser.add_argument("--primary-from-data", action="store_true")
    parser.add_argument("--reuse-finished", action="store_true",
                        help="analyse a finished run directory as it is, even when this version would configure it "
                             "differently (e.g. the high GAN a pair shares across cuts, trained before a change)")
    parser.add_argument("--compare-dir", help="a finished GAN run to compare with instead of training the selection's "
                        "second GAN (e.g. one 0%% high-accuracy GAN as the reference of several low GANs' seeds)")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="GAN seed (bug placement, models, sampling): replicates")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    os.makedirs(args.out, exist_ok=True)
    primary = os.path.join(args.out, "primary_cnn.npz")
    if not os.path.exists(primary):
        if args.primary_from_data:
            primary_cnn.train_primary_cnn(data_spec.load_client_data(args.data), presets.primary_cnn_config("demo"), 0, 3,
                                          primary)
        else:
            train_public_primary(primary, "demo", 0)
    summary_path = os.path.join(args.out, "summary.json")

    def arm(name: str, select: str, fraction: float) -> Arm:
        run_dir = os.path.join(args.out, f"{select.replace(':', '-').replace('&', '+').replace(',', '-').replace('=', '')}-{fraction:g}"
                               + (f"-seed{args.seed}" if args.seed else "") + (f"-{args.tag}" if args.tag else ""))
        if args.reuse_finished and store.is_finished(run_dir):
            logging.getLogger(__name__).warning("%s: finished, analysed as it is (--reuse-finished)", run_dir)
            return Arm(name, run_dir)
        return Arm(name, run_dir, GANRun(args.data, select, fraction, "demo", rounds=args.rounds, seed=args.seed,
                                         primary=primary, noise_multiplier=args.noise_multiplier,
                                         clients_per_round=args.clients_per_round, clip=args.clip,
                                         clip_quantile=args.clip_quantile, selection=args.selection,
                                         d_step=args.d_step, **sample_quality_settings(args)))

    comparisons = []
    for selection in args.selections.split(","):
        for fraction in (float(f) for f in args.fractions.split(",")):
            current, compare = SELECTIONS[selection]
            # --compare-dir: a finished GAN run (trained elsewhere) is the second GAN, analysed as it is.
            reference = Arm("compare", args.compare_dir) if args.compare_dir else arm("compare", compare, fraction)
            comparisons.append(Comparison(f"{selection}-{fraction:g}", (arm("current", current, fraction), reference),
                                          {"selection": selection, "fraction": fraction}))
    sweep = Sweep(comparisons)

    def analyze(comparison) -> dict:
        selection, fraction = comparison.about["selection"], comparison.about["fraction"]
        dirs = list(comparison.run_dirs.values())
        report = analyze_gan(dirs[0], dirs[1], samples=args.samples)
        truth = simulation_truth(args.data, fraction, args.seed, primary, dirs)
        row = {"selection": selection, "inverted_fraction": fraction, "seed": args.seed, "tag": args.tag,
               "d_step": args.d_step,
               "train_seconds": round(sweep.seconds(comparison)),
               "suspected": report["pixel_inversion_suspected"], "inconclusive": report["inconclusive"],
               "z": round(report["evidence"]["z"], 2), **path_columns(report),
               **{f"{name}_{key}": value for name in ("current", "compare")
                  for key, value in (("select", report[name]["select"]),
                                     ("epsilon", round(report[name]["privacy"]["run"]["epsilon"], 2)),
                                     ("dp_users", round(report[name]["population"]["users"], 1)),
                                     ("dp_images", round(report[name]["population"]["images"])),
                                     ("dark_share", round(report[name]["dark_background"]["share"], 4)),
                                     ("blank_share", round(report["evidence"]["blank"][
                                         "current" if name == "current" else "reference"]["share"], 4)),
                                     ("no_background_share", round(report["evidence"]["no_background"][
                                         "current" if name == "current" else "reference"]["share"], 4)),
                                     ("fid", round(report[name]["quality"]["frechet_distance"], 1)),
                                     ("near_duplicates", report[name]["quality"].get("near_duplicates", {}).get("share")))},
               "primary_fit_warnings": (report["primary_fit"] or {}).get("warnings", []),
               **truth}
        print(json.dumps(row), flush=True)
        save_rows(summary_path, {"data": args.data, "primary": primary}, row)
        return row

    sweep.collect(analyze)


def path_columns(report: dict) -> dict:
    """The dark-background test along training (`gan_analysis.training_path_evidence`), for the table."""
    path = report["evidence"].get("training_path") or {}
    return {"path_suspected": path.get("suspected"), "path_dark_rounds": path.get("dark_rounds"),
            "path_max_z": None if path.get("max_z") is None else round(path["max_z"], 2),
            "path_rounds_tested": path.get("rounds_tested")}


def simulation_truth(data: str, fraction: float, seed: int, primary: str, run_dirs: list[str]) -> dict:
    """What the evaluation knows and no release says: per T4 run, how many users really fall on its side
    of the released DP threshold, and how many of them are inverted (the simulated bug's devices). Why a
    GAN drew one mode is read off these (e.g. a DP 5th percentile that overshoots lets clean writers in)."""
    from fedgen_debug.device.pixels import PixelInversionBug
    from fedgen_debug.device import gan_data

    thresholds = {d: read_json(store.released(d, store.THRESHOLD))
                  for d in run_dirs if os.path.exists(store.released(d, store.THRESHOLD))}
    if not thresholds:
        return {}
    clean = data_spec.load_client_data(data)
    bug = PixelInversionBug(fraction, seed=seed) if fraction else None
    app = bug.apply(clean) if bug else clean
    inverted = set(bug.affected_clients(app.client_ids)) if bug else set()
    accuracy = gan_data.user_accuracies(app, primary_cnn.load_primary_cnn(primary))
    truth = {"truth_inverted_users": len(inverted)}
    for name, run_dir in zip(("current", "compare"), run_dirs):
        if run_dir not in thresholds:
            continue
        (threshold,) = thresholds[run_dir].values()
        low = "by-user-accuracy:low" in store.read_config(run_dir)["gan"]["select"]
        qualified = {c for c, a in accuracy.items() if (a <= threshold if low else a >= threshold)}
        truth[f"{name}_truth_qualified"] = len(qualified)
        truth[f"{name}_truth_inverted_qualified"] = len(qualified & inverted)
        truth[f"{name}_truth_threshold_rank"] = round(sum(a <= threshold for a in accuracy.values()) / len(accuracy), 4)
    return truth


def save_rows(summary_path: str, header: dict, row: dict) -> None:
    """Adds `row` to summary.json at once (a later crash loses nothing), replacing an earlier row of
    the same (selection, fraction, seed) and keeping the rest."""
    def row_key(r):
        return r["selection"], r["inverted_fraction"], r.get("seed", 0), r.get("tag", "")

    rows = read_json(summary_path)["rows"] if os.path.exists(summary_path) else []
    rows = sorted([r for r in rows if row_key(r) != row_key(row)] + [row], key=row_key)
    write_json(summary_path, {**header, "rows": rows})


if __name__ == "__main__":
    main()
