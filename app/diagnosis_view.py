"""The Compare page's diagnosis section: the report `fedgen-debug diagnose RUN_A RUN_B` released into
RUN_B's `released/diagnosis.json` (issue 55), shown for the chosen pair — whether the two auxiliaries'
samples differ and against which noise that was calibrated, the families, the ranked differences, the
named checks, the evidence (GAN: the two grids of samples most unlike the other side; text: the two
lists and each side's distinctive tokens and n-grams) and the chart.

The app only reads the report: it never computes one (that draws samples from both released models,
which needs TensorFlow). When the pair has none, the section shows the command that makes one.
Pictures are read from the released/ part of the run holding the report, never from the absolute paths
written in it: a store that was moved or copied still shows its own files, and the app opens nothing
outside the store's released parts. Fields a newer report adds (calibrated z, false alarms) are read
with `.get`: a report of schema /1 has none of them.
"""

from __future__ import annotations

import json
import os
import shlex

import streamlit as st

from fedgen_debug.analysis.diagnosis_summary import ANSWER_WORDS, answer_of, suspect_words
from fedgen_debug.analysis.visible_text import CAPTION, any_written_out, report_script, visible
from fedgen_debug.app import analyses
from fedgen_debug.runs import store

COMMAND = "fedgen-debug diagnose"
REQUIRED = ("kind", "runs", "calibration", "differ", "families", "differences", "checks", "evidence")
CATEGORIES_SHOWN = 3    # classes per side in the table: those whose share moved most
GAN_CAPTIONS = {"a": "A's samples most unlike B", "b": "B's most unlike A"}


def read_diagnosis(root: str, relative: str) -> dict | None:
    """The run's released diagnosis.json, or None when it has none or it cannot be read as JSON."""
    try:
        report = store.read_json(store.released(os.path.join(root, relative), store.DIAGNOSIS))
    except (OSError, ValueError, json.JSONDecodeError):
        return None
    return report if isinstance(report, dict) else None


def _diagnosed_runs(report: dict) -> tuple[str, str] | None:
    runs = report.get("runs")
    if isinstance(runs, dict) and isinstance(runs.get("a"), str) and isinstance(runs.get("b"), str):
        return runs["a"], runs["b"]
    return None


def pair_diagnosis(root: str, left: str, right: str) -> tuple[dict, str] | None:
    """(the diagnosis of these two runs, the run holding it), in either order, or None. `diagnose` writes
    into RUN_B, so the right run (B when the page reads left to right) is looked at first. Run
    directories are matched as `analyses.names` matches an analysis' run_dir (as typed, or its realpath)."""
    if left == right:
        return None
    for holder in (right, left):
        report = read_diagnosis(root, holder)
        runs = _diagnosed_runs(report or {})
        if runs is None:
            continue
        for a, b in ((left, right), (right, left)):
            if analyses.names(runs[0], root, a) and analyses.names(runs[1], root, b):
                return report, holder
    return None


def command(root: str, left: str, right: str) -> str:
    """The command that diagnoses the pair: left as the reference A, right as B."""
    return " ".join([COMMAND, *(shlex.quote(os.path.join(root, run)) for run in (left, right))])


def _side_names(report: dict, root: str, left: str, right: str) -> dict[str, str]:
    """{"a": relative path, "b": ...}: which of the page's two runs each side of the report is."""
    a, _ = _diagnosed_runs(report)
    return {"a": left, "b": right} if analyses.names(a, root, left) else {"a": right, "b": left}


# ---- the table ------------------------------------------------------------------------------------------

def _value(kind: str, value, other) -> str:
    """One side's summary: a mean, a share, or for a class mix the classes that moved most."""
    if value is None:
        return "–"
    if kind == "categories" and isinstance(value, dict):
        other = other if isinstance(other, dict) else {}
        moved = sorted(value, key=lambda c: (-abs(value.get(c, 0.0) - other.get(c, 0.0)), str(c)))
        return ", ".join(f"{c}: {value[c]:.1%}" for c in moved[:CATEGORIES_SHOWN])
    if kind == "share":
        return f"{value:.1%}"
    return f"{value:.3g}"


def _effect(row: dict) -> str:
    error = row.get("standard_error")
    interval = "" if error is None else f" ± {1.96 * error:.2f}"
    return f"{row['effect']:+.2f}{interval}"


def difference_rows(report: dict) -> tuple[list[dict], str]:
    """The ranked differences as table rows, and the z column's name: "calibrated z" (against training
    noise) when every row has one, else "z" (against the samples' noise) and, when some rows have a
    calibrated z, those beside it — a column never mixes the two."""
    ranked = sorted(report["differences"], key=lambda row: row.get("rank", 0))
    calibrated = [row.get("calibrated_z") is not None for row in ranked]
    z_column = "calibrated z" if ranked and all(calibrated) else "z"
    rows = []
    for row in ranked:
        kind = row.get("kind", "mean")
        shown = {"rank": row.get("rank"), "property": row["property"], "family": row["family"],
                 "A": _value(kind, row.get("a"), row.get("b")), "B": _value(kind, row.get("b"), row.get("a")),
                 "effect ± 1.96·SE": _effect(row),
                 z_column: round(row["calibrated_z"] if z_column == "calibrated z" else row["z"], 2)}
        if z_column == "z" and any(calibrated):
            shown["calibrated z"] = None if row.get("calibrated_z") is None else round(row["calibrated_z"], 2)
        shown.update({"B is ...": row.get("direction", ""), "significant": bool(row.get("significant")),
                      "description": row.get("description", "")})
        rows.append(shown)
    return rows, z_column


# ---- the verdict ------------------------------------------------------------------------------------------

def verdict_line(report: dict) -> str:
    calibration = report["calibration"]
    noise = "" if calibration.get("calibrated") else ", not training noise"
    threshold = "-" if calibration.get("z_threshold") is None else f"{calibration['z_threshold']:.2f}"
    line = (f"differ: {ANSWER_WORDS[answer_of(report)]} — a property beyond |z| {threshold}, calibrated against "
            f"{calibration['against']}{noise}")
    return line + (f"; {report['answer_reason']}" if report.get("answer_reason") else "")


def calibration_caption(calibration: dict) -> str:
    """What the threshold rests on, with the fields a calibrated report adds when present."""
    parts = []
    if calibration.get("name"):
        parts.append(f"calibration: {calibration['name']}")
    if calibration.get("clean_pairs") is not None:
        pair_type = calibration.get("pair_type")
        parts.append(f"{calibration['clean_pairs']} clean {pair_type + ' ' if pair_type else ''}pairs")
    alarms = calibration.get("false_alarms")
    if isinstance(alarms, dict):
        parts.append(f"false alarms on clean pairs left out: {alarms.get('alarms')} of {alarms.get('pairs')}")
    if calibration.get("note"):
        parts.append(calibration["note"])
    return "; ".join(parts)


def check_line(check: dict) -> str:
    verdict = "YES" if check.get("suspected") else "no"
    extra = " (inconclusive)" if check.get("inconclusive") else ""
    return (f"- check `{check['name']}`{suspect_words(check)} ({check.get('family', '')}): **{verdict}**{extra} — "
            f"`{check.get('statistic', '')}`, z {check['z']:.1f}, threshold {check['z_threshold']:g}")


# ---- the evidence -----------------------------------------------------------------------------------------

def _picture(run_dir: str, name: str, caption: str) -> None:
    path = store.released(run_dir, name)
    if os.path.isfile(path):
        st.image(path, caption=caption, width="content")  # its own pixels: grids are already enlarged, sharp
    else:
        st.info(f"{caption}: `{name}` is missing from the run's released/ part")


def _terms_table(rows: list[dict], script: str | None) -> list[dict]:
    return [{"term": visible(row["term"], space="␣", context=script), "P(A)": row.get("probability_a"),
             "P(B)": row.get("probability_b"), "count A": row.get("count_a"), "count B": row.get("count_b"),
             "z": None if row.get("z") is None else round(row["z"], 2)} for row in rows]


def _text_evidence(report: dict, sides: dict[str, str]) -> None:
    evidence, terms = report["evidence"], report.get("distinctive_terms") or {}
    script = report_script(report)   # both sides' text read in one script: "а" alone among English words
    written_out = False
    for column, side, other in zip(st.columns(2), ("a", "b"), ("B", "A")):
        with column:
            st.markdown(f"**{side.upper()}'s samples most unlike {other}** (`{sides[side]}`)")
            samples = [visible(sample, context=script) for sample in evidence.get(side, [])]
            st.dataframe([{"sample": sample} for sample in samples], hide_index=True)
            for kind, label in (("tokens", "tokens"), ("ngrams", "character n-grams")):
                rows = (terms.get(kind) or {}).get(side) or []
                if rows:
                    st.markdown(f"distinctive {label} of {side.upper()}")
                    table = _terms_table(rows, script)
                    st.dataframe(table, hide_index=True)
                    written_out |= any_written_out(row["term"] for row in table)
            written_out |= any_written_out(samples)
    if terms:
        st.caption("distinctive: log-odds of a term between the two sides with an informative prior (z); "
                   "P(A), P(B): its probability among each side's terms; ␣ marks a space")
    if written_out:
        st.caption(CAPTION)


def _gan_evidence(run_dir: str, sides: dict[str, str]) -> None:
    for column, side, name in zip(st.columns(2), ("a", "b"), (store.DIAGNOSIS_A_PNG, store.DIAGNOSIS_B_PNG)):
        with column:
            st.markdown(f"`{sides[side]}`")
            _picture(run_dir, name, GAN_CAPTIONS[side])


# ---- the section -------------------------------------------------------------------------------------------

def render(root: str, left, right) -> None:
    """The diagnosis of the page's pair (`left`, `right`: catalog RunSummary), or the command making one."""
    st.subheader("How their samples differ (diagnose)")
    if left.path == right.path:
        st.info("Choose two different runs to see how their samples differ.")
        return
    found = pair_diagnosis(root, left.path, right.path)
    if found is None:
        if left.kind != right.kind:
            st.info(f"`fedgen-debug diagnose` compares two runs of one kind ({left.kind} and {right.kind} here).")
            return
        st.info("No diagnosis of this pair yet. This command makes one (left as the reference A, right as B; "
                "it samples the two released models, no ε) and writes it into the right run:")
        st.code(command(root, left.path, right.path), language="bash")
        return
    report, holder = found
    missing = [key for key in REQUIRED if key not in report]
    if missing:
        st.warning(f"`{holder}`'s diagnosis.json cannot be shown (it has no {', '.join(missing)}); make it again: "
                   f"`{command(root, left.path, right.path)}`")
        return
    sides = _side_names(report, root, left.path, right.path)
    st.caption(f"A (reference) = `{sides['a']}`, B = `{sides['b']}`; {report.get('samples', '?')} samples each, "
               f"seed {report.get('seed', '?')}; every effect is B's against A's")
    for side, reason in (report.get("unhealthy") or {}).items():
        st.warning(f"⚠ Auxiliary {side.upper()} (`{sides.get(side, side)}`) is unhealthy: {reason}; its "
                   "differences say little about the data.")
    {"yes": st.error, "cannot tell": st.warning, "no": st.success}[answer_of(report)](verdict_line(report))
    caption = calibration_caption(report["calibration"])
    if caption:
        st.caption(caption)
    if report["families"]:
        st.markdown(f"families, most significant first: **{', '.join(report['families'])}**")
    rows, z_column = difference_rows(report)
    sides_wide = {side: st.column_config.TextColumn(side, width="medium") for side in ("A", "B")}  # class mixes
    st.dataframe(rows, hide_index=True, column_config=sides_wide)
    st.caption(f"ranked, most important first; effect: Cliff's delta of B against A (class mix: total-variation "
               f"distance) with its 95% interval; {z_column}: against "
               f"{'training noise' if z_column == 'calibrated z' else 'the samples’ noise'}")
    for check in report["checks"]:
        st.markdown(check_line(check))
    run_dir = os.path.join(root, holder)
    if report["kind"] == "gan":
        _gan_evidence(run_dir, sides)
    else:
        _text_evidence(report, sides)
    _picture(run_dir, store.DIAGNOSIS_PNG, "the effects, ranked")
