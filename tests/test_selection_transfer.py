"""The selection noise transferred to pairs no selection calibration holds for (`analysis.selection_transfer`)."""

import math

import pytest

from fedgen_debug.analysis import calibration as C
from fedgen_debug.analysis.selection_transfer import MODEL_READ, selection_from_replicate

N = C.PropertyNoise


def _calibration(name, pair_type, properties, threshold=3.0, dof=9, **source):
    return C.Calibration(name, "gan", "demo", pair_type, properties, dof, threshold, source)


SELECTION = _calibration("t4", "selection", {
    "wide": N(offset=0.3, training_noise=1.5, training_noise_upper=2.0, pairs=40, offset_error=0.4),
    "narrow": N(offset=-0.2, training_noise=0.4, training_noise_upper=0.5, pairs=40),
    "still": N(0.0, 0.0, 0.0, 40),
    "unbounded": N(0.0, 0.1, 0.2, 40),
    "confidence": N(0.1, 0.1, 0.2, 40),
    "predicted_class": N(0.5, 0.1, 0.1, 40)}, threshold=3.49, dof=39,
    selections=["by-user-accuracy:high", "by-user-accuracy:low"])
REFERENCE = _calibration("rep-synthetic", "replicate", {
    "wide": N(0.0, 0.8, 1.0, 120), "narrow": N(0.0, 0.8, 1.0, 120), "still": N(0.0, 0.0, 0.0, 120),
    "unbounded": N(0.0, 0.0, 0.0, 120), "confidence": N(0.0, 0.1, 0.2, 120), "predicted_class": N(0.0, 0.1, 0.1, 120)})
REPLICATE = _calibration("rep-femnist", "replicate", {
    "wide": N(0.0, 0.5, 0.8, 120, relative_noise=0.1), "narrow": N(0.0, 0.3, 0.6, 120), "still": N(0.0, 0.0, 0.0, 120),
    "unbounded": N(0.0, 0.1, 0.1, 120), "confidence": N(0.0, 0.1, 0.2, 120), "predicted_class": N(0.0, 0.1, 0.1, 120),
    "only_here": N(0.0, 0.1, 0.1, 120)}, dof=15, data="npz:femnist.npz")


def test_each_property_is_the_replicate_noise_times_the_selection_ratio_with_its_offset_counted_as_noise():
    transferred = selection_from_replicate(SELECTION, REFERENCE, REPLICATE)
    wide = transferred.properties["wide"]
    # ratio 2.0 / 1.0 = 2; offset √(0.3² + 0.4²) = 0.5 reference noises, 0.5 × 0.8 on this replicate noise.
    assert (wide.offset, wide.training_noise, wide.training_noise_upper) == (0.0, 1.0, 1.6)
    assert wide.offset_error == pytest.approx(0.4) and wide.relative_noise == pytest.approx(0.2) and wide.pairs == 40
    # A selection noise under the reference's (0.5 against 1.0) is the estimates' noise: never below the replicate's.
    narrow = transferred.properties["narrow"]
    assert (narrow.training_noise, narrow.training_noise_upper, narrow.offset_error) == (0.3, 0.6, pytest.approx(0.12))
    assert transferred.properties["still"] == N(0.0, 0.0, 0.0, 40)   # no property varies: ratio 1, nothing moved
    # Left out, never called: what the primary model reads, a ratio over a reference that never varied, and what
    # the selection calibration never measured.
    assert set(transferred.properties) == {"wide", "narrow", "still"}
    assert transferred.source["transfer"]["left_out"] == list(MODEL_READ)


def test_the_transfer_is_a_selection_calibration_at_the_selections_threshold_and_fewest_degrees_of_freedom():
    transferred = selection_from_replicate(SELECTION, REFERENCE, REPLICATE)
    assert (transferred.name, transferred.pair_type) == ("t4 via rep-femnist", "selection")
    assert transferred.z_threshold == 3.49 and transferred.degrees_of_freedom == 15
    assert transferred.false_alarms is None and transferred.source["data"] == "npz:femnist.npz"
    assert transferred.source["selections"] == SELECTION.source["selections"]
    # Bonferroni's threshold over the properties kept, when the selections' own is lower.
    low = _calibration("t4-low", "selection", SELECTION.properties, threshold=1.0)
    assert selection_from_replicate(low, REFERENCE, REPLICATE).z_threshold == C.threshold_for(3)
    with pytest.raises(ValueError, match="share no property"):
        selection_from_replicate(SELECTION, REFERENCE, _calibration("x", "replicate", {"other": N(0.0, 0.1, 0.1, 9)}))


def test_a_clean_pair_moved_by_the_stand_ins_offset_either_way_is_not_called_and_a_fault_beyond_it_is():
    """Another model may move the selections' offset either way: a pair at the stand-in's offset, or at minus it,
    stays under the threshold; the replicate calibration alone (the candidates of before) would have called
    both; a difference of ten transferred noises is called."""
    transferred = selection_from_replicate(SELECTION, REFERENCE, REPLICATE)

    def z(calibration, difference):
        return C.calibrated_z({"difference": difference, "difference_standard_error": 0.05},
                              calibration.properties["wide"])

    offset_here = 4.0 * REPLICATE.properties["wide"].training_noise_upper   # 4 replicate noises: candidates before
    assert abs(z(REPLICATE, offset_here)) > REPLICATE.z_threshold
    for difference in (offset_here, -offset_here):
        assert abs(z(transferred, difference)) < transferred.z_threshold
    assert z(transferred, 10 * math.hypot(1.6, 0.4)) > transferred.z_threshold
