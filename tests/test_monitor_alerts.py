"""Alerts (monitor/alerts.py): calibrated thresholds, k-of-m persistence, what an alert says, and when
it is raised and cleared — on hand-built signal histories."""

import math

import numpy as np
import pytest

from fedgen_debug.monitor.alerts import active_alerts, calibrate, fixed, transitions


def test_calibration_is_mean_plus_four_floored_sds():
    t = calibrate("dark", [0.10, 0.12, 0.11], periods=[1, 2, 3])
    assert t.value == pytest.approx(0.11 + 4 * 0.011)  # sd 0.01 is under 10% of the mean: floored at 0.011
    t = calibrate("fid", [10.0, 20.0, 30.0], periods=[1, 2, 3])
    assert t.value == pytest.approx(20.0 + 4 * 10.0) and "periods 1-3" in t.source
    # A drift's floor is 10% of its own clean mean, nothing absolute: clean Fréchet drifts of a FEMNIST
    # fleet (periods 1-4) set their threshold by their sd; three nearly equal ones by the 10% floor.
    frechet = [7.735, 4.4169, 3.5163, 5.1722]
    mean, sd = sum(frechet) / 4, float(np.std(frechet, ddof=1))
    assert sd > 0.1 * mean and calibrate("frechet", frechet, periods=[1, 2, 3, 4]).value == pytest.approx(mean + 4 * sd)
    assert calibrate("frechet", [10.0, 10.1, 9.9], periods=[1, 2, 3]).value == pytest.approx(10.0 + 4 * 1.0)
    assert calibrate("zero", [0.0, 0.0], periods=[1, 2]).value == 0.0   # identical samples: any change is past it
    with pytest.raises(ValueError, match="at least 2 clean values"):
        calibrate("dark", [0.1], periods=[1])
    with pytest.raises(ValueError, match="without NaN"):
        calibrate("dark", [0.1, math.nan], periods=[1, 2])


def test_a_shares_floor_is_its_sampling_sd_so_more_samples_sharpen_it():
    # Clean space masses of a char-LM (resampled monitors): 1% glued sentences gave 0.0007 a period.
    clean = [0.0001, 0.0001, 0.00005]
    mean = sum(clean) / 3
    sampling = (mean * (1 - mean) / 20000) ** 0.5
    t = calibrate("space", clean, periods=[1, 2, 3], samples=20000)
    assert t.value == pytest.approx(mean + 4 * sampling) and t.value < 0.0007 < 4e-3
    assert calibrate("space", clean, periods=[1, 2, 3], samples=2000).value > 0.0007   # 2,000 samples: too coarse
    # A share of 0 still has one draw's worth of spread.
    assert calibrate("dark", [0.0, 0.0], periods=[1, 2], samples=100).value == pytest.approx(4 * (0.01 * 0.99 / 100) ** 0.5)


def _history(values):
    return {p: {"dark": v} for p, v in enumerate(values, start=1)}


def test_an_alert_needs_persistence_and_says_since_when_and_what_to_compare():
    thresholds = {"dark": fixed("dark", 0.5, "test")}
    history = _history([0.1, 0.1, 0.9, 0.2, 0.8, 0.9, 0.95, 0.1, 0.1, 0.1])
    active = active_alerts(history, thresholds, persistence=2, window=3)
    alerting = [p for p, alerts in active.items() if alerts]
    # Period 3 alone is one of 3; periods 5-7 make two of three; period 8 is back under the threshold.
    assert alerting == [5, 6, 7]
    alert = active[6][0]
    assert (alert.since, alert.compare, alert.value) == (5, (4, 6), 0.9)
    assert "1.80× its threshold" in alert.describe() and "since period 5" in alert.describe()
    assert transitions(active) == [("raised", 5, "dark"), ("cleared", 8, "dark")]
    # 1 of 1: every period past the threshold alerts.
    assert [p for p, a in active_alerts(history, thresholds, 1, 1).items() if a] == [3, 5, 6, 7]


def test_missing_values_and_several_signals():
    thresholds = {"dark": fixed("dark", 0.5, "t"), "fid": fixed("fid", 100.0, "t")}
    history = {1: {"dark": 0.9, "fid": 50.0}, 2: {"fid": 150.0}, 3: {"dark": 0.9, "fid": 160.0}}
    active = active_alerts(history, thresholds, persistence=2, window=2)
    assert [a.signal for a in active[3]] == ["fid"]  # dark missed period 2: one of the last two
    assert active[3][0].to_json()["compare"] == [1, 3]
    assert transitions(active) == [("raised", 3, "fid")]
