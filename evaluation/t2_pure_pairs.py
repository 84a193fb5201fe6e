"""How far apart are the two runs of a clean T2 pair? Groups of pure pairs (seed S's correct-examples run 2S
against its misclassified-examples run 2S + 1, finished runs only), each diagnosed with one or more calibrations:
alarms, the median and largest |calibrated z| of the first property, and the root mean square calibrated z over
all properties (a pair's whole distance in training noises, not only its tail).

  .venv/bin/python evaluation/t2_pure_pairs.py --group 'own primary=runs/t2c_*/*' \\
      --group 'shared primary=runs/t2s/*' --calibration gan-demo-t2 --calibration old-t2.json

A group's runs as `any_bug.py --select t2` names them (`images-clean-seed{2S}-correct`, `...{2S+1}-misclassified`);
property values are `any_bug_table`'s cached ones (1,000 samples, seed 0). Measured 2026-12-07 (docs/analysis.md).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from any_bug_table import values_of  # noqa: E402
from t2_batch_folds import batch_runs  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import calibration_store, diagnose  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402


def pure_pairs(pattern: str) -> list[tuple[str, str]]:
    """(correct run, misclassified run) of each seed whose two clean runs both finished (`t2_batch_folds`' naming)."""
    correct, misclassified = batch_runs(pattern)
    return [(correct[s], misclassified[s]) for s in sorted(correct)
            if s in misclassified and store.is_finished(correct[s]) and store.is_finished(misclassified[s])]


def distances(pairs: list[tuple[str, str]], calibration: C.Calibration) -> dict:
    firsts, rms, alarms = [], [], 0
    for a, b in pairs:
        ranked = C.apply(diagnose.compare_values("gan", values_of("gan", a, 1000)[0], values_of("gan", b, 1000)[0]),
                         calibration)
        zs = np.array([r["calibrated_z"] for r in ranked if r["calibrated_z"] is not None])
        firsts.append(abs(ranked[0]["calibrated_z"]))
        rms.append(float(np.sqrt(np.mean(zs ** 2))))
        alarms += bool(ranked[0]["significant"])
    return {"pairs": len(pairs), "alarms": alarms, "median_largest": float(np.median(firsts)),
            "largest": max(firsts), "mean_rms": float(np.mean(rms))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", required=True, help="NAME=GLOB of run directories")
    parser.add_argument("--calibration", action="append", required=True, help="a calibration file or shipped name")
    args = parser.parse_args()
    calibrations = {name: calibration_store.named(name) for name in args.calibration}
    for group in args.group:
        name, _, pattern = group.partition("=")
        pairs = pure_pairs(pattern)
        for calibration_name, calibration in calibrations.items():
            if pairs:
                print(json.dumps({"group": name, "calibration": calibration_name, **distances(pairs, calibration)}))
        for _, b in pairs:
            images = store.read_json(store.released(b, store.POPULATION))["images"]
            print(f"  {os.path.basename(b)}: {images:.0f} misclassified images (DP count)")


if __name__ == "__main__":
    main()
