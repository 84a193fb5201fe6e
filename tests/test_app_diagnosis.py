"""The Compare page shows the pair's diagnosis (`fedgen-debug diagnose`, issue 55) from a hand-written
released diagnosis.json on a hand-built store (seconds, no training): the verdict, the ranked table, the
named checks, the evidence pictures or lists, an unhealthy side's warning; the command when the pair has
no diagnosis; never a diagnosis of another pair."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from PIL import Image

import test_app
from test_app import _app
from test_app_catalog import _privacy, _run

FINISHED = {"state": "finished", "rounds_completed": 200, "rounds": 200}
GAN_FIRST = ("principal_axis_angle", "orientation")
WORD_FIRST = ("characters", "length")
# Where the reports say their pictures are: a store that was moved since. The app must read its own.
ELSEWHERE = "/moved/away"
_restore_env = test_app._restore_env  # autouse: puts $FEDGEN_DEBUG_RUNS back after `_app` set it


def _png(path: str, shade: int) -> None:
    Image.fromarray(np.full((6, 8), shade, np.uint8)).save(path)


def _difference(rank, prop, family, a, b, effect, z, kind="mean", calibrated_z=None, direction="more"):
    row = {"property": prop, "family": family, "description": f"{prop} per sample", "kind": kind, "a": a, "b": b,
           "effect": effect, "standard_error": 0.05, "z": z, "standardized_difference": effect * 2,
           "direction": direction, "rank": rank, "significant": abs(calibrated_z if calibrated_z is not None else z) > 4,
           "z_threshold": 4.0}
    if calibrated_z is not None:
        row["calibrated_z"] = calibrated_z
    return row


def _gan_report(a: str, b: str) -> dict:
    """Schema /2 with the calibration fields, B unhealthy."""
    return {
        "schema": "fedgen-debug/diagnosis/2", "kind": "gan", "runs": {"a": a, "b": b}, "samples": 200, "seed": 3,
        "health": {"a": {"healthy": True, "shares": {"blank": 0.0}, "reason": None},
                   "b": {"healthy": False, "shares": {"blank": 0.62}, "reason": "62% of its samples are blank"}},
        "unhealthy": {"b": "62% of its samples are blank"},
        "calibration": {"calibrated": True, "against": "7 clean replicate pairs", "z_threshold": 2.9,
                        "name": "images-T1", "pair_type": "replicate", "clean_pairs": 7,
                        "false_alarms": {"pairs": 7, "alarms": 0}, "note": "per-property RMS of clean pairs"},
        "differ": False, "families": ["orientation", "class_mix"],
        "differences": [
            _difference(1, *GAN_FIRST, 0.1, 0.7, 0.61, 21.0, calibrated_z=6.5, direction="more tilted"),
            _difference(2, "predicted_class", "class_mix", {"8": 0.099, "58": 0.001}, {"8": 0.032, "58": 0.053},
                        0.42, 18.0, kind="categories", calibrated_z=3.1, direction="more 58; fewer 8"),
            _difference(3, "dark_background", "polarity", 0.02, 0.021, 0.001, 0.1, kind="share", calibrated_z=0.05),
        ],
        "checks": [{"name": "pixel_inversion_suspected", "family": "polarity", "suspected": False,
                    "inconclusive": False, "z": 0.4, "z_threshold": 3.0, "statistic": "dark_background_share"}],
        "evidence": {key: f"{ELSEWHERE}/released/{name}" for key, name in
                     (("a_png", "diagnosis_a.png"), ("b_png", "diagnosis_b.png"), ("chart_png", "diagnosis.png"))},
    }


def _term(term, z, pa, pb):
    return {"term": term, "z": z, "count_a": int(pa * 1000), "count_b": int(pb * 1000), "probability_a": pa,
            "probability_b": pb}


def _word_report(a: str, b: str) -> dict:
    """Schema /1 (no calibrated z), both healthy, the two differ."""
    return {
        "schema": "fedgen-debug/diagnosis/1", "kind": "word", "runs": {"a": a, "b": b}, "samples": 100, "seed": 0,
        "health": {"a": {"healthy": True, "shares": {"empty": 0.0}, "reason": None},
                   "b": {"healthy": True, "shares": {"empty": 0.0}, "reason": None}},
        "calibration": {"calibrated": False, "against": "sampling noise of the two sample sets",
                        "z_threshold": 3.96, "note": "not yet calibrated against training noise"},
        "differ": True, "families": ["length"],
        "differences": [_difference(1, *WORD_FIRST, 62.9, 74.8, 0.29, 11.1, direction="longer"),
                        _difference(2, "unterminated", "length", 0.11, 0.25, 0.14, 8.1, kind="share")],
        "checks": [{"name": "tokenization_bug_suspected", "family": "spacing", "suspected": False,
                    "inconclusive": False, "z": -0.2, "z_threshold": 3.0, "statistic": "position_1_share_of_oov"}],
        "distinctive_terms": {"tokens": {"a": [_term("struct", -3.1, 0.004, 0.001)],
                                         "b": [_term("problem", 4.2, 0.01, 0.03)]},
                              "ngrams": {"a": [_term("nd ", -2.8, 0.0034, 0.002)],
                                         "b": [_term("lem", 3.3, 0.002, 0.006)]}},
        "evidence": {"a": ["i have .", "struct maven ."], "b": ["problem to fazicav activity my question"],
                     "chart_png": f"{ELSEWHERE}/released/diagnosis.png"},
    }


def diagnosed_store(root: str) -> None:
    """Three GAN runs and two word-LMs. gan/low holds the diagnosis of gan/high (A) against it, with the
    run directories absolute; gan/other one of gan/high against gan/other; lm/word-after one of
    lm/word-before against it, with the directories as typed from another working directory."""
    for name, select in (("high", "high"), ("low", "low"), ("other", "high")):
        _run(root, f"gan/{name}", {"gan": {"data": "synthetic-images:writers=10", "bug_fraction": 0.5,
                                           "select": f"by-user-accuracy:{select}"}}, FINISHED, _privacy(6.5))
    for name in ("before", "after"):
        _run(root, f"lm/word-{name}", {"lm": {"kind": "word", "data": "synthetic-text:users=30",
                                              "bug_fraction": 0.1 if name == "after" else 0.0}}, FINISHED,
             _privacy(3.0))
    released = lambda run: os.path.join(root, run, "released")  # noqa: E731
    for holder, reference in (("gan/low", "gan/high"), ("gan/other", "gan/high")):
        report = _gan_report(os.path.join(root, reference), os.path.join(root, holder))
        with open(os.path.join(released(holder), "diagnosis.json"), "w") as f:
            json.dump(report, f)
        for name, shade in (("diagnosis_a.png", 30), ("diagnosis_b.png", 220), ("diagnosis.png", 128)):
            _png(os.path.join(released(holder), name), shade)
    with open(os.path.join(released("lm/word-after"), "diagnosis.json"), "w") as f:
        json.dump(_word_report("runs/lm/word-before", "runs/lm/word-after"), f)
    _png(os.path.join(released("lm/word-after"), "diagnosis.png"), 128)


@pytest.fixture
def store(tmp_path):
    diagnosed_store(str(tmp_path))
    return tmp_path


def _compare(root, left: str, right: str):
    at = _app(root, "Compare")
    at.selectbox(key="compare_left").set_value(left).run()
    at.selectbox(key="compare_right").set_value(right).run()
    assert not at.exception, [e.value for e in at.exception]
    assert (at.selectbox(key="compare_left").value, at.selectbox(key="compare_right").value) == (left, right)
    return at


def _table(at, column: str):
    tables = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(tables) == 1, [list(d.value.columns) for d in at.dataframe]
    return tables[0]


def _images(at) -> list[str]:
    return [i.proto.imgs[0].caption for i in at.get("imgs")]


def _verdicts(at) -> list[str]:
    return [e.value for e in (*at.error, *at.success, *at.warning, *at.info) if e.value.startswith("differ:")]


@pytest.mark.parametrize("left, right", [("gan/high", "gan/low"), ("gan/low", "gan/high")])
def test_compare_shows_a_gan_pairs_diagnosis_in_either_order(store, left, right):
    at = _compare(store, left, right)
    assert _verdicts(at) == ["differ: no — a property beyond |z| 2.90, calibrated against 7 clean replicate pairs"]
    assert [s.value for s in at.success if s.value.startswith("differ:")] == _verdicts(at)
    captions = " ".join(c.value for c in at.caption)
    assert "A (reference) = `gan/high`, B = `gan/low`" in captions  # the report's sides, not the page's
    assert "7 clean replicate pairs" in captions and "false alarms on clean pairs left out: 0 of 7" in captions
    warnings = [w.value for w in at.warning if "unhealthy" in w.value]
    assert warnings == ["⚠ Auxiliary B (`gan/low`) is unhealthy: 62% of its samples are blank; its differences "
                        "say little about the data."]
    assert any(m.value == "families, most significant first: **orientation, class_mix**" for m in at.markdown)
    table = _table(at, "calibrated z")  # schema /2: the z against training noise, not the samples' z
    assert "z" not in table.columns
    first = table.iloc[0]
    assert (first["property"], first["family"], first["calibrated z"]) == (*GAN_FIRST, 6.5)
    assert (first["A"], first["B"], first["effect ± 1.96·SE"], first["B is ..."]) == ("0.1", "0.7", "+0.61 ± 0.10",
                                                                                       "more tilted")
    assert bool(first["significant"]) and not bool(table.iloc[2]["significant"])
    assert list(table["property"]) == [GAN_FIRST[0], "predicted_class", "dark_background"]
    assert table.iloc[1]["A"] == "8: 9.9%, 58: 0.1%" and table.iloc[1]["B"] == "8: 3.2%, 58: 5.3%"
    assert table.iloc[2]["A"] == "2.0%"
    assert any("`pixel_inversion_suspected`" in m.value and "**no**" in m.value and "threshold 3" in m.value
               for m in at.markdown)
    # The pictures come from the holder's released/ part, not from the report's (moved) paths.
    assert _images(at) == ["A's samples most unlike B", "B's most unlike A", "the effects, ranked"]
    urls = [i.proto.imgs[0].url for i in at.get("imgs")]
    assert len(set(urls)) == 3
    assert not at.code  # no command: the pair has its diagnosis


def test_compare_shows_a_word_lm_pairs_diagnosis_with_lists_and_distinctive_terms(store):
    at = _compare(store, "lm/word-after", "lm/word-before")  # the page reversed: A is still word-before
    assert [e.value for e in at.error if e.value.startswith("differ:")] == [
        "differ: YES — a property beyond |z| 3.96, calibrated against sampling noise of the two sample sets, "
        "not training noise"]
    assert not [w for w in at.warning if "unhealthy" in w.value]
    table = _table(at, "property")
    assert "calibrated z" not in table.columns  # schema /1: the samples' z
    assert (table.iloc[0]["property"], table.iloc[0]["family"], table.iloc[0]["z"]) == (*WORD_FIRST, 11.1)
    assert table.iloc[1]["B"] == "25.0%"
    assert any("`tokenization_bug_suspected`" in m.value for m in at.markdown)
    samples = [list(d.value["sample"]) for d in at.dataframe if list(d.value.columns) == ["sample"]]
    assert samples == [["i have .", "struct maven ."], ["problem to fazicav activity my question"]]
    headings = [m.value for m in at.markdown]
    assert "**A's samples most unlike B** (`lm/word-before`)" in headings
    assert "**B's samples most unlike A** (`lm/word-after`)" in headings
    terms = [d.value for d in at.dataframe if "P(A)" in d.value.columns]
    assert [list(t["term"]) for t in terms] == [["struct"], ["nd␣"], ["problem"], ["lem"]]
    assert terms[2].iloc[0]["P(B)"] == pytest.approx(0.03) and terms[2].iloc[0]["z"] == pytest.approx(4.2)
    assert "distinctive tokens of A" in headings and "distinctive character n-grams of B" in headings
    assert _images(at) == ["the effects, ranked"]


def test_compare_shows_cannot_tell_as_a_warning_not_as_a_difference(store):
    """Schema /3, uncalibrated, only the samples' noise exceeded: neither the red YES of /1 nor a green no."""
    path = os.path.join(store, "lm/word-after/released/diagnosis.json")
    report = {**_word_report("runs/lm/word-before", "runs/lm/word-after"), "schema": "fedgen-debug/diagnosis/3",
              "answer": "cannot tell", "answer_reason": "2 properties beyond the samples' noise, but clean pairs "
                                                        "of trainings differ that much too", "differ": False}
    with open(path, "w") as f:
        json.dump(report, f)
    at = _compare(store, "lm/word-before", "lm/word-after")
    expected = ("differ: CANNOT TELL — a property beyond |z| 3.96, calibrated against sampling noise of the two "
                "sample sets, not training noise; 2 properties beyond the samples' noise, but clean pairs of "
                "trainings differ that much too")
    assert [w.value for w in at.warning if w.value.startswith("differ:")] == [expected] == _verdicts(at)


def test_a_pair_without_a_diagnosis_shows_the_command_and_never_another_pairs(store):
    """gan/low and gan/other each hold a diagnosis, of each against gan/high: neither is this pair's."""
    at = _compare(store, "gan/low", "gan/other")
    assert not _verdicts(at) and not at.get("imgs")
    assert not [d for d in at.dataframe if "property" in d.value.columns]
    assert not [w for w in at.warning if "unhealthy" in w.value]
    assert [c.value for c in at.code] == [f"fedgen-debug diagnose {store}/gan/low {store}/gan/other"]
    assert any("No diagnosis of this pair yet" in i.value for i in at.info)
    # ... and the pair gan/other's report is about is shown.
    at.selectbox(key="compare_left").set_value("gan/high").run()
    assert len(_verdicts(at)) == 1 and "A (reference) = `gan/high`, B = `gan/other`" in " ".join(
        c.value for c in at.caption)


def test_a_diagnosis_naming_runs_elsewhere_is_not_this_pairs(store):
    """A report in gan/low about two runs of another store (same basenames under other folders) is not shown."""
    path = os.path.join(store, "gan", "low", "released", "diagnosis.json")
    with open(path, "w") as f:
        json.dump(_gan_report("/other-store/runs/high", "/other-store/runs/low"), f)
    at = _compare(store, "gan/high", "gan/low")
    assert not _verdicts(at) and at.code and not at.get("imgs")


def test_a_check_that_read_a_as_the_suspect_says_so():
    """A selection pair given its failing side first (`diagnose LOW HIGH`): the check is of A, and the line says it."""
    from fedgen_debug.app.diagnosis_view import check_line

    check = _gan_report("gan/low", "gan/high")["checks"][0]
    assert check_line(check).startswith("- check `pixel_inversion_suspected` (polarity): **no**")
    assert check_line({**check, "suspect": "a"}).startswith(
        "- check `pixel_inversion_suspected` of A (the side where the primary model fails) (polarity): **no**")


def test_compare_writes_out_characters_that_print_as_nothing_or_as_another_letter(store):
    """A zero-width space or a byte order mark would show as a blank row, a Cyrillic о as the word itself."""
    path = os.path.join(store, "lm/word-after/released/diagnosis.json")
    with open(path) as f:
        original = f.read()
    report = _word_report("runs/lm/word-before", "runs/lm/word-after")
    report["evidence"]["b"] = ["\u200b", "\ufeffthe king .", "l\u043eve", "\u0430"]
    report["distinctive_terms"]["tokens"]["b"] = [_term("\u200b", 9.0, 0.0, 0.2)]
    try:
        with open(path, "w") as f:
            json.dump(report, f)
        at = _compare(store, "lm/word-before", "lm/word-after")
    finally:
        with open(path, "w") as f:
            f.write(original)
    samples = [list(d.value["sample"]) for d in at.dataframe if list(d.value.columns) == ["sample"]]
    assert samples == [["i have .", "struct maven ."], ["⟨U+200B⟩", "⟨U+FEFF⟩the king .", "l⟨U+043E⟩ve", "⟨U+0430⟩"]]
    terms = [list(d.value["term"]) for d in at.dataframe if "P(A)" in d.value.columns]
    assert terms[2] == ["⟨U+200B⟩"]
    assert any(c.value.startswith("⟨U+XXXX⟩: a character that prints as nothing") for c in at.caption)
