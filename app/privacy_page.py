"""Privacy: the ledger per population — ε composed over every release and over time, the budget
left, and which releases spent it. The ledger holds DP events only (a release like the weights)."""

from __future__ import annotations

import math
import os

import streamlit as st

from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.app.settings import ledger_home

MAX_CURVE_POINTS = 200  # ε over time is recomposed per prefix; older prefixes are thinned past this


def epsilon_over_time(records, delta: float) -> list[dict]:
    """Composed ε after each release (oldest first), at the population's budget δ."""
    from fedgen_debug.privacy.ledger import composed_guarantee

    step = max(1, math.ceil(len(records) / MAX_CURVE_POINTS))
    points = sorted(set(range(step - 1, len(records), step)) | {len(records) - 1})
    return [{"release": i + 1, "composed ε": composed_guarantee(records[:i + 1], delta).epsilon} for i in points]


def run_of_record(records) -> dict[str, str]:
    """Each record's run (by release id): the real path its records name, or what an old ledger wrote.

    Records written since issue 54 name their run by its real path (`privacy.run_ledger.run_source`). Older
    ledgers name a run's training by its absolute path and its other releases by the path as typed,
    often relative: relative to a working directory the ledger never recorded, so the app cannot resolve
    it (resolving it against the app's own directory would merge or split runs by accident). What the
    ledger does record is the run: every release id of a run starts with its secret's run id
    (`<run_id>/training`, `<run_id>/selection-counts`, ...). So a relative source is shown under the
    absolute path of a record with the same run id when there is exactly one such path; otherwise it
    stays as written (its own row)."""
    def run_id(record) -> str | None:
        return record.release_id.split("/", 1)[0] if "/" in record.release_id else None

    absolute: dict[str, set[str]] = {}
    for record in records:
        if os.path.isabs(record.source) and run_id(record) is not None:
            absolute.setdefault(run_id(record), set()).add(os.path.realpath(record.source))
    runs = {}
    for record in records:
        known = absolute.get(run_id(record), set()) if run_id(record) is not None else set()
        if os.path.isabs(record.source):
            runs[record.release_id] = os.path.realpath(record.source)
        elif record.source and len(known) == 1:
            runs[record.release_id] = next(iter(known))
        else:
            runs[record.release_id] = record.source or "–"
    return runs


def epsilon_per_run(records, delta: float) -> list[dict]:
    """ε composed over each run's releases (by the run that charged them, `run_of_record`), largest first."""
    from fedgen_debug.privacy.ledger import composed_guarantee

    run_of = run_of_record(records)
    runs: dict[str, list] = {}
    for record in records:
        runs.setdefault(run_of[record.release_id], []).append(record)
    rows = [{"run": run, "releases": len(rs), "ε composed": composed_guarantee(rs, delta).epsilon}
            for run, rs in runs.items()]
    return sorted(rows, key=lambda r: -r["ε composed"])


def render(root: str) -> None:
    from fedgen_debug.privacy.ledger import Ledger, LedgerCorrupted

    st.header("Privacy")
    ledger = Ledger(ledger_home())
    st.caption(f"ledger: `{ledger.path}`")
    try:
        populations = ledger.populations()
    except LedgerCorrupted as error:
        st.error(f"The ledger cannot be trusted: {error}")
        return
    if not populations:
        st.info("No release has been charged to this ledger yet — run `make demo`.")
        return
    population = st.selectbox("population", populations, key="privacy_population")
    total = ledger.total(population)
    g, budget = total.guarantee, total.budget
    cols = st.columns(4)
    cols[0].metric("ε, all releases", format_epsilon(g.epsilon))
    cols[1].metric("budget ε", format_epsilon(budget.epsilon))
    left = budget.epsilon - g.epsilon if not math.isinf(budget.epsilon) else math.inf
    cols[2].metric("budget left", format_epsilon(left) if left == left else "–")
    cols[3].metric("δ", f"{g.delta:.2g}")
    st.caption(f"N = {total.population_size} (the largest population of its releases); {len(total.releases)} "
               f"releases; budget from {budget.source!r}")
    if total.overlaps:
        st.caption(f"Its worst-off users are also in {', '.join(total.overlaps)}: those populations' releases "
                   "count for them, and are listed below.")
    if not math.isinf(g.epsilon) and g.epsilon > 10:
        st.warning("ε above 10: weak privacy for this population.")
    st.subheader("Which releases spent it")
    run_of = run_of_record(total.releases)
    st.dataframe([{"release": r.label, "ε alone": format_epsilon(r.guarantee(g.delta).epsilon),
                   "run": run_of[r.release_id], "id": r.release_id} for r in total.releases], hide_index=True)
    st.subheader("ε composed per run")
    per_run = epsilon_per_run(total.releases, g.delta)
    st.dataframe([{**r, "ε composed": format_epsilon(r["ε composed"])} for r in per_run], hide_index=True)
    curve = epsilon_over_time(list(total.releases), g.delta)
    finite = [p for p in curve if not math.isinf(p["composed ε"])]
    if len(finite) > 1:
        st.subheader("ε composed over time")
        st.line_chart(finite, x="release", y="composed ε")
    elif len(finite) < len(curve):
        st.caption("ε is ∞ from the first release without noise on; no curve to draw.")
