"""The fleet over time (data/fleet.py): membership and example windows are per-device, seeded and
stable; a period is rebuilt identically."""

import math

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.fleet import FleetConfig, fleet_period, membership, period_indices


def _source(devices=200, examples=8):
    return cd.ArrayClientData({f"d{i:03d}": cd.image_examples(np.full((examples, 28, 28), i / 255.0, np.float32),
                                                              np.arange(examples) % 10) for i in range(devices)})


def test_period_windows_walk_through_a_devices_examples_and_wrap():
    config = FleetConfig(window=0.25, seed=1)
    windows = [period_indices(config, "d000", 8, p) for p in range(1, 6)]
    assert all(len(w) == 2 for w in windows)
    assert sorted(np.concatenate(windows[:4])) == list(range(8))  # four periods see every example once
    assert np.array_equal(windows[4], windows[0])                 # then the stream wraps around
    assert len(period_indices(config, "d000", 1, 3)) == 1         # at least one example a period
    with pytest.raises(ValueError, match="period must be >= 1"):
        period_indices(config, "d000", 8, 0)


def test_membership_rates_and_stability():
    config = FleetConfig(initial=0.5, join_rate=0.2, leave_rate=0.1, seed=3)
    ids = [f"d{i:04d}" for i in range(4000)]
    members = [membership(config, c) for c in ids]
    at_start = np.mean([m.joins == 1 for m in members])
    assert abs(at_start - 0.5) < 4 * math.sqrt(0.25 / 4000)
    # Of those not there at the start, 20% join in period 2 (geometric, rate 0.2).
    late = [m for m in members if m.joins > 1]
    assert abs(np.mean([m.joins == 2 for m in late]) - 0.2) < 4 * math.sqrt(0.16 / len(late))
    stays = [m.leaves - m.joins for m in members]
    assert abs(np.mean(stays) - 10.0) < 4 * math.sqrt(90 / 4000)  # mean of Geometric(0.1)
    assert membership(config, "d0007") == membership(config, "d0007")
    never = membership(FleetConfig(initial=0.0, join_rate=0.0), "x")
    assert not any(never.present(p) for p in (1, 10, 1000))
    always = membership(FleetConfig(initial=1.0, leave_rate=0.0), "x")
    assert always.present(1) and always.present(10 ** 6)


def test_a_period_holds_the_present_devices_with_their_window_and_rebuilds_identically():
    source = _source()
    config = FleetConfig(initial=0.6, join_rate=0.3, leave_rate=0.2, window=0.5, seed=5)
    period3 = fleet_period(source, config, 3)
    present = [c for c in source.client_ids if membership(config, c).present(3)]
    assert period3.client_ids == present and 0 < len(present) < 200
    for client_id in present[:5]:
        got = period3.client_arrays(client_id)
        want = period_indices(config, client_id, 8, 3)
        assert np.array_equal(got["label"], np.arange(8)[want] % 10)
        assert np.all(got["pixels"] == int(client_id[1:]) / 255.0)  # the device's own examples
    again = fleet_period(source, config, 3)
    assert all(np.array_equal(again.client_arrays(c)["label"], period3.client_arrays(c)["label"]) for c in present)
    assert set(fleet_period(source, config, 4).client_ids) != set(present)  # devices came and went
    with pytest.raises(ValueError, match="no device is present"):
        fleet_period(source, FleetConfig(initial=0.0, join_rate=0.0), 1)


@pytest.mark.parametrize("field, value", [("initial", 1.5), ("join_rate", -0.1), ("leave_rate", float("nan")),
                                          ("window", 0.0)])
def test_bad_fleet_configs_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        FleetConfig(**{field: value})
