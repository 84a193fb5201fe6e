"""Would several clean reference runs help? A run B diagnosed against k clean runs of the same users pooled
(their samples together), instead of one. A pair's difference carries both runs' training noise, 2σ²; against
the mean of k references it carries σ²(1 + 1/k), so τ shrinks by √((1 + 1/k) / 2) (0.82 at k = 3). Measured
here, not built into `diagnose` (docs/analysis.md, "Not yet").

  .venv/bin/python evaluation/pooled_references.py --clean 'runs/femnist*/images-clean-seed*' \\
      --faults 'runs/femnist_faults*/images-*-0.5-seed*' --k 1,2,3,4

Each clean run in turn is B, against a few sets of k other clean runs (false alarms); each fault run against
a few sets of k clean runs (detections). The calibration of every test comes from the clean runs it does not
use (left out). Property values are `any_bug_table`'s cached ones (1,000 samples, seed 0); unhealthy clean runs
are left out. GAN runs, replicate pairs.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import itertools
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from any_bug import expected_families  # noqa: E402
from any_bug_table import values_of  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import diagnose  # noqa: E402

SETS_PER_RUN = 4   # reference sets tried per B


def pooled(values: list[dict]) -> dict:
    return {name: np.concatenate([v[name] for v in values]) for name in values[0]}


def noise_of_pooled(calibration: C.Calibration, k: int) -> C.Calibration:
    """The calibration for B against k pooled references: τ (of a pair of runs) × √((1 + 1/k) / 2). The
    class mix (a distance, not a difference of means) keeps its pair noise."""
    factor = math.sqrt((1 + 1 / k) / 2)
    return dataclasses.replace(calibration, properties={
        name: noise if noise.offset_error or name == "predicted_class" else dataclasses.replace(
            noise, training_noise=noise.training_noise * factor, training_noise_upper=noise.training_noise_upper * factor)
        for name, noise in calibration.properties.items()})


def families(references: list[dict], b: dict, calibration: C.Calibration, k: int) -> tuple[list[str], float]:
    ranked = C.apply(diagnose.compare_values("gan", pooled(references), b), noise_of_pooled(calibration, k))
    return list(dict.fromkeys(r["family"] for r in ranked if r["significant"])), ranked[0]["calibrated_z"]


def reference_sets(n: int, k: int, avoid: int | None) -> list[list[int]]:
    """`SETS_PER_RUN` sets of k runs, each the k runs after a start (cyclically, skipping `avoid`), the
    starts spread over the n runs."""
    others = [i for i in range(n) if i != avoid]
    first = 0 if avoid is None else others.index((avoid + 1) % n)
    step = max(1, len(others) // SETS_PER_RUN)
    return [[others[(first + start + j) % len(others)] for j in range(k)]
            for start in range(0, step * SETS_PER_RUN, step)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", nargs="+", required=True, help="globs of clean replicate runs")
    parser.add_argument("--faults", nargs="*", default=[], help="globs of fault runs (...-FAULT-FRACTION-seedN)")
    parser.add_argument("--k", default="1,2,3,4")
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    runs = sorted({os.path.realpath(d) for g in args.clean for d in glob.glob(g)})
    clean = [v for v, unhealthy in (values_of("gan", d, args.samples) for d in runs) if unhealthy is None]
    faults = sorted({d for g in args.faults for d in glob.glob(g)})
    print(f"{len(clean)} healthy clean runs of {len(runs)}")
    # Every clean pair compared once; `calibration.left_out` keeps, per test, the pairs of runs it does not use.
    rows = {(a, b): diagnose.compare_values("gan", clean[a], clean[b]) for a, b in itertools.combinations(range(len(clean)), 2)}

    def left_out(used: set[int]) -> C.Calibration:
        return C.left_out(rows, used, "replicate", "gan")

    for k in (int(x) for x in args.k.split(",")):
        alarms, tests, largest = 0, 0, 0.0
        for i, b in enumerate(clean):
            for refs in reference_sets(len(clean), k, i):
                found, top = families([clean[j] for j in refs], b, left_out(set(refs) | {i}), k)
                tests, alarms, largest = tests + 1, alarms + bool(found), max(largest, abs(top))
        print(f"k = {k}: clean B against k clean references: {alarms} of {tests} alarm (largest |z| {largest:.2f})")
        for d in faults:
            fault = os.path.basename(d).split("-")[1]
            b, _ = values_of("gan", d, args.samples)
            outcomes = [families([clean[j] for j in refs], b, left_out(set(refs)), k)
                        for refs in reference_sets(len(clean), k, None)]
            first = sum(bool(f) and f[0] in expected_families(fault, "gan") for f, _ in outcomes)
            print(f"    {os.path.basename(d)}: detected {sum(bool(f) for f, _ in outcomes)} of {len(outcomes)}, "
                  f"its family first {first}; top z {[round(z, 1) for _, z in outcomes]}")


if __name__ == "__main__":
    main()
