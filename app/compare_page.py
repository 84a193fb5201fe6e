"""Compare: two runs side by side — before/after a fix, low/high accuracy, misclassified/correct — with
the pair's verdict in plain words, each run's ε and what its auxiliary produced: GAN sample grids of one
size (a round slider over the training snapshots, brightness, contrast, actual size), their quality;
char-LM top OOV words with probabilities and spaces marked; word-LM OOV rate by position; and below, the
pair's diagnosis (`fedgen-debug diagnose`: ranked differences, checks, evidence) by `diagnosis_view`."""

from __future__ import annotations

import csv
import os

import streamlit as st

from fedgen_debug.app import analyses, diagnosis_view, images
from fedgen_debug.app.catalog import MODEL_KINDS, catalog
from fedgen_debug.privacy import deployment
from fedgen_debug.privacy.accounting import format_epsilon
from fedgen_debug.app.evidence import explain
from fedgen_debug.analysis.visible_text import CAPTION, any_written_out, visible_all
from fedgen_debug.runs import store

FINAL = "final"
COMPLEMENTS = ({"low", "high"}, {"misclassified", "correct"})


def _complementary(a: str, b: str) -> bool:
    """Selectors that split one population in two (T4 low/high, T2 misclassified/correct)."""
    for pair in COMPLEMENTS:
        for word in pair:
            other = (pair - {word}).pop()
            if word in a and a.replace(word, other) == b:
                return True
    return False


def suggested_pairs(runs, has_finding=None) -> list[tuple[int, int, str]]:
    """Pairs worth comparing (indices into `runs`, why): same kind and data, and complementary selectors
    under one bug, or one selector with and without the bug. Pairs whose analysis found something
    (`has_finding(a, b)`) come first, as the one worth opening (issue 54: the demo's first suggestion was
    the after-fix pair); then complementary selectors before with/without the bug."""
    found = []
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i >= j or a.kind != b.kind or a.data != b.data:
                continue
            if a.bug == b.bug and _complementary(a.selector, b.selector):
                found.append((0, i, j, f"{a.selector} vs {b.selector}" + (f" ({a.bug})" if a.bug else "")))
            elif a.selector == b.selector and a.bug != b.bug:
                found.append((1, i, j, f"{a.bug or 'no bug'} vs {b.bug or 'no bug'}"))
    finding = has_finding or (lambda a, b: False)
    found.sort(key=lambda pair: (not finding(runs[pair[1]], runs[pair[2]]), pair))
    return [(i, j, why) for _, i, j, why in found]


def _choose_pair(root: str, runs) -> tuple[object, object]:
    names = [r.path for r in runs]
    pairs = suggested_pairs(runs, lambda a, b: analyses.has_finding(analyses.pair_analysis(root, a.path, b.path)))
    # A link may name the pair (`?page=Compare&left=RUN&right=RUN`), suggested or not (a monitor's periods
    # share one selector and no bug flag, so none of them is suggested); otherwise the first suggestion.
    linked = [st.query_params.get(side) for side in ("left", "right")]
    link = (names.index(linked[0]), names.index(linked[1])) if all(name in names for name in linked) else None
    if link is not None:
        st.session_state.setdefault("compare_left", names[link[0]])
        st.session_state.setdefault("compare_right", names[link[1]])
    if pairs:
        labels = [f"{runs[i].path} ↔ {runs[j].path}  ({why})" for i, j, why in pairs]

        def apply_suggestion():
            i, j, _ = pairs[labels.index(st.session_state["compare_suggestion"])]
            st.session_state["compare_left"], st.session_state["compare_right"] = names[i], names[j]

        if link is not None and "compare_suggestion" not in st.session_state:
            match = [k for k, (i, j, _) in enumerate(pairs) if {i, j} == set(link)]
            if match:
                st.session_state["compare_suggestion"] = labels[match[0]]
        st.selectbox("suggested pair", labels, key="compare_suggestion", on_change=apply_suggestion)
        first, second, _ = pairs[labels.index(st.session_state["compare_suggestion"])]
    else:
        first, second = 0, 1
    st.session_state.setdefault("compare_left", names[first])
    st.session_state.setdefault("compare_right", names[second])
    left, right = st.columns(2)
    left_name = left.selectbox("left", names, key="compare_left")
    right_name = right.selectbox("right", names, key="compare_right")
    return runs[names.index(left_name)], runs[names.index(right_name)]


def _image_controls(root: str, runs) -> dict:
    rounds = sorted({r for run in runs for r in store.snapshot_rounds(f"{root}/{run.path}")})
    controls = st.columns(4)
    chosen = controls[0].select_slider("after round", [*rounds, FINAL], value=FINAL, key="compare_round",
                                       help="training snapshots; 'final': the samples analyze-gan drew")
    brightness = controls[1].slider("brightness", -0.5, 0.5, 0.0, 0.05, key="compare_brightness")
    contrast = controls[2].slider("contrast", 0.25, 4.0, 1.0, 0.25, key="compare_contrast")
    actual = controls[3].toggle("actual size", key="compare_actual_size",
                                help="one image pixel per screen pixel; off: enlarged to the column")
    return {"round": chosen, "brightness": brightness, "contrast": contrast, "actual": actual}


def _grid(run_dir: str, controls: dict):
    """(picture, caption) for the chosen round, or (None, why not)."""
    if controls["round"] == FINAL:
        samples = images.final_samples(run_dir)
        if samples is None:
            return None, "no final samples yet: run `fedgen-debug analyze-gan` on this run"
        return samples, "final samples (analyze-gan)"
    earlier = [r for r in store.snapshot_rounds(run_dir) if r <= controls["round"]]
    if not earlier:
        return None, f"no snapshot at or before round {controls['round']}"
    return store.load_snapshot(run_dir, earlier[-1]), f"after round {earlier[-1]}"


SNAPSHOT_SERIES = ("dark_background_share", "blank_share", "noise_share")


def snapshot_series(run_dir: str) -> dict | None:
    """The snapshots' statistics over rounds from the released eval.csv (None for runs without)."""
    path = store.released(run_dir, store.EVAL)
    if not os.path.isfile(path):
        return None
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if all(r.get(k) not in (None, "") for k in SNAPSHOT_SERIES)]
    if not rows:
        return None
    return {"round": [int(r["round"]) for r in rows],
            **{k.replace("_share", "").replace("_", " "): [float(r[k]) for r in rows] for k in SNAPSHOT_SERIES}}


def _gan_column(root: str, run, part: dict | None, controls: dict) -> None:
    samples, caption = _grid(f"{root}/{run.path}", controls)
    if samples is None:
        st.info(caption)
    else:
        picture = images.adjust(images.grid(samples), controls["brightness"], controls["contrast"])
        st.image(picture if controls["actual"] else images.enlarge(picture, 2), caption=caption,
                 width="content" if controls["actual"] else "stretch")
    quality = (part or {}).get("quality")
    if quality:
        cols = st.columns(3)
        cols[0].metric("Fréchet distance", f"{quality['frechet_distance']:.1f}", help="lower is closer to clean data")
        cols[1].metric("classifier score", f"{quality['classifier_score']:.2f}",
                       help="exp E[KL(p(y|x) || p(y))]: 1 = one class or no class, up to the number of classes")
        duplicates = quality.get("near_duplicates")
        if duplicates:
            collapsed = duplicates["share"] > 4 * duplicates["clean_share"]
            cols[2].metric("near duplicates", f"{duplicates['share']:.0%}" + (" ⚠" if collapsed else ""),
                           help=f"clean images: {duplicates['clean_share']:.0%} by construction")
            if collapsed:
                st.warning("Many near-duplicate samples: the GAN may have collapsed to a few modes.")
    if part and part.get("dark_background"):
        st.caption(f"dark background: {part['dark_background']['share']:.0%} of {part['dark_background']['samples']} "
                   "samples")
    series = snapshot_series(f"{root}/{run.path}")
    if series:
        st.line_chart(series, x="round", y=["dark background", "blank", "noise"], height=200)
        st.caption("share of each snapshot's 64 samples with a dark background, blank, or noise, over rounds")


def _lm_column(part: dict | None) -> None:
    if not part:
        st.info("Not analyzed yet: run `fedgen-debug analyze-lm` on this run (with `--baseline`).")
        return
    top, spaced_top = part.get("top_k") or [], part.get("space_top_k") or []   # analyses from before it: none
    listed = [w["word"] for w in top + spaced_top]   # both tables read in one script
    written = visible_all([w["word"] for w in top], among=listed)
    spaced = visible_all([w["word"] for w in spaced_top], space="␣", among=listed)
    if top:
        words = [{"word": word, "space": "␣" if " " in w["word"] else "", "probability": w["probability"]}
                 for word, w in zip(written, top)]
        st.dataframe(words, hide_index=True)
        st.caption(f"{sum(bool(w['space']) for w in words)} of the top {len(words)} contain a space")
    if spaced_top:
        st.dataframe([{"word with a space": word, "probability": w["probability"]}
                      for word, w in zip(spaced, spaced_top)], hide_index=True)
        st.caption("the most probable sampled words with a space: glued-token candidates (on varied text the "
                   "table above is names and rare words even when many devices glue)")
    if any_written_out(written + spaced):
        st.caption(CAPTION)
    if part.get("oov_by_position"):
        st.line_chart({"position": [p["position"] for p in part["oov_by_position"]],
                       "OOV rate": [p["oov"] / max(p["tokens"], 1) for p in part["oov_by_position"]]},
                      x="position", y="OOV rate", height=220)
        st.caption("OOV rate by position in the sampled phrases (paper Fig. 4): a glued first word lifts position 1")


def _own_verdict(root: str, run) -> None:
    """The run's verdict from its own analysis, when the pair has none (it was compared with another run)."""
    own = analyses.own_analysis(root, run.path)
    evidence = explain(own)
    if evidence is None:
        st.write(f"verdict: **{run.verdict or 'not analyzed yet'}**")
        return
    st.write(f"verdict (from this run's own analysis): **{run.verdict}**")
    st.caption(evidence["sentence"])


def render(root: str) -> None:
    st.header("Compare")
    runs = [r for r in catalog(root) if not r.broken and r.kind in MODEL_KINDS]
    if len(runs) < 2:
        st.info(f"Comparing needs two runs under `{root}` — run `make demo`.")
        return
    left, right = _choose_pair(root, runs)
    pair = analyses.pair_analysis(root, left.path, right.path)
    evidence = explain(pair)
    if evidence is not None:
        suspected = pair.get("pixel_inversion_suspected", pair.get("tokenization_bug_suspected"))
        show = st.warning if pair.get("inconclusive") else (st.error if suspected else st.success)
        show(evidence["sentence"])
        st.caption(f"statistic: {evidence['statistic']}; test: {pair['evidence'].get('test', '')}; "
                   f"z = {evidence['z']:.2f}, threshold {evidence['threshold']:g}")
    # analyze-gan's check of the T4 thresholds (near chance, or low not below high): a verdict on users
    # the primary model cannot tell apart says little, whatever its z.
    for warning in ((pair or {}).get("primary_fit") or {}).get("warnings", []):
        st.warning(f"⚠ {warning[0].upper()}{warning[1:]}.")
    controls = _image_controls(root, (left, right)) if "GAN" in (left.kind, right.kind) else None
    for column, run in zip(st.columns(2), (left, right)):
        with column:
            st.markdown(f"**{run.path}** — {run.kind}, {run.selector}, bug: {run.bug or 'none'}")
            st.metric("ε", format_epsilon(run.epsilon) + (" ⚠" if run.above_warning else ""),
                      help="this run's training release alone; the Privacy page composes the population's")
            if run.deployment_equivalent:
                st.caption("At a deployment: " + " ".join(deployment.summary_lines(run.deployment_equivalent)[:-1]))
            if pair is None:
                _own_verdict(root, run)
            part = analyses.part_for(root, run.path, pair)
            if run.kind == "GAN":
                _gan_column(root, run, part, controls)
            else:
                _lm_column(part)
    st.divider()
    diagnosis_view.render(root, left, right)
