"""The signals of one period's auxiliary (monitor/measure.py), on the runs of the suite's tiny monitor."""

import pytest

from conftest import MONITOR_AUXILIARY as AUX, MONITOR_PLAN
from fedgen_debug.monitor import measure
from fedgen_debug.monitor.plan import Auxiliary
from fedgen_debug.runs import store


def test_signal_names_are_per_auxiliary_and_kind():
    assert measure.signal_names(Auxiliary("gan", "by-user-accuracy:low")) == [
        "gan-by-user-accuracy-low/dark_background_share", "gan-by-user-accuracy-low/frechet_drift"]
    assert measure.signal_names(Auxiliary("char-lm")) == ["char-lm/space_mass", "char-lm/oov_js_drift"]
    assert measure.signal_names(Auxiliary("word-lm")) == ["word-lm/position_1_oov_rate"]
    assert set(measure.DRIFT) <= set(measure.SIGNALS)


def test_char_lm_signals_are_the_seeded_draw_of_the_released_model(monitor_store):
    """Measuring a period run again gives its record's values (the draw is seeded by the plan), and the
    space mass is the share of the drawn words that contain a space, exactly."""
    _, out, _, _, _ = monitor_store
    record = store.read_json(store.period_record_path(str(out), 3))["auxiliaries"][AUX]
    again = measure.measure("char-lm", str(out / "period_003" / AUX), MONITOR_PLAN["samples"], MONITOR_PLAN["seed"])
    assert again["signals"]["space_mass"] == record["signals"]["space_mass"]
    assert again["word_counts"] == record["word_counts"]
    with_space = sum(c for w, c in again["word_counts"].items() if " " in w)
    assert again["signals"]["space_mass"] == pytest.approx(with_space / MONITOR_PLAN["samples"])
    assert with_space > 0   # period 3 glues every sentence
    assert again["thumbnail"]["top_oov_words"] and again["samples"] == MONITOR_PLAN["samples"]


@pytest.mark.parametrize("quality, says", [
    ({"blank_share": 1.0, "noise_share": 0.0}, "100% of its samples were blank"),
    ({"blank_share": 0.0, "noise_share": 0.51}, "51% of its samples were noise"),
    ({"blank_share": 0.5, "noise_share": 0.5}, None),     # at the analyses' inconclusive share: still learning
    ({"blank_share": 0.0, "noise_share": 0.0}, None),
])
def test_a_gan_drawing_mostly_blank_or_noise_has_a_problem(quality, says):
    problem = measure.problem("gan", {"quality": quality})
    assert (problem is None) if says is None else (says in problem)
    assert measure.problem("char-lm", {"quality": quality}) is None   # the rule is about images
