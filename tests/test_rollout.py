"""Bug rollouts over periods (device/rollout.py): the schedule grammar, nested and stable device
rollouts, inversion applied to the affected devices only."""

import math

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.device.rollout import Rollout, first_period_at_least, parse_rollout


def test_the_schedule_reads_as_written():
    rollout = parse_rollout("invert:3=0.05,4=0.2,5=0.5,8=0", seed=2)
    assert [rollout.fraction(p) for p in range(1, 10)] == [0, 0, 0.05, 0.2, 0.5, 0.5, 0.5, 0, 0]
    assert first_period_at_least(rollout, 0.1, 9) == 4 and first_period_at_least(rollout, 0.9, 9) is None
    assert parse_rollout("concat:2=0.01,6=0.1").fraction(7) == 0.1


@pytest.mark.parametrize("spec, message", [("invert", "looks like"), ("flip:1=0.5", "bug must be one of"),
                                           ("invert:3=0.5,2=0.1", "increasing"), ("invert:0=0.5", ">= 1"),
                                           ("invert:3=1.5", "fraction must be in"), ("invert:3", "PERIOD=FRACTION"),
                                           ("invert:x=0.1", "PERIOD=FRACTION")])
def test_bad_schedules_are_refused_with_the_reason(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_rollout(spec)


def test_device_rollouts_are_nested_stable_and_of_the_scheduled_size():
    rollout = parse_rollout("invert:1=0.05,2=0.2,3=0.5", seed=4)
    ids = [f"d{i:05d}" for i in range(5000)]
    hit = [rollout.affected_devices(ids, p) for p in (1, 2, 3)]
    assert hit[0] <= hit[1] <= hit[2]
    for fraction, devices in zip((0.05, 0.2, 0.5), hit):
        assert abs(len(devices) / 5000 - fraction) < 4 * math.sqrt(fraction * (1 - fraction) / 5000)
    # A device's fate does not depend on who else is in the fleet.
    assert rollout.affected_devices(ids[:100], 2) == {c for c in hit[1] if c in set(ids[:100])}
    with pytest.raises(ValueError, match="concat hits sentences"):
        Rollout("concat", ((1, 0.1),)).affected_devices(ids, 1)


def test_inversion_applies_to_the_affected_devices_only():
    data = cd.ArrayClientData({f"d{i}": cd.image_examples(np.full((2, 28, 28), 0.25, np.float32), [1, 2])
                               for i in range(40)})
    rollout = parse_rollout("invert:2=0.5", seed=1)
    assert all(np.all(rollout.at(1).apply(data).client_arrays(c)["pixels"] == 0.25) for c in data.client_ids)
    after = rollout.at(2).apply(data)
    affected = rollout.affected_devices(data.client_ids, 2)
    assert 0 < len(affected) < 40
    for c in data.client_ids:
        assert np.all(after.client_arrays(c)["pixels"] == (0.75 if c in affected else 0.25))
        assert list(after.client_arrays(c)["label"]) == [1, 2]
