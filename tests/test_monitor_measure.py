"""The signals of one period's auxiliary (monitor/measure.py), on the runs of the suite's tiny monitor."""

import pytest

from conftest import MONITOR_AUXILIARY as AUX, MONITOR_PLAN
from fedgen_debug.analysis import lm_analysis
from fedgen_debug.monitor import measure
from fedgen_debug.monitor.plan import Auxiliary
from fedgen_debug.runs import store


def test_signal_names_are_per_auxiliary_and_kind():
    assert measure.signal_names(Auxiliary("gan", "by-user-accuracy:low")) == [
        "gan-by-user-accuracy-low/dark_background_share", "gan-by-user-accuracy-low/frechet_drift"]
    assert measure.signal_names(Auxiliary("char-lm")) == ["char-lm/space_mass"]
    assert measure.signal_names(Auxiliary("word-lm")) == ["word-lm/position_1_share_of_oov"]
    assert set(measure.DRIFT) <= set(measure.SIGNALS)


def test_char_lm_signals_are_the_seeded_draw_of_the_released_model(monitor_store):
    """Measuring a period run again gives its record's values (the draw is seeded by the plan), and the
    space mass is the share of the drawn words that contain a space, exactly."""
    _, out, _, _, _ = monitor_store
    record = store.read_json(store.period_record_path(str(out), 3))["auxiliaries"][AUX]
    again = measure.measure("char-lm", str(out / "period_003" / AUX), MONITOR_PLAN["samples"], MONITOR_PLAN["seed"])
    assert again["signals"]["space_mass"] == record["signals"]["space_mass"]
    drawn = lm_analysis.released_texts(str(out / "period_003" / AUX), MONITOR_PLAN["samples"], MONITOR_PLAN["seed"])
    with_space = sum(" " in w.strip() for w in drawn)
    assert again["signals"]["space_mass"] == pytest.approx(with_space / MONITOR_PLAN["samples"])
    assert with_space > 0   # period 3 glues every sentence
    assert again["thumbnail"]["top_oov_words"] and again["samples"] == MONITOR_PLAN["samples"]


def test_word_lm_signal_is_position_ones_share_of_the_sampled_oov_not_its_raw_rate():
    """Two bodies with the same OOV structure at twice the overall OOV rate (what DP noise does between
    periods) give the same signal; glued first tokens (position 1's OOV doubled) raise it."""
    def body(oov, tokens=(500, 480, 450, 400, 350, 300, 250, 200)):
        return {"oov_by_position": [{"position": p + 1, "tokens": t, "oov": k}
                                    for p, (t, k) in enumerate(zip(tokens, oov))]}

    clean = [10, 20, 20, 20, 10, 10, 5, 5]
    measured = measure.verdict_signals("word-lm", body(clean))
    assert measured == {"signals": {"position_1_share_of_oov": 10 / 100}, "samples": 100}
    assert measure.verdict_signals("word-lm", body([2 * k for k in clean]))["signals"] == measured["signals"]
    glued = measure.verdict_signals("word-lm", body([20] + clean[1:]))
    assert glued == {"signals": {"position_1_share_of_oov": 20 / 110}, "samples": 110}
    assert measure.verdict_signals("word-lm", body([0] * 8))["samples"] == 1   # nothing sampled: a share of 0, not 0/0


@pytest.mark.parametrize("quality, says", [
    ({"blank_share": 1.0, "noise_share": 0.0}, "100% of its samples were blank"),
    ({"blank_share": 0.0, "noise_share": 0.51}, "51% of its samples were noise"),
    ({"blank_share": 0.5, "noise_share": 0.5}, None),     # at the analyses' inconclusive share: still learning
    ({"blank_share": 0.0, "noise_share": 0.0}, None),
    ({"blank_share": 0.0, "noise_share": 0.0, "no_background_share": 0.9}, "90% of its samples were without a background"),
    ({"blank_share": 0.0, "noise_share": 0.0, "no_background_share": 0.5}, None),
])
def test_a_gan_drawing_mostly_blank_or_noise_has_a_problem(quality, says):
    problem = measure.problem("gan", {"quality": quality})
    assert (problem is None) if says is None else (says in problem)
    assert measure.problem("char-lm", {"quality": quality}) is None   # the rule is about images
