"""Memorization: the checker's report of a run — verdict, the papers' tables, empirical ε, pictures."""

from __future__ import annotations

import json
import math
import os

import streamlit as st

from fedgen_debug.app.catalog import find_runs
from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.runs import store

NONE_MESSAGE = ("No run under `{root}` has been checked yet: train with `--canaries` (or `--update-canaries`) and "
                "run `fedgen-debug check-memorization RUN_DIR`.")


def checked_runs(root: str) -> list[str]:
    return [r for r in find_runs(root) if os.path.isfile(store.released(os.path.join(root, r), store.MEMORIZATION))]


def render(root: str) -> None:
    st.header("Memorization")
    runs = checked_runs(root)
    if not runs:
        st.info(NONE_MESSAGE.format(root=root))
        return
    chosen = st.selectbox("run", runs, key="memorization_run")
    run_dir = os.path.join(root, chosen)
    try:
        report = store.read_json(store.released(run_dir, store.MEMORIZATION))
        verdict = report["verdict"]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
        st.error(f"`{chosen}`: the memorization report cannot be read: {error}")
        return
    if verdict["passed"]:
        st.success(f"PASS — no inserted canary above {verdict['max_exposure_bits']:g} bits of exposure")
    else:
        reasons = [f"{len(verdict['over_threshold'])} inserted canaries above {verdict['max_exposure_bits']:g} bits"] \
            if verdict["over_threshold"] else []
        if verdict.get("empirical_bound_exceeds_accountant"):
            reasons.append("the empirical ε lower bound exceeds the accountant's ε")
        st.error("FAIL — " + "; ".join(reasons))
    if verdict.get("control_exposure_max") is not None:
        st.caption(f"controls (never inserted): exposure up to {verdict['control_exposure_max']:.1f} bits")
    for title, key in (("Thakkar et al. (Tables 1/2): memorized per p_u × p_e", "thakkar"),
                       ("Ramaswamy et al. (Table 4): ranks per n_u × n_e", "ramaswamy")):
        if report.get(key):
            st.subheader(title)
            st.dataframe(report[key], hide_index=True)
    empirical = report.get("empirical_privacy")
    if empirical:
        st.subheader("Empirical ε (update canaries, final model only)")
        cols = st.columns(3)
        cols[0].metric("accountant ε", format_epsilon(empirical["accountant_epsilon"]))
        cols[1].metric("empirical ε̂", format_epsilon(empirical['estimate']))
        cols[2].metric(f"lower bound ({1 - empirical['alpha']:.0%})", f"{empirical['lower_bound']:.3g}")
    for name in (store.MEMORIZATION_PNG, store.MEMORIZATION_GLYPHS_PNG):
        path = store.released(run_dir, name)
        if os.path.isfile(path):
            st.image(path, width="stretch")
    if report.get("log2_space") and not math.isnan(report["log2_space"]):
        st.caption(f"log2 |R| = {report['log2_space']:.1f} bits; {report.get('references', 0):,} references per canary")
