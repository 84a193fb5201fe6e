"""A calibration supplemented with properties added since it was measured (calibrate.supplement,
calibration.false_alarms_left_out with a base): what is taken from where, the threshold over all properties,
the refusals, and clean pairs diagnosed as the supplemented calibration would diagnose them."""

import dataclasses
import json

import pytest

from fedgen_debug.analysis import calibrate
from fedgen_debug.analysis import calibration as C

SETTINGS = {"preset": "demo", "rounds": 200, "clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}


def _calibration(properties, data, dof=10, by_source=None, settings=SETTINGS, pair_type="replicate", name="base"):
    return C.Calibration(name, "gan", "demo", pair_type, properties, dof, C.threshold_for(len(properties)),
                         {"settings": settings, "data": data, "runs": dof + 1, "pairs": 3, "description": name},
                         false_alarms={"pairs": 45, "alarms": 1}, by_source=by_source)


def _noise(upper, pairs=10):
    return C.PropertyNoise(0.0, upper / 2, upper, pairs)


def test_only_the_properties_the_base_lacks_are_added_each_with_its_own_runs_noise():
    base = _calibration({"old": _noise(0.2)}, "npz:../shared/data/femnist.npz")
    extra = _calibration({"old": _noise(9.0, 3), "new": _noise(0.6, 3)}, "npz:/work/shared/data/femnist.npz", dof=2,
                         name="extra")
    merged = calibrate.supplement(base, extra, {"pairs": 3, "alarms": 0, "rate_upper_95": 0.63, "details": []})
    assert merged.properties["old"] == base.properties["old"]          # the base's own: never re-measured
    assert merged.properties["new"] == extra.properties["new"]         # its pairs, its own upper bound
    assert merged.z_threshold == C.threshold_for(2) > base.z_threshold
    assert (merged.name, merged.degrees_of_freedom, merged.false_alarms) == (base.name, 10, base.false_alarms)
    (record,) = merged.source["supplements"]
    assert record["properties"] == ["new"] and record["degrees_of_freedom"] == 2 and record["runs"] == 3
    assert record["false_alarms"] == {"pairs": 3, "alarms": 0, "rate_upper_95": 0.63}
    assert C.Calibration.from_json(json.loads(json.dumps(merged.to_json()))) == merged


def test_a_base_whose_clean_pairs_raised_its_threshold_keeps_it_raised():
    base = _calibration({"old": _noise(0.2)}, "npz:femnist.npz")
    base = dataclasses.replace(base, z_threshold=4.0,
                               false_alarms={"pairs": 26, "alarms": 1, "clean_pairs_threshold": 4.0})
    extra = _calibration({"old": _noise(0.3), "new": _noise(0.6)}, "npz:femnist.npz", name="extra")
    merged = calibrate.supplement(base, extra)
    assert merged.z_threshold == 4.0 > C.threshold_for(2)            # never back down to Bonferroni's
    rows = {(i, j): [_row("old", 0.1), _row("new", 0.05 * (i - j))] for i in range(6) for j in range(i + 1, 6)}
    diagnosed = C.false_alarms_left_out(rows, "replicate", "gan", base=merged)
    assert diagnosed["pairs"] == 15                                   # each left out of 4 other runs
    assert all(d["threshold"] == 4.0 for d in diagnosed["details"])   # its clean pairs are held to it too


def test_each_source_of_the_base_gets_its_own_sources_noise():
    synthetic, real = "synthetic-images:writers=100,seed=0", "npz:../shared/data/femnist.npz"
    old = {synthetic: {"old": _noise(0.1)}, real: {"old": _noise(0.3)}}
    base = _calibration(C.envelope(list(old.values())), f"{real}, {synthetic}",
                        by_source={s: {"degrees_of_freedom": 9, "properties": p} for s, p in old.items()})
    new = {synthetic: {"new": _noise(0.5, 3)}, "npz:/data/femnist.npz": {"new": _noise(0.7, 3)}}
    extra = _calibration(C.envelope(list(new.values())), "two", dof=2,
                         by_source={s: {"degrees_of_freedom": 2, "properties": p} for s, p in new.items()})
    merged = calibrate.supplement(base, extra)
    assert merged.by_source[synthetic]["properties"]["new"].training_noise_upper == 0.5
    assert merged.by_source[real]["properties"]["new"].training_noise_upper == 0.7
    assert merged.by_source[real]["properties"]["old"] == old[real]["old"]
    own, used = merged.for_data([real, real])
    assert used == real and set(own.properties) == {"old", "new"}


def test_a_supplement_of_other_settings_pairs_or_data_or_with_nothing_new_is_refused():
    base = _calibration({"old": _noise(0.2)}, "npz:femnist.npz")
    new = {"old": _noise(0.2), "new": _noise(0.5)}
    for extra, message in (
            (_calibration(new, "npz:femnist.npz", settings={**SETTINGS, "rounds": 150}), "settings"),
            (_calibration(new, "npz:femnist.npz", pair_type="selection"), "pair_type"),
            (_calibration(new, "npz:digits.npz"), "each of base's sources"),
            (_calibration({"old": _noise(0.5)}, "npz:femnist.npz"), "no property")):
        with pytest.raises(ValueError, match=message):
            calibrate.supplement(base, extra)


def _row(name, difference):
    return {"property": name, "family": "stroke", "kind": "mean", "difference": difference,
            "difference_standard_error": 0.0, "z": 0.0, "standardized_difference": difference, "effect": difference}


def test_clean_pairs_of_a_supplement_are_diagnosed_with_the_bases_noise_for_its_properties():
    """Five runs whose "old" differs by ±1 in every pair: against their own left-out noise no pair alarms;
    against a base that measured "old" at 0.01, every pair does: the base's noise is the one used."""
    rows = {(i, j): [_row("old", 1.0 if (i + j) % 2 else -1.0), _row("new", 0.01 * (i - j))]
            for i in range(5) for j in range(i + 1, 5)}
    alone = C.false_alarms_left_out(rows, "replicate", "gan")
    base = _calibration({"old": _noise(0.01)}, None)
    over_base = C.false_alarms_left_out(rows, "replicate", "gan", base=base)
    assert alone["pairs"] == over_base["pairs"] == 10    # each left out: 3 other runs calibrate it
    assert alone["alarms"] == 0 and over_base["alarms"] == 10
    assert {d["top_property"] for d in over_base["details"]} == {"old"}
