"""image_symmetry: golden values on hand-built sets, and which transform a faulty share of a set moves."""

import math

import numpy as np
import pytest

from fedgen_debug.analysis import differences as df
from fedgen_debug.analysis import image_symmetry as sym
from fedgen_debug.data import synthetic_images


def _bar():
    """A horizontal bar, rows 13-14 and columns 4-23: its centre of mass is the image centre (13.5, 13.5)."""
    image = np.zeros((28, 28))
    image[13:15, 4:24] = 1.0
    return image


def test_centred_moves_the_centre_of_mass_to_the_image_centre_in_whole_pixels():
    image = np.zeros((28, 28))
    image[2:5, 20:23] = 1.0                      # centre of mass (3, 21)
    out = sym.centred(image[None])[0]
    assert out.sum() == image.sum()
    rows, cols = np.nonzero(out)
    assert (rows.mean(), cols.mean()) == (13.0, 13.0)   # rolls of rint(10.5) = 10 and rint(-7.5) = -8 pixels
    assert np.array_equal(sym.centred(_bar()[None])[0], _bar())


def test_golden_values_of_a_bar_its_quarter_turn_and_a_dot():
    """P a bar (40 pixels), Q the bar turned a quarter (overlap 4 pixels), R a 2×2 dot at the centre.
    P's nearest other is R: |P − R|² = 40 + 4 − 2·4 = 36, so 6. Turned by 90°, 270° or transposed, P is
    Q exactly (the floor, 0.1); turned by 180°, mirrored or flipped it is P again, which is not an other:
    R, 6. The level is the mean log distance, (log 0.1 + log 6) / 2, so the quarter turn and transpose
    match +log(60)/2 and the rest −log(60)/2; Q likewise. R is the same under every turn: 0."""
    bar = _bar()
    dot = np.zeros((28, 28))
    dot[13:15, 13:15] = 1.0
    images = np.stack([bar, np.rot90(bar), dot])
    values = sym.symmetry_matches(images, np.ones(3, bool))
    half = math.log(60) / 2
    expected = {"quarter_turn_match": half, "transpose_match": half, "half_turn_match": -half,
                "mirror_match": -half, "flip_match": -half}
    for name, value in expected.items():
        assert values[name] == pytest.approx([value, value, 0.0], abs=1e-9), name


def test_images_without_ink_are_nan_and_no_ones_neighbour():
    bar, blank = _bar(), np.zeros((28, 28))
    alone = sym.symmetry_matches(np.stack([bar, blank]), np.array([True, False]))
    assert all(np.isnan(v).all() for v in alone.values())         # one inked image has no other
    two = sym.symmetry_matches(np.stack([bar, blank, np.rot90(bar)]), np.array([True, False, True]))
    assert np.isnan(two["mirror_match"][1]) and np.isfinite(two["mirror_match"][[0, 2]]).all()


@pytest.fixture(scope="module")
def glyphs():
    """800 synthetic handwritten characters: 80 writers × 10, relative darkness (ink 1, paper 0)."""
    config = synthetic_images.SyntheticImagesConfig(writers=80, min_examples=10, max_examples=10, median_examples=10)
    images = np.concatenate([synthetic_images.generate_writer(0, w, config)[0] for w in range(80)])
    return 1.0 - images.astype(np.float64)


FAULTY = {"quarter_turn_match": lambda x: np.rot90(x, 1, axes=(1, 2)),
         "half_turn_match": lambda x: np.rot90(x, 2, axes=(1, 2)),
         "mirror_match": lambda x: x[:, :, ::-1], "flip_match": lambda x: x[:, ::-1, :],
         "transpose_match": lambda x: np.transpose(x, (0, 2, 1))}


def _z_by_property(a, b):
    values_a = sym.symmetry_matches(a, np.ones(len(a), bool))
    values_b = sym.symmetry_matches(b, np.ones(len(b), bool))
    return {name: df.compare(values_a[name], values_b[name], "lower", "higher")["z"] for name in sym.TRANSFORMS}


@pytest.mark.parametrize("name", sorted(FAULTY))
def test_half_of_a_set_turned_moves_that_turns_match_most(glyphs, name):
    a, b = glyphs[0::2], glyphs[1::2].copy()
    half = np.random.default_rng(0).random(len(b)) < 0.5
    b[half] = FAULTY[name](b[half])
    z = _z_by_property(a, b)
    assert max(z, key=z.get) == name and z[name] > 4.0, z


def test_clean_halves_and_shifted_glyphs_move_no_match(glyphs):
    """Both halves clean, then half of B moved 3 pixels down and 4 right (those whose ink stays inside the
    frame; the paper's faint texture cleared): centring undoes the shift exactly."""
    glyphs = np.where(glyphs > 0.1, glyphs, 0.0)
    a, b = glyphs[0::2], glyphs[1::2].copy()
    clean = _z_by_property(a, b)
    inside = (b[:, -3:, :].max(axis=(1, 2)) == 0) & (b[:, :, -4:].max(axis=(1, 2)) == 0)
    moved = inside & (np.random.default_rng(1).random(len(b)) < 0.5)
    b[moved] = np.roll(b[moved], (3, 4), axis=(1, 2))
    shifted = _z_by_property(a, b)
    assert moved.sum() > 100 and max(abs(v) for v in clean.values()) < 3.0, clean
    assert shifted == pytest.approx(clean, abs=1e-9)
