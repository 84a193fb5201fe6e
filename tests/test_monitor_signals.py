"""Drift signals between periods (monitor/signals.py), on hand-built word counts."""

import math

import pytest

from fedgen_debug.monitor.signals import js_divergence


def test_js_divergence_closed_forms():
    assert js_divergence({"a": 3, "b": 1}, {"a": 3, "b": 1}) == pytest.approx(0.0)
    assert js_divergence({"a": 5}, {"b": 5}, smoothing=0.0) == pytest.approx(1.0)  # disjoint: one bit
    # p = (1, 0), q = (1/2, 1/2): m = (3/4, 1/4); JS = (log2(4/3) + (1/2 log2(2/3) + 1/2 log2(2))) / 2.
    expected = (math.log2(4 / 3) + 0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)) / 2
    assert js_divergence({"a": 2}, {"a": 1, "b": 1}, smoothing=0.0) == pytest.approx(expected)
    a, b = {"i have": 9, "ing": 1}, {"ing": 7, "lol": 3}
    assert js_divergence(a, b) == pytest.approx(js_divergence(b, a))
    assert 0 < js_divergence(a, b) < js_divergence(a, b, smoothing=0.0) <= 1


def test_js_divergence_refuses_bad_tables():
    with pytest.raises(ValueError, match="at least one word"):
        js_divergence({}, {})
    with pytest.raises(ValueError, match=">= 0"):
        js_divergence({"a": -2}, {"a": 1}, smoothing=0.0)
    with pytest.raises(ValueError, match="empty"):
        js_divergence({"a": 0}, {"a": 1}, smoothing=0.0)


def test_js_divergence_over_the_top_words_folds_the_rest_into_one_bucket():
    a = {"i have": 50, "ing": 30, **{f"rare{i}": 1 for i in range(20)}}
    b = {"ing": 60, "lol": 20, **{f"odd{i}": 1 for i in range(20)}}
    # Two words kept ("ing", "i have" by their counts together), the rare ones summed: exactly the
    # divergence of the folded tables.
    folded_a = {"ing": 30, "i have": 50, "other": 20}
    folded_b = {"ing": 60, "i have": 0, "other": 40}
    assert js_divergence(a, b, top=2) == pytest.approx(js_divergence(folded_a, folded_b))
    # Singletons are noise: folding them makes two samples of one distribution closer.
    assert js_divergence(a, b, top=2) < js_divergence(a, b)
    with pytest.raises(ValueError, match="top must be >= 1"):
        js_divergence(a, b, top=0)


def test_reference_drift_leaves_the_period_out_of_its_reference():
    from fedgen_debug.monitor.signals import pool_counts, reference_drift

    inputs = {1: {"a": 4}, 2: {"a": 2, "b": 2}, 3: {"b": 4}, 4: {"c": 4}}
    # Period 1 against periods 2-3 pooled; period 4 against 1-3 pooled.
    assert reference_drift(inputs, [1, 2, 3], 1, js_divergence, pool_counts) == \
        pytest.approx(js_divergence({"a": 4}, {"a": 2, "b": 6}))
    assert reference_drift(inputs, [1, 2, 3], 4, js_divergence, pool_counts) == \
        pytest.approx(js_divergence({"c": 4}, {"a": 6, "b": 6}))
    with pytest.raises(ValueError, match="other than 1"):
        reference_drift(inputs, [1], 1, js_divergence, pool_counts)


def test_drift_reference_is_the_other_calibration_periods_then_the_last_clean_ones():
    from fedgen_debug.monitor.signals import drift_reference

    # Calibration periods 1-3: each against the other two (leave one out).
    assert [drift_reference(p, 3, []) for p in (1, 2, 3)] == [[2, 3], [1, 3], [1, 2]]
    # Later periods: the last 2 clean periods before them; periods 5 and 6 alerted (not clean), so period 7
    # is measured against 3 and 4, what the data looked like before the bug, and so is 8 while 7 alerts.
    assert drift_reference(4, 3, []) == [2, 3]
    assert drift_reference(5, 3, [4]) == [3, 4]
    assert drift_reference(7, 3, [4]) == [3, 4]
    assert drift_reference(8, 3, [4]) == [3, 4]
    # Once clean again, the reference follows the clean periods (an auxiliary that keeps learning moves).
    assert drift_reference(11, 3, [4, 9, 10]) == [9, 10]
    assert drift_reference(12, 4, [5, 6, 9, 10, 11, 12]) == [9, 10, 11]   # `clean` after the period is ignored
    with pytest.raises(ValueError, match="at least 2 calibration periods"):
        drift_reference(3, 1, [])
