"""Compare: two runs side by side — before/after a fix, low/high accuracy — with each run's verdict,
its ε, and what its auxiliary produced (GAN sample grids, char-LM top OOV words with spaces marked).
First version: the analysis outputs as `analyze-gan` / `analyze-lm` wrote them (no round slider yet)."""

from __future__ import annotations

import csv
import os

import streamlit as st

from fedgen_debug.app.catalog import catalog, format_epsilon
from fedgen_debug.runs import store


def suggested_pair(runs) -> tuple[int, int]:
    """Indices of a pair worth comparing: same kind and data, differing in selector or bug."""
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i < j and a.kind == b.kind and a.data == b.data and (a.selector, a.bug) != (b.selector, b.bug):
                return i, j
    return 0, min(1, len(runs) - 1)


def top_words(run_dir: str) -> list[dict] | None:
    path = store.released(run_dir, store.TOP_OOV_WORDS)
    if not os.path.isfile(path):
        return None
    with open(path, newline="", encoding="utf-8") as f:
        return [{"word": r["word"], "space": "␣" if " " in r["word"] else "", "probability": float(r["probability"])}
                for r in csv.DictReader(f)]


def _column(root: str, run) -> None:
    run_dir = os.path.join(root, run.path)
    st.markdown(f"**{run.path}** — {run.kind}, {run.selector}, bug: {run.bug or 'none'}")
    st.metric("ε", format_epsilon(run.epsilon) + (" ⚠" if run.above_warning else ""))
    st.write(f"verdict: **{run.verdict or 'not analyzed yet'}**")
    samples = store.released(run_dir, store.SAMPLES_PNG)
    if os.path.isfile(samples):
        st.image(samples, caption="generated samples", width="stretch")
    words = top_words(run_dir)
    if words is not None:
        st.dataframe(words, hide_index=True)
        st.caption(f"{sum(bool(w['space']) for w in words)} of the top {len(words)} contain a space")
    if not os.path.isfile(samples) and words is None:
        st.info("No samples yet: run `fedgen-debug analyze-gan` / `analyze-lm` on this run.")


def render(root: str) -> None:
    st.header("Compare")
    runs = [r for r in catalog(root) if not r.broken]
    if len(runs) < 2:
        st.info(f"Comparing needs two runs under `{root}` — run `make demo`.")
        return
    first, second = suggested_pair(runs)
    names = [r.path for r in runs]
    left_name = st.selectbox("left", names, index=first, key="compare_left")
    right_name = st.selectbox("right", names, index=second, key="compare_right")
    left, right = st.columns(2)
    with left:
        _column(root, runs[names.index(left_name)])
    with right:
        _column(root, runs[names.index(right_name)])
