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
