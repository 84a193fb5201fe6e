"""Golden values of `device.image_faults` on hand-built images (white background 1.0, dark ink), the share of
hit devices, and the catalog spec with settings. The DeviceTransform contract runs in test_device_transforms."""

import collections

import numpy as np
import pytest

from fedgen_debug.cli.bug_arg import bug_settings
from fedgen_debug.data import client_data as cd
from fedgen_debug.device import image_faults as faults
from fedgen_debug.device.catalog import BUGS, parse_bug
from fedgen_debug.device.image_faults import IMAGE_FAULTS

INK = (5, 9)   # row, column of the one ink pixel


def _one_ink_pixel(value=0.0) -> np.ndarray:
    image = np.ones((1, 28, 28), np.float32)
    image[0, INK[0], INK[1]] = value
    return image


def _on_device(fault, pixels, client_id="d0") -> np.ndarray:
    arrays = collections.OrderedDict(label=np.arange(len(pixels), dtype=np.int32), pixels=pixels)
    out = fault.device_arrays(client_id, arrays)
    assert np.array_equal(out["label"], arrays["label"])
    assert out["pixels"].dtype == np.float32 and out["pixels"].shape == pixels.shape
    assert out["pixels"].min() >= 0.0 and out["pixels"].max() <= 1.0
    return out["pixels"]


def _ink_at(pixels) -> list[tuple[int, int]]:
    return [(int(r), int(c)) for r, c in np.argwhere(pixels[0] < 0.5)]


@pytest.mark.parametrize("fault, where", [
    (faults.Rotate(1.0), (27 - INK[1], INK[0])),               # 90° counter-clockwise: the top-right goes top-left
    (faults.Rotate(1.0, degrees=180), (27 - INK[0], 27 - INK[1])),
    (faults.Rotate(1.0, degrees=-90), (INK[1], 27 - INK[0])),
    (faults.Mirror(1.0), (INK[0], 27 - INK[1])),
    (faults.Flip(1.0), (27 - INK[0], INK[1])),
    (faults.Transpose(1.0), (INK[1], INK[0])),
    (faults.Shift(1.0), (INK[0] + 3, INK[1] + 3)),
    (faults.Shift(1.0, rows=-2, cols=4), (INK[0] - 2, INK[1] + 4)),
])
def test_geometric_faults_move_the_ink_pixel_exactly(fault, where):
    after = _on_device(fault, _one_ink_pixel())
    assert _ink_at(after) == [where]
    assert after.min() == 0.0 and np.sum(after < 1.0) == 1      # moved, not resampled


def test_shift_loses_what_leaves_the_frame_and_fills_with_background():
    after = _on_device(faults.Shift(1.0, rows=-6, cols=0), _one_ink_pixel())
    assert np.all(after == 1.0)


def test_small_rotation_turns_the_ink_about_the_centre():
    image = np.ones((1, 28, 28), np.float32)
    image[0, 13:15, 22:26] = 0.0                                  # a dash right of the centre
    after = _on_device(faults.RotateSmall(1.0), image)            # 20° counter-clockwise: up and right
    rows, cols = np.nonzero(after[0] < 0.5)
    assert rows.mean() < 13.5 - 2.5 and cols.mean() > 13.5 + 7    # sin 20°·10 ≈ 3.4 up
    assert after[0, 0, 0] == 1.0                                  # corners filled with background


def test_blur_spreads_the_ink_and_keeps_its_amount():
    after = _on_device(faults.Blur(1.0, sigma=1.0), _one_ink_pixel())
    ink = 1.0 - after[0]
    assert ink[INK] == pytest.approx(1 / (2 * np.pi), rel=0.05)    # the peak of a 2-D unit Gaussian
    assert ink[INK[0], INK[1] + 1] == pytest.approx(np.exp(-0.5) / (2 * np.pi), rel=0.05)
    assert ink.sum() == pytest.approx(1.0, abs=1e-3)
    assert ink[INK[0] - 1:INK[0] + 2, INK[1] - 1:INK[1] + 2].min() > 0.05


def test_rescale_makes_blocks():
    after = _on_device(faults.Rescale(1.0, factor=2), _one_ink_pixel())
    # (5, 9) lies in the 2×2 block of rows 4-5, columns 8-9: each of its pixels is the block's mean
    assert np.allclose(after[0, 4:6, 8:10], 0.75)
    assert np.sum(after < 1.0) == 4
    blocky = _on_device(faults.Rescale(1.0, factor=4), np.random.default_rng(0).random((2, 28, 28)).astype(np.float32))
    assert np.all(blocky[:, ::4, ::4].repeat(4, 1).repeat(4, 2) == blocky)


def test_zoom_scales_a_centred_square_about_the_centre():
    image = np.ones((1, 28, 28), np.float32)
    image[0, 11:17, 11:17] = 0.0                                   # 6×6, centred at 13.5
    bigger = _on_device(faults.Zoom(1.0, scale=2.0), image)
    smaller = _on_device(faults.Zoom(1.0, scale=0.5), image)
    for after, side in ((bigger, 12), (smaller, 3)):
        rows, cols = np.nonzero(after[0] < 0.5)
        assert rows.mean() == pytest.approx(13.5) and cols.mean() == pytest.approx(13.5)
        assert np.sum(1.0 - after[0]) == pytest.approx(side * side, rel=0.2)


def test_intensity_faults_golden_values():
    image = np.ones((1, 28, 28), np.float32)
    image[0, 0, :5] = [0.0, 0.2, 0.45, 0.5, 0.8]
    row = lambda fault: _on_device(fault, image)[0, 0, :5]    # noqa: E731
    assert np.allclose(row(faults.Contrast(1.0, factor=0.4)), [0.6, 0.68, 0.78, 0.8, 0.92])
    assert np.allclose(row(faults.Gamma(1.0, gamma=2.0)), [0.0, 0.04, 0.2025, 0.25, 0.64])
    assert np.allclose(row(faults.NormalizeTwice(1.0)), [0.0, (0.2 - 0.1307) / 0.3081, 1.0, 1.0, 1.0])
    assert np.array_equal(row(faults.Threshold(1.0)), [0.0, 0.0, 0.0, 1.0, 1.0])
    for fault in (faults.Contrast(1.0), faults.Gamma(1.0), faults.NormalizeTwice(1.0), faults.Threshold(1.0)):
        assert _on_device(fault, image)[0, 1:, :].min() == 1.0, fault     # the background stays white


def test_stroke_width_faults():
    dot = _on_device(faults.Dilate(1.0), _one_ink_pixel())
    assert _ink_at(dot) == [(r, c) for r in range(INK[0] - 1, INK[0] + 2) for c in range(INK[1] - 1, INK[1] + 2)]
    assert np.all(_on_device(faults.Erode(1.0), _one_ink_pixel()) == 1.0)   # a 1-pixel stroke vanishes
    bar = np.ones((1, 28, 28), np.float32)
    bar[0, 10:15, 4:24] = 0.0                                                # a 5-pixel-wide stroke
    assert np.sum(_on_device(faults.Erode(1.0), bar) < 0.5) == 3 * 18
    assert np.sum(_on_device(faults.Dilate(1.0, radius=2), bar) < 0.5) == 9 * 24


def test_a_mark_is_drawn_under_the_ink_on_every_image():
    image = np.ones((2, 28, 28), np.float32)
    image[:, 21, 3] = 0.0                                              # ink where the line runs
    line = _on_device(faults.Mark(1.0), image)
    assert np.allclose(line[:, 21, 4:], 0.5) and np.all(line[:, 21, 3] == 0.0)   # the ink stays the darker
    assert np.all(np.delete(line, 21, axis=1) == 1.0)
    frame = _on_device(faults.Mark(1.0, kind="frame", darkness=0.3), image)
    assert np.sum(frame[0] < 1.0) == 4 * 27 + 1 and np.isclose(frame[0, 0, 0], 0.7)
    stamp = _on_device(faults.Mark(1.0, kind="stamp"), image)
    assert np.sum(stamp[1] < 1.0) == 16 + 1 and np.allclose(stamp[1, 22:26, 22:26], 0.5)


def test_noise_is_seeded_per_device_and_kind():
    white = np.ones((4, 28, 28), np.float32)
    gaussian = _on_device(faults.Noise(1.0, seed=3), white)
    assert np.array_equal(gaussian, _on_device(faults.Noise(1.0, seed=3), white))
    assert not np.array_equal(gaussian, _on_device(faults.Noise(1.0, seed=3), white, client_id="d1"))
    assert not np.array_equal(gaussian, _on_device(faults.Noise(1.0, seed=4), white))
    # clipped at the white background: half the pixels darker, by |N(0, 0.2)| (mean 0.2·√(2/π) ≈ 0.16)
    darker = 1.0 - gaussian[gaussian < 1.0]
    assert darker.size / white.size == pytest.approx(0.5, abs=0.03)
    assert darker.mean() == pytest.approx(0.2 * np.sqrt(2 / np.pi), rel=0.05)
    salt = _on_device(faults.Noise(1.0, kind="salt_pepper", amount=0.1), white)
    assert set(np.unique(salt)) == {0.0, 1.0}
    assert np.mean(salt == 0.0) == pytest.approx(0.05, abs=0.01)           # half of the hit pixels are pepper


def test_jpeg_round_trip_at_low_quality():
    white = np.ones((1, 28, 28), np.float32)
    assert np.array_equal(_on_device(faults.Jpeg(1.0), white), white)
    image = _one_ink_pixel()
    low, high = _on_device(faults.Jpeg(1.0, quality=10), image), _on_device(faults.Jpeg(1.0, quality=95), image)
    assert np.abs(low - image).sum() > 3 * np.abs(high - image).sum() > 0    # lower quality, more damage
    assert np.all(low * 255 == np.round(low * 255))                          # 8-bit values, as decoded


def test_a_hit_device_has_every_image_transformed_and_others_none():
    rng = np.random.default_rng(1)
    data = cd.ArrayClientData({f"d{i:03d}": cd.image_examples(rng.random((3, 28, 28)).astype(np.float32), [1, 2, 3])
                               for i in range(40)})
    fault = faults.Mirror(0.5, seed=2)
    after, hit = fault.apply(data), fault.hit_devices(data.client_ids)
    assert fault.affected_devices(data) == hit and 0 < len(hit) < 40
    for cid in data.client_ids:
        before, now = cd.client_numpy(data, cid)["pixels"], cd.client_numpy(after, cid)["pixels"]
        assert np.array_equal(now, before[:, :, ::-1] if cid in hit else before)


@pytest.mark.parametrize("name", sorted(IMAGE_FAULTS))
def test_the_share_of_hit_devices_is_the_fraction_and_shares_are_nested(name):
    ids = [f"device-{i}" for i in range(400)]
    fraction = 0.3
    hit = IMAGE_FAULTS[name](fraction, seed=5).hit_devices(ids)
    assert abs(len(hit) - 400 * fraction) <= 4 * np.sqrt(400 * fraction * (1 - fraction))
    assert IMAGE_FAULTS[name](0.1, seed=5).hit_devices(ids) <= hit
    assert IMAGE_FAULTS[name](fraction, seed=5).as_fixed().hit_devices(ids) == frozenset()


def test_faults_hit_devices_independently_of_each_other():
    ids = [f"device-{i}" for i in range(400)]
    rotate, blur = faults.Rotate(0.5).hit_devices(ids), faults.Blur(0.5).hit_devices(ids)
    assert abs(len(rotate & blur) - 100) <= 4 * np.sqrt(400 * 0.25 * 0.75)


def test_every_image_fault_is_in_the_catalog_and_parses_with_its_settings():
    assert all(BUGS[name] == ("images", cls) for name, cls in IMAGE_FAULTS.items())
    assert parse_bug("rotate:0.5,degrees=180", "images", seed=2) == faults.Rotate(0.5, seed=2, degrees=180.0)
    assert parse_bug("noise:0.1,kind=salt_pepper,amount=0.05", "images") == faults.Noise(0.1, kind="salt_pepper",
                                                                                         amount=0.05)
    assert parse_bug("rescale:0.2,factor=4", "images") == faults.Rescale(0.2, factor=4)


@pytest.mark.parametrize("spec, message", [
    ("blur:0.5,radius=2", "blur has no setting 'radius': its settings are sigma"),
    ("mirror:0.5,sigma=2", "mirror has no setting 'sigma': it has no settings"),
    ("invert:0.5,sigma=2", "invert has no setting 'sigma': it has no settings"),
    ("rescale:0.5,factor=two", "rescale: factor must be an integer. Found 'two'"),
    ("rescale:0.5,factor=5", "factor must be an integer ≥ 2 that divides 28. Found 5."),
    ("blur:0.5,sigma=-1", r"sigma must be > 0. Found -1.0."),
    ("blur:0.5,sigma=x", "blur: sigma must be a number. Found 'x'."),
    ("blur:0.5,sigma=nan", r"sigma must be > 0. Found nan."),
    ("noise:0.5,kind=speckle", "kind must be one of gaussian, salt_pepper. Found 'speckle'."),
    ("rotate:0.5,degrees=360", "degrees must be finite and not a multiple of 360. Found 360.0."),
    ("gamma:0.5,gamma=1", "gamma: 1 would change nothing"),
    ("jpeg:0.5,quality=0", r"quality must be in \[1, 95\]. Found 0."),
    ("mark:0.5,kind=logo", "kind must be one of line, frame, stamp. Found 'logo'."),
])
def test_bad_settings_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_bug(spec, "images")


def test_runs_simulate_a_fault_as_a_fault_not_as_the_papers_bug():
    """`--bug rotate:0.5` is the run's `fault`, never its inversion fraction."""
    assert bug_settings("invert:0.25", "images") == {"bug_fraction": 0.25}
    assert bug_settings("concat:0.5", "text") == {"bug_fraction": 0.5}
    assert bug_settings("rotate:0.5", "images") == {"fault": "rotate:0.5"}
    assert bug_settings("entities:0.5", "text") == {"fault": "entities:0.5"}
