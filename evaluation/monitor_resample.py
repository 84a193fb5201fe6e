"""Re-measures finished LM monitors with more samples per period (issue 14, 1% concat), or with this
version's signal (issue 15: the word-LM's position-1 share of OOV): what the monitor would have reported
had its plan drawn `--samples` samples per period instead of its own.

The verdict signal (char-LM: space mass; word-LM: position 1's share of the sampled OOV) is
post-processing of each period's released model (no ε, no retraining): the period models are the ones
the monitor trained, only the sampling (or the signal) differs, so for a monitor whose warm
starts do not depend on its signals (`warm_start = "previous"`) the values, thresholds and alerts below
are exactly those of one with `samples = --samples` (same seed); a "last-clean" monitor would have
chosen its warm starts from these alerts, so re-run it instead. Thresholds are calibrated on the
monitor's calibration periods with the library's rule (`alerts.calibrate`: a share's sd floored at its
sampling sd, so more samples sharpen it); alerts with the plan's persistence and window.

  .venv/bin/python evaluation/monitor_resample.py --samples 10000 runs/eval-monitor/text-concat0.01-seed0 \\
      runs/eval-monitor/text-clean-seed0 runs/eval-monitor/text-clean-seed1 runs/eval-monitor/text-clean-seed2
  .venv/bin/python evaluation/monitor_resample.py --samples 5000 runs/eval-monitor/text-concat0.1-word-seed0

Prints one JSON row per monitor (the `monitor_fleet.py` summary: first alert, delay, clearing,
false alarms) and writes them to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from monitor_fleet import summarize  # noqa: E402

from fedgen_debug.monitor import alerts as alerts_lib, measure  # noqa: E402
from fedgen_debug.monitor.plan import plan_from_dict  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402


def verdict_signals(kind: str, run_dir: str, samples: int, seed: int) -> dict:
    """`measure.verdict_signals` of a period's LM, as the monitor computes it, without writing the
    analysis files into the monitor's store."""
    from fedgen_debug.training.lm_run import load_lm
    from fedgen_debug.analysis.lm_analysis import analyze_model

    return measure.verdict_signals(kind, analyze_model(*load_lm(run_dir), samples, 20, seed))


def resampled(monitor_dir: str, samples: int) -> list[dict]:
    plan = plan_from_dict(store.read_json(monitor_dir.rstrip("/") + ".plan.json"))   # monitor_fleet.py's plan file
    records = store.period_records(monitor_dir)
    (auxiliary,) = [a for a in plan.auxiliaries if a.kind in ("char-lm", "word-lm")]
    measured = {r["period"]: verdict_signals(auxiliary.kind, os.path.join(monitor_dir, f"period_{r['period']:03d}",
                                                                          auxiliary.name), samples, plan.seed)
                for r in records}
    (signal, _), *_ = measure.SIGNALS[auxiliary.kind]   # the verdict statistic comes first
    name, values = f"{auxiliary.name}/{signal}", {p: m["signals"][signal] for p, m in measured.items()}
    calibration = list(range(1, plan.alerts.calibration_periods + 1))
    clean = [values[p] for p in calibration]
    threshold = alerts_lib.calibrate(name, clean, calibration, measured[calibration[0]]["samples"])   # as the runner
    history = {p: {name: v} for p, v in values.items()}
    active = alerts_lib.active_alerts(history, {name: threshold}, plan.alerts.persistence, plan.alerts.window)
    shaped = [{**r, "alerts": [{"signal": a.signal} for a in active[r["period"]]],
               "auxiliaries": {auxiliary.name: {"signals": {signal: values[r["period"]]}}}} for r in records]
    row = summarize(plan, shaped, 0.0)
    row.update(monitor=os.path.basename(monitor_dir), samples=samples, threshold=threshold.value,
               threshold_source=threshold.source)
    row.pop("seconds")
    return [row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("monitors", nargs="+", help="finished char- or word-LM monitor directories")
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--out", default="runs/eval-monitor/resampled.json")
    args = parser.parse_args()
    rows = []
    for monitor_dir in args.monitors:
        for row in resampled(monitor_dir, args.samples):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "signals"}), flush=True)
    store.write_json(args.out, rows)


if __name__ == "__main__":
    main()
