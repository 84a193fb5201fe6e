"""Drift between periods (monitor/signals.py): its reference periods and the pooled distance, on hand-built
inputs."""

import numpy as np
import pytest


def test_reference_drift_leaves_the_period_out_of_its_reference():
    from fedgen_debug.monitor.signals import pool_features, reference_drift

    def mean_gap(a, b):
        return abs(float(np.mean(a)) - float(np.mean(b)))

    inputs = {1: np.array([0.0, 0.0]), 2: np.array([2.0, 2.0]), 3: np.array([4.0]), 4: np.array([9.0])}
    # Period 1 against periods 2-3 pooled (mean of 2, 2, 4); period 4 against 1-3 pooled.
    assert reference_drift(inputs, [1, 2, 3], 1, mean_gap, pool_features) == pytest.approx(8 / 3)
    assert reference_drift(inputs, [1, 2, 3], 4, mean_gap, pool_features) == pytest.approx(9 - 8 / 5)
    with pytest.raises(ValueError, match="other than 1"):
        reference_drift(inputs, [1], 1, mean_gap, pool_features)


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


def test_a_restarted_auxiliary_is_compared_with_its_own_clean_periods_only():
    from fedgen_debug.monitor.signals import drift_reference

    # Restarted from scratch in period 10: nothing of its own before it, then its own clean periods only
    # (not the calibration periods or period 9 of the model it replaced).
    assert drift_reference(10, 3, [4, 5, 9], since=10) == []
    assert drift_reference(11, 3, [4, 5, 9, 10], since=10) == [10]
    assert drift_reference(13, 3, [4, 5, 9, 10, 12], since=10) == [10, 12]
    assert drift_reference(12, 3, [4, 5, 9], since=10) == []   # its period 10 and 11 were not clean
    # A restart inside the calibration periods keeps the calibration periods from it on.
    assert drift_reference(5, 4, [], since=3) == [3, 4]
