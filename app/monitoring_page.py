"""Monitoring: a monitor's periods as a timeline — every signal with its calibrated threshold, the
alerts (each with one click to the Compare view of the two periods it names, and what its auxiliary
changed against the last calibration period: `monitor.diagnosis`'s summary, with its evidence one click
away), the ε spent over time against the budget, and period thumbnails (sample grids, top OOV words)."""

from __future__ import annotations

import math
import os
from urllib.parse import urlencode

import streamlit as st

from fedgen_debug.analysis import diagnosis_summary
from fedgen_debug.analysis.visible_text import CAPTION, any_written_out, visible_all
from fedgen_debug.app import images
from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.app.monitors import monitors

EMPTY_MESSAGE = ("No monitor under `{root}` yet — start one with `fedgen-debug monitor --plan PLAN --out DIR` "
                 "(a directory under the run store).")
THUMBNAIL_PERIODS = 6


def compare_link(view, alert: dict) -> str | None:
    """The Compare page's link for the two periods an alert names (same auxiliary), or None."""
    auxiliary = alert["signal"].split("/", 1)[0]
    left, right = (view.run_path(p, auxiliary) for p in alert["compare"])
    if left is None or right is None:
        return None
    return "?" + urlencode({"page": "Compare", "left": left, "right": right})


def _alerts(root: str, view) -> None:
    active = view.active_alerts
    if not view.periods:
        st.info("No period has finished yet.")
        return
    if not active:
        last = view.periods[-1]["period"]
        st.success(f"No alert in period {last}." if view.thresholds else
                   f"Calibrating: thresholds come from the first "
                   f"{view.meta.get('plan', {}).get('alerts', {}).get('calibration_periods', '?')} (clean) periods.")
    for alert in active:
        st.error(alert["message"])
        _link(view, alert)
        _diagnosis(root, view, alert)
    raised = [e for e in view.events if e["event"] == "raised"]
    if not active and raised:   # the latest alert, cleared since: still one click from its two periods
        last = raised[-1]
        cleared = next((e["period"] for e in view.events if e["event"] == "cleared" and e["signal"] == last["signal"]
                        and e["period"] > last["period"]), None)
        st.info(f"Last alert (cleared in period {cleared}): {last['message']}")
        _link(view, last["alert"])
        _diagnosis(root, view, last["alert"])


def _diagnosis(root: str, view, alert: dict) -> None:
    """What the alert's auxiliary changed against the last calibration period (the summary the monitor
    stored with the alert), and the evidence behind it in an expander: the top differences, the
    samples of each side most unlike the other (image grids or text), the chart, the full report's path."""
    summary = alert.get("diagnosis")
    if not summary:
        return
    reference, period = summary.get("reference_period", "?"), summary.get("period", alert["period"])
    sides = {"a": f"period {reference}", "b": f"period {period}"}
    line = diagnosis_summary.headline(summary, sides)
    if line not in alert.get("message", ""):   # the monitor's own messages end with it already
        (st.warning if summary.get("unhealthy") else st.markdown)(f"Against period {reference}: {line}")
    with st.expander(f"Diagnosis of period {period} against period {reference} (the last calibration period): "
                     "evidence"):
        if summary.get("unavailable"):
            st.caption(line)
            return
        for side, reason in sorted(summary.get("unhealthy", {}).items()):
            st.warning(f"{sides.get(side, side)}: {reason}: an unhealthy auxiliary; its differences are no "
                       "evidence of a data change")
        if summary.get("top"):   # a list, not a table: the page's tables are the thumbnails and the history
            st.markdown("\n".join(
                f"- **{t['property']}** ({t['family']}): period {period} is {t['direction']}; "
                f"effect {t['effect']:+.2f}, z {t['z']:+.1f} against {t.get('z_against', 'sampling noise')}"
                + ("" if t.get("significant") else " (not significant)") for t in summary["top"]))
        st.caption(f"families, most significant first: {', '.join(summary.get('families', [])) or '–'}; "
                   f"calibrated against {summary.get('against') or 'sampling noise'}")
        evidence, here = summary.get("evidence", {}), os.path.join(root, view.path)
        for key, what in (("a_png", f"{sides['a']}'s samples most unlike {sides['b']}"),
                          ("b_png", f"{sides['b']}'s samples most unlike {sides['a']}"),
                          ("chart_png", "the effects, largest first")):
            if key in evidence:
                path = os.path.join(here, evidence[key])
                if os.path.isfile(path):
                    st.image(path, caption=what)
                else:
                    st.caption(f"{what}: `{evidence[key]}` (not found)")
        both = evidence.get("a", []) + evidence.get("b", [])   # read in one script (`visible_text`)
        shown = {side: visible_all(evidence.get(side, []), among=both) for side in ("a", "b")}
        for side, other in (("b", "a"), ("a", "b")):
            if shown[side]:
                st.markdown(f"**{sides[side]}'s samples most unlike {sides[other]}**")
                st.code("\n".join(shown[side]), language=None)
        if any_written_out(shown["a"] + shown["b"]):
            st.caption(CAPTION)
        if summary.get("report"):
            st.caption(f"full report: `{os.path.join(view.path, summary['report'])}` (`fedgen-debug diagnose` "
                       "prints the same for any two runs)")


def _health(view) -> None:
    """The last period's auxiliaries that had not learned their data: their signals say little."""
    last = view.periods[-1]
    for name, measured in last["auxiliaries"].items():
        if measured.get("problem"):
            then = ("the next period trains it from scratch" if measured.get("next_from_scratch") else
                    "it has not learned its data since it last started from scratch, so its plan's noise or "
                    "rounds may not suit it")
            st.warning(f"Period {last['period']}: `{name}`: {measured['problem']}. Its signals say little about "
                       f"the data; {then}.")


def _link(view, alert: dict) -> None:
    link = compare_link(view, alert)
    if link:
        a, b = alert["compare"]
        st.markdown(f"[→ Compare periods {a} and {b}]({link})")


def _timeline(view) -> None:
    names = view.meta.get("signals", [])
    for signal in names:
        series = view.signal_series(signal)
        if not series["period"]:
            continue
        threshold = view.thresholds.get(signal)
        data = {"period": series["period"], signal: series["value"]}
        if threshold:
            data["threshold"] = [threshold["value"]] * len(series["period"])
        st.line_chart(data, x="period", y=[k for k in data if k != "period"], height=200)
        alerting = [r["period"] for r in view.periods if any(a["signal"] == signal for a in r.get("alerts", []))]
        st.caption((f"threshold {threshold['value']:.4g} ({threshold['source']})" if threshold else
                    "threshold: after calibration")
                   + (f"; alerting in period(s) {', '.join(map(str, alerting))}" if alerting else ""))
    rollout = [(r["period"], r["rollout"]["fraction"]) for r in view.periods if r["rollout"].get("bug")]
    if rollout:
        st.line_chart({"period": [p for p, _ in rollout], "rollout": [f for _, f in rollout]},
                      x="period", y="rollout", height=150)
        st.caption(f"the simulated {view.periods[-1]['rollout']['bug']} rollout of the plan: the share of devices "
                   "(invert) or sentences (concat) it hits; the monitor does not see it")


def _privacy(view) -> None:
    budget = view.meta.get("budget", {})
    epsilons = [(r["period"], r["population_epsilon"]) for r in view.periods if math.isfinite(r["population_epsilon"])]
    if epsilons:
        data = {"period": [p for p, _ in epsilons], "population ε": [e for _, e in epsilons]}
        if budget.get("epsilon") and math.isfinite(budget["epsilon"]) and budget["epsilon"] < 1e12:
            data["budget"] = [budget["epsilon"]] * len(epsilons)
        st.line_chart(data, x="period", y=[k for k in data if k != "period"], height=200)
    if budget:
        st.caption(f"population `{budget.get('population')}`: budget ε = {format_epsilon(budget.get('epsilon'))} at "
                   f"δ = {budget.get('delta', 0):.2g}; checked before period {budget.get('checked_before_period', 1)}: affords "
                   f"{budget.get('affordable_periods')} of {view.planned} period(s). Every period's releases are "
                   "composed in the ledger (Privacy page).")


def _thumbnails(root: str, view) -> None:
    shown = view.periods[-THUMBNAIL_PERIODS:]
    if not shown:
        return
    auxiliaries = list(shown[-1]["auxiliaries"])
    auxiliary = st.selectbox("auxiliary", auxiliaries, key="monitor_auxiliary") if len(auxiliaries) > 1 \
        else auxiliaries[0]
    for column, record in zip(st.columns(len(shown)), shown):
        measured = record["auxiliaries"].get(auxiliary)
        with column:
            st.markdown(f"**period {record['period']}**" + (" ⚠" if record.get("alerts") else ""))
            if measured is None:
                st.caption("not run")
                continue
            start = measured.get("start", "")
            if start.startswith("from scratch") and record["period"] > 1:
                st.caption("trained from scratch")
            elif start.endswith("its last within every threshold"):   # a "last-clean" warm start during an alert
                st.caption(f"trained on from period {start.split()[3].rstrip(',')}, the last clean one")
            if measured.get("problem"):
                st.caption(f"⚠ {measured['problem']}")
            thumbnail = measured.get("thumbnail", {})
            if "samples_png" in thumbnail:
                samples = images.final_samples(f"{root}/{view.path}/{measured['run']}")
                if samples is not None:
                    st.image(images.grid(samples), width="stretch")
            elif "top_oov_words" in thumbnail:
                top = thumbnail["top_oov_words"][:8]
                words = visible_all([w["word"] for w in top], space="␣")
                st.dataframe([{"word": word, "p": round(w["probability"], 4)} for word, w in zip(words, top)],
                             hide_index=True)
                if any_written_out(words):
                    st.caption(CAPTION)
            elif "phrases_with_unk" in thumbnail:
                for phrase in visible_all(thumbnail["phrases_with_unk"][:3]):
                    st.caption(phrase)


def render(root: str) -> None:
    st.header("Monitoring")
    found = monitors(root)
    if not found:
        st.info(EMPTY_MESSAGE.format(root=root))
        return
    names = [m.path for m in found]
    asked = st.query_params.get("monitor")
    chosen = st.selectbox("monitor", names, index=names.index(asked) if asked in names else 0, key="monitor_choice")
    view = found[names.index(chosen)]
    if view.broken:
        st.error(f"`{view.path}` cannot be read (half-written or corrupt): {view.broken}")
        return
    plan = view.meta.get("plan", {})
    cols = st.columns(4)
    cols[0].metric("periods", f"{len(view.periods)}/{view.planned}", help=f"state: {view.meta.get('state', '?')}")
    cols[1].metric("alerts now", len(view.active_alerts))
    last_epsilon = view.periods[-1]["population_epsilon"] if view.periods else None
    cols[2].metric("population ε", format_epsilon(last_epsilon), help="after the last period, all releases composed")
    cols[3].metric("rounds / period", plan.get("rounds_per_period", "–"))
    st.caption(f"data `{plan.get('data')}`; auxiliaries: "
               + ", ".join(f"{a['kind']} ({a['select']})" if a["kind"] == "gan" else a["kind"]
                           for a in plan.get("auxiliaries", [])))
    st.subheader("Alerts")
    _alerts(root, view)
    if view.periods:
        _health(view)
    st.subheader("Signals over periods")
    _timeline(view)
    st.subheader("Privacy over time")
    _privacy(view)
    st.subheader("Recent periods")
    _thumbnails(root, view)
    if view.events:
        st.subheader("Alert history")
        st.dataframe([{"period": e["period"], "event": e["event"], "signal": e["signal"], "message": e["message"]}
                      for e in view.events], hide_index=True)
