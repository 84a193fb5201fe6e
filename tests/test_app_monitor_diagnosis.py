"""The Monitoring page shows what an alert's auxiliary changed (issue 55): the diagnosis summary the monitor
stores with each alert, the unhealthy case said as such, and the evidence (image grids, text samples, the
chart, the report's path) in an expander; on a hand-written monitor state, under AppTest."""

import os

import numpy as np
from streamlit.testing.v1 import AppTest

import fedgen_debug.app
from fedgen_debug.analysis.diagnosis_summary import UNHEALTHY
from fedgen_debug.runs import store

import test_app

APP = os.path.join(list(fedgen_debug.app.__path__)[0], "main.py")
GAN, LM = "gan-random", "char-lm"
CHANGED = "what changed: polarity — background_level darker, ink_share more ink"


_restore_env = test_app._restore_env  # autouse: puts $FEDGEN_DEBUG_RUNS back after a test set it


def _summary(kind: str, period: int, **fields) -> dict:
    run = f"period_{period:03d}/{GAN if kind == 'gan' else LM}/released"
    evidence = ({"a_png": f"{run}/diagnosis_a.png", "b_png": f"{run}/diagnosis_b.png"} if kind == "gan" else
                {"a": ["pawi", "romatitaow"], "b": ["ta  t a7u", "s t pun\u200b"]})
    return {"kind": kind, "differ": True, "families": ["polarity", "orientation"], "calibrated": False,
            "against": "sampling noise of the two sample sets", "unhealthy": {}, "report": f"{run}/diagnosis.json",
            "evidence": {**evidence, "chart_png": f"{run}/diagnosis.png"}, "reference_period": 2, "period": period,
            "top": [{"property": "background_level", "family": "polarity", "direction": "darker", "effect": -0.81,
                     "z": -20.3, "z_against": "sampling noise", "significant": True},
                    {"property": "ink_share", "family": "polarity", "direction": "more ink", "effect": 0.5,
                     "z": 11.0, "z_against": "sampling noise", "significant": True},
                    {"property": "blur", "family": "sharpness", "direction": "blurrier", "effect": 0.1, "z": 2.0,
                     "z_against": "sampling noise", "significant": False}], **fields}


def _alert(signal: str, period: int, message_tail: str, diagnosis: dict) -> dict:
    return {"signal": signal, "period": period, "since": 3, "value": 0.5, "threshold": 0.1,
            "threshold_source": "calibrated on periods 1-2", "compare": [2, period], "past_by": "5.00× its threshold",
            "message": f"ALERT {signal}: 0.5 in period {period}; compare periods 2 and {period}{message_tail}",
            "diagnosis": diagnosis}


def _monitor(root, periods: int, alerting: tuple[int, ...], lm_thumbnail: dict | None = None) -> dict:
    """A monitor's released state as `monitor.runner` writes it: a GAN alert from a monitor older than
    its message's summary (the page says it), and a char-LM alert whose auxiliary was unhealthy (its
    message says so, as the runner writes it)."""
    from PIL import Image

    out = os.path.join(root, "fleet")
    signals = [f"{GAN}/dark_background_share", f"{LM}/space_mass"]
    store.write_json(store.released(out, store.MONITOR), {
        "plan": {"periods": periods, "data": "synthetic-images:writers=16", "rounds_per_period": 2,
                 "alerts": {"calibration_periods": 2},
                 "auxiliaries": [{"kind": "gan", "select": "random"}, {"kind": "char-lm"}]},
        "state": "finished", "periods_completed": periods, "signals": signals, "budget": {},
        "thresholds": {s: {"signal": s, "value": 0.1, "source": "calibrated on periods 1-2"} for s in signals}})
    unhealthy = _summary("char", 3, differ=False, unhealthy={"b": "mostly empty samples"})
    alerts = [_alert(f"{GAN}/dark_background_share", 3, "", _summary("gan", 3)),
              _alert(f"{LM}/space_mass", 3, f". Against period 2, the last calibration period: {UNHEALTHY} — "
                                            "period 3: mostly empty samples; its differences are no evidence of a "
                                            "data change", unhealthy)]
    for period in range(1, periods + 1):
        record = {"period": period, "rollout": {"bug": None, "fraction": 0.0}, "population_epsilon": float(period),
                  "auxiliaries": {name: {"signals": {signal.split("/")[1]: 0.5 if period in alerting else 0.05},
                                         "run": f"period_{period:03d}/{name}", "start": "warm",
                                         "thumbnail": (lm_thumbnail or {}) if name == LM else {}}
                                  for name, signal in zip((GAN, LM), signals)},
                  "alerts": alerts if period in alerting else []}
        if period in alerting:
            record["diagnoses"] = {GAN: alerts[0]["diagnosis"], LM: unhealthy}
        store.write_json(store.period_record_path(out, period), record)
    for name in ("diagnosis_a.png", "diagnosis_b.png", "diagnosis.png"):
        path = os.path.join(out, "period_003", GAN, "released", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(np.full((29, 58), 200, np.uint8)).save(path)
    events = [{"event": "raised", "period": 3, "signal": a["signal"], "alert": a, "message": a["message"]}
              for a in alerts]
    if periods > max(alerting):
        events += [{"event": "cleared", "period": periods, "signal": a["signal"], "message": "cleared"} for a in alerts]
    store.write_jsonl(store.released(out, store.ALERTS), events)
    return alerts


def _page(root) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    os.environ["FEDGEN_DEBUG_RUNS"] = str(root)
    at.run()
    at.sidebar.radio[0].set_value("Monitoring").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_each_alert_shows_what_changed_and_its_evidence(tmp_path):
    _monitor(str(tmp_path), periods=3, alerting=(3,))
    at = _page(tmp_path)
    errors = [e.value for e in at.error]
    assert len(errors) == 2
    # The GAN alert's message predates the summary: the page says what changed under it.
    assert any(m.value == f"Against period 2: {CHANGED}" for m in at.markdown), [m.value for m in at.markdown]
    assert not any(CHANGED in e for e in errors)
    # The unhealthy char-LM: its message says so already (not repeated), and not as a data change.
    (lm_error,) = [e for e in errors if LM in e]
    assert f"{UNHEALTHY} — period 3: mostly empty samples" in lm_error
    assert not any(UNHEALTHY in m.value for m in at.markdown) and "what changed" not in lm_error
    # Each alert's evidence, one expander each: the top differences, the grids or samples, the report.
    labels = [e.label for e in at.expander]
    assert labels == ["Diagnosis of period 3 against period 2 (the last calibration period): evidence"] * 2
    gan, lm = at.expander
    assert not gan.dataframe   # the page's tables stay the thumbnails and the alert history
    (top,) = [m.value for m in gan.markdown if m.value.startswith("- ")]
    assert top.splitlines() == [
        "- **background_level** (polarity): period 3 is darker; effect -0.81, z -20.3 against sampling noise",
        "- **ink_share** (polarity): period 3 is more ink; effect +0.50, z +11.0 against sampling noise",
        "- **blur** (sharpness): period 3 is blurrier; effect +0.10, z +2.0 against sampling noise (not significant)"]
    images = gan.get("imgs")
    assert len(images) == 3   # period 2's and period 3's most unlike samples, and the chart
    assert any("fleet/period_003/gan-random/released/diagnosis.json" in c.value for c in gan.caption)
    assert any("period 3: mostly empty samples: an unhealthy auxiliary" in w.value for w in lm.warning)
    codes = [c.value for c in lm.code]
    assert codes == ["ta  t a7u\ns t pun⟨U+200B⟩", "pawi\nromatitaow"]   # period 3's first; the invisible written out
    assert any(c.value.startswith("⟨U+XXXX⟩: a character that prints as nothing") for c in lm.caption)
    assert any("period 3's samples most unlike period 2" in m.value for m in lm.markdown)
    # A missing evidence file is named, not an error.
    os.remove(tmp_path / "fleet" / "period_003" / GAN / "released" / "diagnosis_b.png")
    at = _page(tmp_path)
    assert len(at.expander[0].get("imgs")) == 2
    assert any("diagnosis_b.png` (not found)" in c.value for c in at.expander[0].caption)


def test_the_last_cleared_alert_keeps_its_diagnosis(tmp_path):
    _monitor(str(tmp_path), periods=4, alerting=(3,))
    at = _page(tmp_path)
    assert not at.error
    (info,) = [i.value for i in at.info if i.value.startswith("Last alert")]
    assert "cleared in period 4" in info
    assert [e.label for e in at.expander] == ["Diagnosis of period 3 against period 2 (the last calibration period): "
                                              "evidence"]


def test_a_thumbnails_top_words_write_out_a_look_alike_word_and_say_so(tmp_path):
    words = [{"word": "\u0430", "probability": 0.1}, {"word": "king", "probability": 0.05},
             {"word": "th\u0435", "probability": 0.01}]
    _monitor(str(tmp_path), periods=3, alerting=(3,), lm_thumbnail={"top_oov_words": words})
    at = _page(tmp_path)
    tables = [list(d.value["word"]) for d in at.dataframe if "word" in d.value.columns]
    assert tables and all(t == ["⟨U+0430⟩", "king", "th⟨U+0435⟩"] for t in tables)
    said = [c.value for c in at.caption if c.value.startswith("⟨U+XXXX⟩")]
    said_in_evidence = [c.value for e in at.expander for c in e.caption if c.value.startswith("⟨U+XXXX⟩")]
    assert len(said) > len(said_in_evidence)   # the thumbnails' own caption, besides the evidence's
