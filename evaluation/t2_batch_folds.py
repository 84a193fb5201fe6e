"""Does a T2 calibration's left-out false-alarm rate hold on runs it has not seen? Clean T2 runs come in
batches (one `any_bug.py --select t2 --clean-seeds S,...` process each: seed S trains the correct-examples GAN
as run 2S and the misclassified-examples GAN as run 2S + 1). Each batch in turn is held out; a calibration is
fitted on every correct run against every misclassified run of the other batches (as `fedgen-debug calibrate
--pairs` fits one, threshold included) and diagnoses the held-out batch's pure pairs (each seed's own two
runs) and crossed pairs (every correct run of the batch against every misclassified one). The shipped
`gan-demo-t2` diagnoses the same pairs, for comparison.

  .venv/bin/python evaluation/t2_batch_folds.py --batch 'runs/t2u/*' --batch 'runs/t2c_2[3-5]/*' \\
      --batch 'runs/t2c_b1/*' ... [--write-calibration all.json]

Property values are `any_bug_table`'s cached ones (1,000 samples, seed 0); unhealthy runs are left out. With
--write-calibration, the calibration of all batches' runs is written too (`calibrate.build`, the CLI's).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import itertools
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from any_bug_table import values_of  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import calibration_store, diagnose  # noqa: E402

SAMPLES = 1000
WATCHED = ("stroke_width", "line_darkness", "extent", "edge_width", "vertical_strokes")


def batch_runs(pattern: str) -> tuple[dict[int, str], dict[int, str]]:
    """({seed: correct run}, {seed: misclassified run}) of a batch's clean runs, by the seed S of run 2S and
    2S + 1 (a fault's runs, `images-FAULT-FRACTION-seed...`, are no clean pair and are skipped)."""
    correct, misclassified = {}, {}
    for run_dir in sorted(glob.glob(pattern)):
        found = re.search(r"images-clean-seed(\d+)-(correct|misclassified)$", run_dir.rstrip("/"))
        if found:
            (correct if found.group(2) == "correct" else misclassified)[int(found.group(1)) // 2] = run_dir
    return correct, misclassified


def fitted(rows_by_pair: dict) -> C.Calibration:
    """The calibration `calibrate --pairs` fits on these pairs: the noise, and the threshold raised to the
    pairs' own left-out bound where their tails are heavier than normal."""
    noise = C.left_out(rows_by_pair, set(), "selection", "gan")
    each_left_out = C.false_alarms_left_out(rows_by_pair, "selection", "gan")
    properties = len(next(iter(rows_by_pair.values())))
    return dataclasses.replace(noise, z_threshold=C.threshold_with_clean_pairs(properties, each_left_out))


def alarms(rows_by_pair: dict, calibration: C.Calibration) -> list[tuple]:
    """(pair, top property, its calibrated z, alarm) for each pair."""
    out = []
    for pair, rows in rows_by_pair.items():
        top = C.apply(rows, calibration)[0]
        out.append((pair, top["property"], top["calibrated_z"], bool(top["significant"])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", action="append", required=True, help="a glob of one batch's run directories")
    parser.add_argument("--write-calibration", help="also write the calibration of all batches' runs here")
    args = parser.parse_args()

    runs, batch_of, side = [], [], []   # run index -> directory, batch, "correct"/"misclassified"
    pure = set()
    for b, pattern in enumerate(args.batch):
        correct, misclassified = batch_runs(pattern)
        for seed in sorted(set(correct) | set(misclassified)):
            for name, table in (("correct", correct), ("misclassified", misclassified)):
                if seed in table:
                    runs.append(table[seed]), batch_of.append(b), side.append(name)
            if seed in correct and seed in misclassified:
                pure.add((len(runs) - 2, len(runs) - 1))
    values, unhealthy = {}, []
    for i, run_dir in enumerate(runs):
        v, why = values_of("gan", run_dir, SAMPLES)
        if why is None:
            values[i] = v
        else:
            unhealthy.append(f"{os.path.basename(run_dir)} ({why})")
    a_runs = [i for i in values if side[i] == "correct"]
    b_runs = [i for i in values if side[i] == "misclassified"]
    rows = {(a, b): diagnose.compare_values("gan", values[a], values[b]) for a, b in itertools.product(a_runs, b_runs)}
    print(f"{len(runs)} runs in {len(args.batch)} batches, {len(values)} healthy"
          + (f"; left out: {', '.join(unhealthy)}" if unhealthy else ""))
    shipped = calibration_store.named("gan-demo-t2")
    totals = {"fold": [0, 0, 0, 0], "shipped": [0, 0, 0, 0]}   # pure alarms, pure pairs, crossed alarms, crossed
    for b, pattern in enumerate(args.batch):
        held = {p: r for p, r in rows.items() if batch_of[p[0]] == batch_of[p[1]] == b}
        train = {p: r for p, r in rows.items() if batch_of[p[0]] != b and batch_of[p[1]] != b}
        if not held or not train:
            continue
        calibration = fitted(train)
        for name, cal in (("fold", calibration), ("shipped", shipped)):
            found = alarms(held, cal)
            pure_found = [f for f in found if f[0] in pure]
            counts = [sum(f[3] for f in pure_found), len(pure_found), sum(f[3] for f in found), len(found)]
            totals[name] = [t + c for t, c in zip(totals[name], counts)]
            worst = max(found, key=lambda f: abs(f[2]))
            print(f"batch {b} ({pattern}) {name:7s} threshold {cal.z_threshold:.2f} ({cal.degrees_of_freedom} dof): "
                  f"pure {counts[0]} of {counts[1]}, crossed {counts[2]} of {counts[3]}; largest {worst[1]} "
                  f"{worst[2]:+.2f}" + "".join(f"; alarm {os.path.basename(runs[p[0]])} vs "
                                               f"{os.path.basename(runs[p[1]])}: {prop} {z:+.2f}"
                                               for p, prop, z, alarm in found if alarm))
    for name, (pa, pn, ca, cn) in totals.items():
        print(f"total {name:7s}: pure pairs {pa} of {pn}, crossed {ca} of {cn}")
    everyone = fitted(rows)
    print(f"all runs: {everyone.degrees_of_freedom} dof, threshold {everyone.z_threshold:.2f}; training noise "
          "(all runs / shipped): " + ", ".join(
              f"{p} {everyone.properties[p].training_noise:.4f}/{shipped.properties[p].training_noise:.4f}"
              for p in WATCHED))
    if args.write_calibration:
        from fedgen_debug.analysis import calibrate

        index = {r: k for k, r in enumerate(sorted(values))}
        built = calibrate.build([runs[i] for i in sorted(values)], [(index[a], index[b]) for a, b in rows],
                                "selection", "gan-demo-t2", samples=SAMPLES, seed=0,
                                description="evaluation/t2_batch_folds.py " + " ".join(
                                    f"--batch '{p}'" for p in args.batch))
        calibration_store.save(built, args.write_calibration)
        print(f"wrote {args.write_calibration}: {built.source['runs']} runs, {built.degrees_of_freedom} dof, "
              f"left out {built.false_alarms['alarms']} of {built.false_alarms['pairs']} pairs alarm, "
              f"threshold {built.z_threshold:.2f}")


if __name__ == "__main__":
    main()
