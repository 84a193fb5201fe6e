"""Runs: every run in the store with what it is, how far it got (live while a run trains), its ε and
its verdicts."""

from __future__ import annotations

import streamlit as st

from fedgen_debug.app.catalog import catalog
from fedgen_debug.privacy.accounting import format_epsilon

EMPTY_MESSAGE = "No runs yet under `{root}` — run `make demo`, or point the app at a run store with `--runs DIR`."
SORT_KEYS = {"path": lambda r: r.path, "kind": lambda r: r.kind,
             "ε (largest first)": lambda r: -(r.epsilon if r.epsilon is not None else -1.0),
             "progress": lambda r: r.rounds_completed / max(r.rounds, 1)}


def _progress(run) -> float:
    if run.rounds:
        return run.rounds_completed / run.rounds
    return 1.0 if run.state == "finished" else 0.0  # a run without rounds (DP aggregates)


def rows(runs) -> list[dict]:
    """One row per run; ε and the verdicts right after the run's name and kind, the long data spec last:
    at 1400 px the table shows its first ~8 columns, and ε and the verdict were off screen (issue 54)."""
    return [{"run": r.path, "kind": r.kind, "ε": format_epsilon(r.epsilon) + (" ⚠" if r.above_warning else ""),
             "verdict": r.verdict or "–", "memorization": r.memorization or "–", "bug": r.bug or "–",
             "selector": r.selector, "state": r.state, "rounds": r.progress, "progress": _progress(r),
             "δ": "–" if r.delta is None else f"{r.delta:.2g}", "data": r.data} for r in runs]


REFRESH_SECONDS = 5
COLUMNS = {"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent")}


def render(root: str) -> None:
    st.header("Runs")
    running = any(r.state == "running" for r in catalog(root))
    # While a run trains the table re-reads the store every few seconds (only this part of the page).
    st.fragment(run_every=REFRESH_SECONDS if running else None)(_table)(root)
    if running:
        st.caption(f"A run is training: the table refreshes every {REFRESH_SECONDS} s.")


def _table(root: str) -> None:
    runs = catalog(root)
    if not runs:
        st.info(EMPTY_MESSAGE.format(root=root))
        return
    readable = [r for r in runs if not r.broken]
    broken = [r for r in runs if r.broken]
    kinds = sorted({r.kind for r in readable})
    chosen = st.multiselect("kind", kinds, default=kinds, key="runs_kinds")
    order = st.selectbox("sort by", list(SORT_KEYS), key="runs_sort")
    shown = sorted((r for r in readable if r.kind in chosen), key=SORT_KEYS[order])
    if any(r.above_warning for r in shown):
        st.warning("⚠: ε above 10 — weak privacy for this run.")
    st.dataframe(rows(shown), hide_index=True, column_config=COLUMNS)
    for r in broken:
        st.error(f"`{r.path}` cannot be read (half-written or corrupt): {r.broken}")
