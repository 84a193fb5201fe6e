"""What an alerting period's auxiliary changed (issue 55): `analysis.diagnose` of the period's run against a
reference run, kept as a compact summary (`analysis.diagnosis_summary`) that the alert carries.

The full report stays where `diagnose` writes it, in the alerting run's `released/diagnosis.json` (with
its evidence PNGs). A report already there for the same pair, samples and seed is read, not computed
again: a monitor that crashed after diagnosing a period and before releasing it resumes with the same
summary and no second diagnosis. Post-processing of the two runs' DP releases: no ε.
"""

from __future__ import annotations

import os

from fedgen_debug.analysis import diagnosis_summary
from fedgen_debug.runs import store

MIN_SAMPLES = 20   # `analysis.diagnose` refuses fewer; a plan may draw as few as 10 for its signals


def stored_report(reference_dir: str, run_dir: str, samples: int, seed: int) -> dict | None:
    """The diagnosis of `run_dir` against `reference_dir` already released (same samples and seed), or None."""
    path = store.released(run_dir, store.DIAGNOSIS)
    if not os.path.exists(path):
        return None
    report = store.read_json(path)
    same = (os.path.abspath(report.get("runs", {}).get("a", "")) == os.path.abspath(reference_dir)
            and os.path.abspath(report.get("runs", {}).get("b", "")) == os.path.abspath(run_dir)
            and report.get("samples") == samples and report.get("seed") == seed)
    return report if same else None


def diagnose_run(reference_dir: str, run_dir: str, samples: int, seed: int, monitor_dir: str) -> dict:
    """The summary of `run_dir` diagnosed against `reference_dir`, paths relative to `monitor_dir`.

    `samples` and `seed` must be the plan's: for a GAN, `diagnose` has `analyze_gan` draw both runs'
    samples again and release them, and the drift signal of a resumed monitor re-reads those
    (`measure.gan_features`), so they must be the draw the period's measurement made."""
    if samples < MIN_SAMPLES:
        return {"unavailable": f"the plan draws {samples} samples a period; a diagnosis needs at least "
                               f"{MIN_SAMPLES}"}
    report = stored_report(reference_dir, run_dir, samples, seed)
    if report is None:
        from fedgen_debug.analysis import diagnose

        report = diagnose.diagnose(reference_dir, run_dir, samples=samples, seed=seed)
    return diagnosis_summary.summarize(report, store.released(run_dir, store.DIAGNOSIS), relative_to=monitor_dir)
