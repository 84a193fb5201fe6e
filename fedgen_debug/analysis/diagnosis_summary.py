"""A diagnosis report (`analysis.diagnose`, schemas "fedgen-debug/diagnosis/1" to "/3") in a few fields and
one line: what a monitor's alert carries and the app's Monitoring page shows, so an alert says *what*
changed (issue 55).

Pure formatting of a released report: no numpy, no TensorFlow, no reading of run files, so the app can
import it (tests/test_layout.py: the app reaches analysis/, never monitor/). Fields the calibration work
adds to the report (`calibrated_z`, ...) are read with `.get`: a report without them is summarized by its
sampling-noise z.
"""

from __future__ import annotations

import os

TOP_DIFFERENCES = 3
TOP_FAMILIES = 3
TEXT_EVIDENCE = 8          # samples per side kept for text auxiliaries (the PNGs are kept by path)
UNHEALTHY = "unhealthy auxiliary (mostly blank/noise samples)"
SIDES = {"a": "the reference", "b": "the diagnosed run"}


ANSWER_WORDS = {"yes": "YES", "no": "no", "cannot tell": "CANNOT TELL"}


def found_its_bug(check: dict) -> bool:
    """Whether a named check of a report found its bug: suspected, and not inconclusive."""
    return bool(check.get("suspected")) and not check.get("inconclusive")


def suspect_words(check: dict) -> str:
    """" of A (...)" when a named check read A as the suspect (`diagnose.suspect_side`), else ""."""
    return " of A (the side where the primary model fails)" if check.get("suspect") == "a" else ""


def answer_of(report: dict) -> str:
    """"yes", "no" or "cannot tell" of a report or its summary; a report of schema /1 or /2 (before
    "cannot tell") answered by its `differ` alone."""
    return report.get("answer") or ("yes" if report.get("differ") else "no")


def _relative(path: str, relative_to: str | None) -> str:
    return os.path.relpath(path, relative_to) if relative_to and os.path.isabs(path) else path


def summarize(report: dict, report_path: str, relative_to: str | None = None) -> dict:
    """The compact summary of `report` (written at `report_path`): whether the two differ, the first
    families, the top differences (each with the z to show: against training noise when the report was
    calibrated, else against sampling noise), the unhealthy sides and the evidence. Paths are made
    relative to `relative_to` (a monitor directory) so the summary stays valid when the store moves."""
    top = []
    for row in report.get("differences", [])[:TOP_DIFFERENCES]:
        calibrated = row.get("calibrated_z")
        top.append({"property": row["property"], "family": row["family"], "direction": row["direction"],
                    "effect": float(row["effect"]),
                    "z": float(calibrated if calibrated is not None else row["z"]),
                    "z_against": "training noise" if calibrated is not None else "sampling noise",
                    "significant": bool(row.get("significant"))})
    evidence = report.get("evidence", {})
    kept = {key: _relative(evidence[key], relative_to) for key in ("a_png", "b_png", "chart_png") if key in evidence}
    for side in ("a", "b"):
        if side in evidence:
            kept[side] = list(evidence[side][:TEXT_EVIDENCE])
    calibration = report.get("calibration", {})
    return {"kind": report.get("kind"), "differ": bool(report.get("differ")), "answer": answer_of(report),
            "families": list(report.get("families", []))[:TOP_FAMILIES], "top": top,
            "unhealthy": dict(report.get("unhealthy", {})),
            "calibrated": bool(calibration.get("calibrated")),
            "against": calibration.get("against"),
            "report": _relative(report_path, relative_to), "evidence": kept}


def headline(summary: dict, sides: dict | None = None) -> str:
    """One line: "what changed: polarity — background_level darker, ..."; for an unhealthy side, that
    it is an unhealthy auxiliary and not a data change; uncalibrated, that it cannot tell, with what exceeds
    the samples' noise; a selection pair on a replicate calibration, the same with what exceeds that; else
    that nothing differs beyond the noise.
    `sides` names "a" and "b" ("period 2", ...) in the unhealthy case."""
    if summary.get("unavailable"):
        return f"no diagnosis: {summary['unavailable']}"
    names = {**SIDES, **(sides or {})}
    unhealthy = summary.get("unhealthy") or {}
    if unhealthy:
        reasons = "; ".join(f"{names.get(side, side)}: {reason}" for side, reason in sorted(unhealthy.items()))
        return f"{UNHEALTHY} — {reasons}; its differences are no evidence of a data change"
    significant = [row for row in summary.get("top", []) if row.get("significant")]
    if answer_of(summary) == "cannot tell" and significant and summary.get("calibrated"):
        return ("what changed: cannot tell (two selections of users, calibrated on replicate pairs only); beyond "
                "replicate pairs' training noise only: " + _by_family(significant))
    if answer_of(summary) == "cannot tell" and significant:
        return ("what changed: cannot tell against training noise (no calibration for these runs); beyond the "
                "samples' noise only: " + _by_family(significant))
    if not summary.get("differ") or not significant:
        largest = summary.get("top", [])[:1]
        tail = f" (largest: {_phrase(largest[0])})" if largest else ""
        return f"what changed: nothing beyond the {summary.get('against') or 'noise'}{tail}"
    return "what changed: " + _by_family(significant)


def _by_family(rows: list[dict]) -> str:
    by_family: dict[str, list[str]] = {}
    for row in rows:   # families in the order of their first (most important) difference
        by_family.setdefault(row["family"], []).append(_phrase(row))
    return "; ".join(f"{family} — {', '.join(phrases)}" for family, phrases in by_family.items())


def _phrase(row: dict) -> str:
    # A categories row's direction reads "more 58, 48; fewer 8": its ";" would read as a new family.
    return f"{row['property']} {row['direction'].replace('; ', ', ')}"
