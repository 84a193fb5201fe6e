"""GAN sample analysis: background statistic, inversion verdict, Fréchet distance, grid PNG."""

import os

import numpy as np
import pytest
import scipy.linalg
from PIL import Image

from fedgen_debug.models import cnn
from fedgen_debug.training import presets
from fedgen_debug.analysis import gan_analysis as ga


def _character(background: float, ink: float, touch_edge: bool = False) -> np.ndarray:
    """A hand-built 28x28 image in the generator's [-1, 1] range: a bar on a flat background."""
    image = np.full((28, 28), background, np.float32)
    image[6:22, 12:16] = ink
    if touch_edge:
        image[0:28, 13:15] = ink  # a stroke crossing the whole frame
    return image


WHITE = _character(1.0, -1.0)          # canonical: white background, black ink
BLACK = _character(-1.0, 1.0)          # inverted
GRAY_WHITE = _character(0.6, -0.8, touch_edge=True)


def _samples(n: int, inverted_share: float) -> np.ndarray:
    k = int(round(n * inverted_share))
    return np.stack([BLACK] * k + [WHITE] * (n - k))[..., None]


def test_background_intensity_of_hand_built_images():
    values = ga.background_intensity(np.stack([WHITE, BLACK, GRAY_WHITE]))
    # The frame's median: the stroke crossing the frame does not move it.
    np.testing.assert_allclose(values, [1.0, 0.0, 0.8], atol=1e-6)
    stats = ga.dark_background(np.stack([WHITE, BLACK, BLACK, GRAY_WHITE]))
    assert stats == {"samples": 4, "dark": 2, "share": 0.5, "median_background": pytest.approx(0.4)}


def _bordered(image: np.ndarray, width: int, border: float) -> np.ndarray:
    """`image` ([-1, 1]) shrunk into the middle and surrounded by a `width`-pixel band of `border`: zero
    padding after a resize, or a frame painted round the page."""
    inner = 28 - 2 * width
    out = np.full((28, 28), border, np.float32)
    rows = np.linspace(0, 27, inner).round().astype(int)
    out[width:-width, width:-width] = image[np.ix_(rows, rows)]
    return out


def test_a_border_round_the_paper_is_not_the_background():
    """Zero padding (black in the generator's range: -1) round white paper reads the paper, 1.0, not the
    border's 0.0 the frame median alone would give; inverted handwriting padded with white still reads
    black paper; a bar crossing the whole image is a stroke, not a border; a band as light as the paper
    is no border at all."""
    padded = [_bordered(WHITE, w, -1.0) for w in (2, 4, 6)]
    inverted_padded = _bordered(BLACK, 4, 1.0)
    crossing = _character(1.0, -1.0)
    crossing[13:15, :] = -1.0                        # a stroke from edge to edge: the edge is not one level
    values = ga.background_intensity(np.stack([*padded, inverted_padded, crossing, _bordered(WHITE, 4, 0.9)]))
    np.testing.assert_allclose(values, [1.0, 1.0, 1.0, 0.0, 1.0, 0.95], atol=1e-6)
    # A GAN draws a padded set's band in pieces: black along two sides only, more than half the 3-pixel frame,
    # round an image mostly white. Broken, it is no band, but the paper is still white.
    broken = WHITE.copy()
    broken[:3, :], broken[:, :3] = -1.0, -1.0
    assert np.median(ga._frame_pixels(broken[None])) == 0.0
    np.testing.assert_allclose(ga.background_intensity(np.stack([broken, BLACK])), [1.0, 0.0], atol=1e-6)
    # Samples padded with black are not a pixel inversion (read from the frame alone: 99 of 100 dark, z = 14.0).
    verdict = ga.inversion_verdict(np.stack(padded * 33 + [WHITE]), np.stack([WHITE] * 100))
    assert verdict["pixel_inversion_suspected"] is False and verdict["evidence"]["current"]["dark"] == 0
    # A 1- or 2-pixel frame leaves the 3-pixel frame a third or two thirds black, not flat (before 2026-12-07 the
    # 1-pixel one left every image without a background); its rings are flat, so the rings inside it are read:
    # the verdict is a "no", not INCONCLUSIVE for want of a background.
    for width in (1, 2):
        framed = WHITE.copy()
        framed[:width], framed[-width:], framed[:, :width], framed[:, -width:] = -1.0, -1.0, -1.0, -1.0
        assert np.mean(ga._frame_pixels(framed[None]) == 0.0) == pytest.approx((108 if width == 1 else 208) / 300)
        assert ga.flat_frame_share(framed[None])[0] == 1.0
        assert ga.no_background_samples(np.stack([framed] * 10))["no_background"] == 0
        verdict = ga.inversion_verdict(np.stack([framed] * 100), np.stack([WHITE] * 100))
        assert (verdict["pixel_inversion_suspected"], verdict["inconclusive"]) == (False, False), width
    # An outer ring that is itself a texture is not set aside: 108 speckled pixels of 300 stay off the median.
    speckled = WHITE.copy()
    ring = ga._rings() == 0
    speckled[ring] = np.where(np.arange(ring.sum()) % 2 == 0, -1.0, 0.4)   # black and grey (0.7), alternating
    assert ga.flat_frame_share(speckled[None])[0] == pytest.approx(192 / 300)


def test_verdict_against_a_reference_gan():
    suspected = ga.inversion_verdict(_samples(100, 0.5), _samples(100, 0.0))
    assert suspected["pixel_inversion_suspected"] is True
    evidence = suspected["evidence"]
    # Pooled p = 0.25: z = 0.5 / sqrt(0.25 * 0.75 * (1/100 + 1/100)).
    assert evidence["z"] == pytest.approx(0.5 / np.sqrt(0.1875 * 0.02))
    assert (evidence["current"]["dark"], evidence["reference"]["dark"]) == (50, 0)
    clean = ga.inversion_verdict(_samples(100, 0.0), _samples(100, 0.0))
    assert clean["pixel_inversion_suspected"] is False and clean["evidence"]["z"] == 0.0
    # One-sided: fewer dark samples than the reference is no evidence of inversion.
    assert ga.inversion_verdict(_samples(100, 0.0), _samples(100, 0.5))["pixel_inversion_suspected"] is False
    # Small differences stay below z = 3.
    assert ga.inversion_verdict(_samples(100, 0.08), _samples(100, 0.03))["pixel_inversion_suspected"] is False


def test_blank_samples_make_the_verdict_inconclusive():
    blank_white, blank_black = np.full((28, 28), 1.0, np.float32), np.full((28, 28), -1.0, np.float32)
    faint = _character(1.0, 0.5)  # ink 0.75 vs background 1.0: contrast 0.25 < 0.5, no visible character
    # The bar covers 16x4 = 64 of 784 pixels (8%): a character; 7 pixels (0.9%) are below the 1% line.
    speck = blank_white.copy()
    speck[10, 10:17] = -1.0
    stats = ga.blank_samples(np.stack([WHITE, BLACK, blank_white, blank_black, faint, speck]))
    assert stats == {"samples": 6, "blank": 4, "share": 4 / 6}
    blanks = np.stack([blank_white] * 60 + [WHITE] * 40)[..., None]
    # A collapsed reference GAN (60% blank): the z-test still runs, but the verdict is flagged.
    verdict = ga.inversion_verdict(_samples(100, 0.5), blanks)
    assert verdict["pixel_inversion_suspected"] is True and verdict["inconclusive"] is True
    assert verdict["evidence"]["mostly_blank"] == ["reference"] and verdict["evidence"]["blank"]["reference"]["blank"] == 60
    collapsed = ga.inversion_verdict(blanks)
    assert collapsed["pixel_inversion_suspected"] is False and collapsed["evidence"]["mostly_blank"] == ["current"]
    healthy = ga.inversion_verdict(_samples(100, 0.5), _samples(100, 0.0))
    assert healthy["inconclusive"] is False and healthy["evidence"]["blank"]["current"]["blank"] == 0


def test_the_report_warns_about_a_gan_drawing_blanks():
    from fedgen_debug.cli.gan_cmd import format_report

    def gan(name, images, users=6.2):
        return {"run_dir": name, "select": "by-user-accuracy:low", "samples_png": f"{name}/samples.png",
                "population": {"users": users, "users_stddev": 2.8, "users_total": 9, "images": 30.5,
                               "images_stddev": 1448.2},
                "privacy": {"run": {"epsilon": 344.0, "above_warning": True}},
                "dark_background": ga.dark_background(images), "quality": {"frechet_distance": 1.0, "classifier_score": 2.0}}

    blanks = np.full((20, 28, 28, 1), 1.0, np.float32)
    lines = format_report({**ga.inversion_verdict(_samples(20, 0.5), blanks),
                           "current": gan("low", _samples(20, 0.5)), "compare": gan("high", blanks)})
    assert [line for line in lines if line.startswith("WARNING")] == [
        "WARNING: the compare GAN draws blank images (100% of samples): it did not learn its data, so its "
        "dark-background share is no evidence; train longer, with more clients per round or less noise"]
    assert "≈6 ± 3 of 9 users, ≈30 ± 1448 images, DP counts; ε = 344 WARNING: ε > 10, weak privacy" in lines[0]
    assert lines[-1].startswith("pixel inversion suspected: YES (INCONCLUSIVE) (")
    healthy = format_report({**ga.inversion_verdict(_samples(10, 0.0), _samples(10, 0.0)),
                             "current": gan("low", _samples(10, 0.0)), "compare": gan("high", _samples(10, 0.0))})
    assert not any(line.startswith("WARNING") for line in healthy) and "INCONCLUSIVE" not in healthy[-1]
    # Along training: what the path showed, printed above the verdict it decided.
    path = ga.training_path_evidence(_path(0, 1, 1, 0), _path(0, 0, 0, 0))
    flipped = format_report({**ga.inversion_verdict(_samples(10, 0.0), _samples(10, 0.0), path),
                             "current": gan("low", _samples(10, 0.0)), "compare": gan("high", _samples(10, 0.0))})
    # A selection whose DP count is under 2σ: said so, with what to do (5.5 ± 2.8 is; 6.2 above was not).
    empty = format_report({**ga.inversion_verdict(_samples(10, 0.0), _samples(10, 0.0)),
                           "current": gan("low", _samples(10, 0.0), users=5.5), "compare": gan("high", _samples(10, 0.0))})
    assert [line for line in empty if line.startswith("WARNING")] == [
        "WARNING: the current GAN's selection cannot be told from an empty one (DP count ≈6 ± 3 users): it learned "
        "little from users' data; a broader cut (a higher quantile=) selects more"]
    # The pair the other way round (high-accuracy GAN as RUN_DIR): said so, with the order to give instead.
    given_high_first = {**ga.inversion_verdict(_samples(10, 0.0), _samples(10, 0.0)),
                        "current": {**gan("high", _samples(10, 0.0)), "select": "by-user-accuracy:high"},
                        "compare": gan("low", _samples(10, 0.0))}
    assert [line for line in format_report(given_high_first) if line.startswith("WARNING")] == [
        "WARNING: RUN_DIR holds by-user-accuracy:high (where the primary model works) and --compare "
        "by-user-accuracy:low (where it fails): the check asks whether the working side's backgrounds are the darker "
        "ones; the suspect goes first (`analyze-gan LOW --compare HIGH`; `diagnose` reads a pair in either order)"]
    t2 = {**given_high_first, "current": {**given_high_first["current"], "select": "by-example:correct"},
          "compare": {**given_high_first["compare"], "select": "by-example:misclassified,min_count=20"}}
    assert sum(line.startswith("WARNING: RUN_DIR holds by-example:correct") for line in format_report(t2)) == 1
    textures = np.stack([_texture()] * 10)[..., None]
    diverged = format_report({**ga.inversion_verdict(textures, _samples(10, 0.0)),
                              "current": gan("low", textures), "compare": gan("high", _samples(10, 0.0))})
    assert [line for line in diverged if line.startswith("WARNING")] == [
        "WARNING: the current GAN draws images without a background (a texture, not characters) (100% of samples): "
        "it did not learn its data, so its dark-background share is no evidence; train longer, with more clients per "
        "round or less noise"]
    noise = np.where(np.random.default_rng(0).random((10, 28, 28, 1)) < 0.5, -1.0, 1.0).astype(np.float32)
    noisy = format_report({**ga.inversion_verdict(_samples(10, 0.0), noise),
                           "current": gan("low", _samples(10, 0.0)), "compare": gan("high", noise)})
    assert [line.split(" (")[0] for line in noisy if line.startswith("WARNING")] == [   # noise has no background
        "WARNING: the compare GAN draws noise images"]                                  # either: one warning
    assert flipped[-2] == ("along training: 2 of 4 snapshots darker than the reference (rounds 20, 30); largest "
                           "z = 11.3 at round 20, threshold 3.40 for 4 tests")
    assert flipped[-1].startswith("pixel inversion suspected: YES (") and flipped[-1].endswith("; YES along training)")


def test_noise_samples_make_the_verdict_inconclusive():
    """Salt and pepper (a GAN whose discriminator was drowned in DP noise) is not handwriting: its
    frame median says "white" by chance, so its dark share proves nothing."""
    noise = np.where(np.random.default_rng(0).random((60, 28, 28)) < 0.5, -1.0, 1.0).astype(np.float32)
    assert ga.speckle(noise[:5]).min() > 0.4 and ga.speckle(np.stack([WHITE, BLACK, GRAY_WHITE])).max() < 0.1
    stats = ga.noise_samples(np.concatenate([noise, np.stack([WHITE] * 40)]))
    assert (stats["noise"], stats["share"]) == (60, 0.6)
    verdict = ga.inversion_verdict(_samples(100, 1.0), noise[..., None])
    assert verdict["pixel_inversion_suspected"] is True and verdict["inconclusive"] is True
    assert verdict["evidence"]["mostly_noise"] == ["reference"] and verdict["evidence"]["mostly_blank"] == []
    assert ga.inversion_verdict(_samples(100, 1.0), _samples(100, 0.0))["inconclusive"] is False


def _texture() -> np.ndarray:
    """A dark texture, as a bilinear generator drew after diverging under DP noise on real FEMNIST: no
    plain background anywhere. Vertical stripes, 2 columns at 0.0 and 2 at 0.7 (unit range), and a bright
    bar (1.0) in the middle so it has ink. The frame's 300 pixels: 150 at each level, median 0.35 (dark),
    every pixel 0.35 from it, so none is within 0.25: flat share 0."""
    unit = np.where((np.arange(28) // 2) % 2 == 0, 0.0, 0.7)[None, :].repeat(28, axis=0)
    unit[6:22, 12:16] = 1.0
    return (2.0 * unit - 1.0).astype(np.float32)


def test_a_texture_without_a_background_is_not_inverted_handwriting():
    """The statistic reads a background from the frame; a dark texture has none. Its speckle (0.16) is in
    learned GANs' range and it has ink, so neither the noise nor the blank test catches it: without this,
    a 0% run whose low-accuracy GAN diverged this way would read YES."""
    texture = _texture()
    assert ga.flat_frame_share(np.stack([WHITE, BLACK, texture])).tolist() == [1.0, 1.0, 0.0]
    assert ga.flat_frame_share(GRAY_WHITE[None]).tolist() == [pytest.approx(288 / 300)]  # a stroke crossing the frame
    assert ga.background_intensity(texture[None])[0] == pytest.approx(0.35)
    assert ga.speckle(texture[None])[0] < ga.NOISE_SPECKLE_ABOVE and ga.blank_samples(texture[None])["blank"] == 0
    stats = ga.no_background_samples(np.stack([texture] * 60 + [WHITE] * 40))
    assert (stats["no_background"], stats["share"]) == (60, 0.6)
    textures = np.stack([texture] * 100)[..., None]
    verdict = ga.inversion_verdict(textures, _samples(100, 0.0))
    assert verdict["pixel_inversion_suspected"] is True and verdict["inconclusive"] is True   # z alone said YES
    e = verdict["evidence"]
    assert e["mostly_no_background"] == ["current"] and e["mostly_noise"] == e["mostly_blank"] == []
    # Inverted characters have a background, dark or not: the verdict stands.
    assert ga.inversion_verdict(_samples(100, 1.0), _samples(100, 0.0))["inconclusive"] is False
    # Along training, texture snapshots are skipped like blank or noise ones.
    low = {10: _samples(64, 0.0), 20: np.stack([texture] * 64)[..., None], 30: _samples(64, 0.0)}
    path = ga.training_path_evidence(low, _path(0, 0, 0))
    assert path["rounds_tested"] == 2 and path["suspected"] is False


def test_verdict_against_the_noise_floor():
    yes = ga.inversion_verdict(_samples(64, 0.5))
    assert yes["pixel_inversion_suspected"] is True and yes["evidence"]["reference"] is None
    assert yes["evidence"]["z"] == pytest.approx((0.5 - 0.05) / np.sqrt(0.05 * 0.95 / 64))
    assert ga.inversion_verdict(_samples(64, 0.0))["pixel_inversion_suspected"] is False
    assert ga.inversion_verdict(_samples(64, 1 / 64))["pixel_inversion_suspected"] is False
    with pytest.raises(ValueError, match="no images"):
        ga.inversion_verdict(np.zeros((0, 28, 28, 1)))


def _with_moments(n, mean, cov, seed):
    """Samples whose sample mean and covariance (ddof=1) are exactly `mean` and `cov`."""
    z = np.random.default_rng(seed).normal(size=(n, len(mean)))
    z -= z.mean(axis=0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z, rowvar=False))).T
    return z @ np.linalg.cholesky(cov).T + mean


def test_frechet_distance_closed_forms():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(50, 8))
    assert ga.frechet_distance(feats, feats) == pytest.approx(0.0, abs=1e-9)
    # Diagonal covariances: |mu1 - mu2|^2 + sum (sqrt(a_i) - sqrt(b_i))^2.
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    a, b = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 9.0])
    expected = 1 + 0 + 4 + (1 - 2) ** 2 + (2 - 1) ** 2 + 0
    assert ga.frechet_distance_from_statistics(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(expected)
    # From features with exactly these moments.
    fa, fb = _with_moments(40, mu1, np.diag(a), 1), _with_moments(30, mu2, np.diag(b), 2)
    assert ga.frechet_distance(fa, fb) == pytest.approx(expected)
    # Same eigenvectors (rotated diagonal covariances): the same closed form.
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    assert ga.frechet_distance_from_statistics(q @ mu1, q @ np.diag(a) @ q.T, q @ mu2,
                                               q @ np.diag(b) @ q.T) == pytest.approx(expected)
    # Non-commuting covariances: the textbook formula with scipy's matrix square root.
    s1 = np.cov(rng.normal(size=(20, 4)), rowvar=False)
    s2 = np.cov(rng.normal(size=(20, 4)) * [1, 2, 3, 4], rowvar=False)
    textbook = np.trace(s1) + np.trace(s2) - 2 * np.trace(scipy.linalg.sqrtm(s1 @ s2).real)
    assert ga.frechet_distance_from_statistics(np.zeros(4), s1, np.zeros(4), s2) == pytest.approx(textbook)
    with pytest.raises(ValueError, match="mismatched statistics"):
        ga.frechet_distance_from_statistics(np.zeros(3), np.eye(3), np.zeros(4), np.eye(4))


def test_classifier_score_bounds():
    assert ga.classifier_score(np.zeros((10, 5))) == pytest.approx(1.0)
    confident = np.tile(np.eye(5) * 50, (4, 1))  # each class predicted with certainty, equally often
    assert ga.classifier_score(confident) == pytest.approx(5.0)


def test_sample_quality_with_the_cnn():
    model = cnn.build_cnn(presets.primary_cnn_config("test"), seed=0)
    images = _samples(16, 0.5) * np.linspace(0.5, 1.0, 16)[:, None, None, None]
    reference = ga.feature_statistics(cnn.features(model, ga.to_unit(images)))
    same = ga.sample_quality(model, images, reference)
    assert same["samples"] == 16 and same["frechet_distance"] == pytest.approx(0.0, abs=1e-6)
    assert 1.0 <= same["classifier_score"] <= 10.0
    assert ga.sample_quality(model, _samples(16, 0.0) * 0.2, reference)["frechet_distance"] > 1e-3
    assert "near_duplicates" not in same  # no reference distances given
    nearest = ga.nearest_neighbour_distances(cnn.features(model, ga.to_unit(images)))
    assert ga.sample_quality(model, images, reference, nearest)["near_duplicates"]["samples"] == 16


def test_nearest_neighbour_distances_by_hand():
    points = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 5.0]])
    assert ga.nearest_neighbour_distances(points) == pytest.approx([5.0, 1.0, 1.0])
    # Against a reference whose row i stands for query i (never its own neighbour).
    reference = np.array([[0.0, 1.0], [0.0, 0.0], [3.0, 5.0]])
    assert ga.nearest_neighbour_distances(points, reference) == pytest.approx([0.0, 1.0, 5.0])


def test_near_duplicates_tell_a_collapsed_generator_from_varied_samples():
    """Features of clean images set the threshold (their 5th percentile of nearest distances): samples
    as varied as the clean data have about 5% near duplicates; 10 modes with small jitter, nearly all."""
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(400, 16))
    reference = ga.nearest_neighbour_distances(clean)
    varied = ga.near_duplicates(rng.normal(size=(500, 16)), reference)
    assert varied["samples"] == 400 and varied["share"] < 0.15
    assert varied["threshold"] == pytest.approx(np.quantile(reference, 0.05))
    modes = rng.normal(size=(10, 16))
    collapsed = ga.near_duplicates(modes[rng.integers(0, 10, 400)] + rng.normal(0, 0.05, (400, 16)), reference)
    assert collapsed["share"] > 0.95
    with pytest.raises(ValueError, match="compare 400 samples"):
        ga.near_duplicates(clean[:100], reference)


def test_sample_grid_png(tmp_path):
    path = str(tmp_path / "grid.png")
    ga.sample_grid_png(np.stack([WHITE, BLACK, WHITE])[..., None], path, rows=2, cols=2, scale=1)
    pixels = np.asarray(Image.open(path))
    assert pixels.shape == (2 * 29 + 1, 2 * 29 + 1)
    assert pixels[0, 0] == 128                  # gutter
    assert pixels[1, 1] == 255 and pixels[1, 30] == 0   # white and black backgrounds
    assert pixels[10, 14] == 0 and pixels[10, 43] == 255  # their ink
    assert pixels[31, 31] == 128                # the missing fourth image stays blank
    assert os.listdir(tmp_path) == ["grid.png"]  # no partial file left behind
    with pytest.raises(ValueError, match="rows, cols and scale must be >= 1. Found 0, 2, 1."):
        ga.sample_grid_png(np.stack([WHITE]), path, rows=0, cols=2, scale=1)


def _path(*dark_shares, blank_rounds=()) -> dict:
    """Snapshots of 64 samples at rounds 10, 20, ...: the given dark shares; `blank_rounds`: all black, no ink."""
    path = {}
    for i, share in enumerate(dark_shares):
        r = 10 * (i + 1)
        path[r] = np.full((64, 28, 28, 1), -1.0, np.float32) if r in blank_rounds else _samples(64, share)
    return path


def test_a_gan_that_visits_the_inverted_mode_and_ends_clean_is_suspected_along_training():
    """FEMNIST with 9 of 184 writers inverted: the low-accuracy GAN drew dark snapshots, then light ones."""
    low, high = _path(0, 0, 1, 1, 0, 0, 0, 0, 0, 0), _path(*[0] * 10)
    final = ga.inversion_verdict(_samples(100, 0.0), _samples(100, 0.0))
    assert final["pixel_inversion_suspected"] is False                      # the final samples: the clean mode
    path = ga.training_path_evidence(low, high)
    assert path["dark_rounds"] == [30, 40] and path["suspected"] and path["rounds_tested"] == 10
    assert path["max_z"] == pytest.approx(ga.z_two_proportions(64, 64, 0, 64)) and path["round_of_max_z"] == 30
    verdict = ga.inversion_verdict(_samples(100, 0.0), _samples(100, 0.0), path)
    assert verdict["pixel_inversion_suspected"] is True and verdict["inconclusive"] is False
    assert verdict["evidence"]["z"] == final["evidence"]["z"] and verdict["evidence"]["training_path"] == path
    # Clean along training: nothing.
    clean = ga.training_path_evidence(high, high)
    assert clean["suspected"] is False and clean["dark_rounds"] == [] and clean["max_z"] == 0.0
    assert ga.inversion_verdict(_samples(100, 0.0), _samples(100, 0.0), clean)["pixel_inversion_suspected"] is False


def test_the_path_tests_only_learned_snapshots_and_pays_for_its_many_tests():
    # A snapshot that is all black is blank (no ink), not inverted handwriting: skipped on either side.
    blank_dark = ga.training_path_evidence(_path(0, 1, 0, blank_rounds=(20,)), _path(0, 0, 0))
    assert blank_dark["rounds_tested"] == 2 and blank_dark["suspected"] is False
    assert ga.training_path_evidence(_path(1, 1), _path(0, 0, blank_rounds=(10, 20)))["rounds_tested"] == 0
    # Bonferroni: one test at 3.0; K tests each at the z whose tail is p(Z > 3) / K.
    assert ga.path_z_threshold(1) == pytest.approx(3.0)
    assert ga.path_z_threshold(20) == pytest.approx(3.8172, abs=1e-3)
    # 14 vs 2 dark of 64 (z ≈ 3.2) would pass one test, not the threshold for 10 of them.
    borderline = ga.training_path_evidence(_path(*[0] * 9, 14 / 64), _path(*[0] * 9, 2 / 64))
    assert 3.0 < borderline["max_z"] < ga.path_z_threshold(10) and borderline["suspected"] is False
    # Without a reference: each snapshot against the noise floor.
    alone = ga.training_path_evidence(_path(0, 1, 0))
    assert alone["suspected"] and alone["dark_rounds"] == [20] and alone["tests"][1]["reference_dark_share"] is None


def _faint_bars(ink: float, column: int = 13, n: int = 10) -> np.ndarray:
    """n images in [-1, 1]: a white page with a 16×2-pixel bar at `ink` (peak darkness (1 - ink) / 2)."""
    images = np.ones((n, 28, 28), np.float32)
    images[:, 6:22, column:column + 2] = ink
    return images


def test_training_trend_tells_a_gan_still_darkening_or_moving_from_one_that_settled():
    """The last four snapshots decide; a GAN of faint marks that still changes has not settled."""
    settled = ga.training_trend({r: _faint_bars(0.6) for r in (10, 20, 30, 40, 50)})
    assert settled["rounds"] == [20, 30, 40, 50] and settled["still_changing"] is False
    assert settled["blank_share"] == [1.0] * 4                        # contrast 0.2 < 0.5: blank, but faint ink
    assert settled["peak_darkness"] == pytest.approx([0.2] * 4) and settled["pixel_change"] == [0.0] * 3
    # Darkening ink: peak darkness 0.20 → 0.35, a move of 0.15 > 0.1, while every snapshot is still blank.
    darkening = ga.training_trend({10: _faint_bars(0.6), 20: _faint_bars(0.5), 30: _faint_bars(0.4),
                                   40: _faint_bars(0.3)})
    assert darkening["still_changing"] is True and darkening["blank_share"] == [1.0] * 4
    assert darkening["peak_darkness"] == pytest.approx([0.2, 0.25, 0.3, 0.35])
    # Same darkness and blank share, strokes moving: 2 × 32 pixels change by 0.2 of 784, 0.016 per snapshot:
    # settled; strokes twice as dark (0.4) moving: 0.033 > 0.03, still changing.
    drifting = {r: _faint_bars(0.6, column=4 + 4 * i) for i, r in enumerate((10, 20, 30, 40))}
    assert ga.training_trend(drifting)["pixel_change"] == pytest.approx([64 * 0.2 / 784] * 3)
    assert ga.training_trend(drifting)["still_changing"] is False
    moving = {r: _faint_bars(0.2, column=4 + 4 * i) for i, r in enumerate((10, 20, 30, 40))}
    assert ga.training_trend(moving)["still_changing"] is True
    assert ga.training_trend({10: _faint_bars(0.6), 20: _faint_bars(0.6), 30: _faint_bars(0.6)}) is None
