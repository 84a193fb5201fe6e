"""Analysis of GAN samples (paper §6, Figs. 3/6/7/8): generated image arrays in, dicts out.

Nothing here sees a client's examples: only generated images and, for the Fréchet distance,
feature statistics of a reference set (e.g. the public clean data the primary CNN was trained on).
Images are the generator's output, [n, 28, 28(, 1)] in [-1, 1] with +1 = white background
(`gan_data.to_gan_range`).

- Inversion statistic: each image's background intensity, the median of its outer 3-pixel frame in
  [0, 1] (characters are centred with a margin, and the median tolerates a stroke touching the
  edge); an image with background < 0.5 is "dark-background", i.e. looks inverted. A frame that is a
  border around white paper (zero padding of a shrunk image, a painted frame) is not the background:
  the paper it encloses is (`image_properties.background_levels`).
- Verdict: one-sided two-proportion z-test (as `lm_analysis`) that the current GAN's dark share
  exceeds the reference GAN's (low- vs high-accuracy users, or before vs after a fix); without a
  reference, against a 5% noise floor (a GAN trained on clean data rarely draws dark backgrounds).
- Training path (a sequential test across rounds, paper App. D): a GAN on a two-mode population (a few
  inverted devices among clean ones) changes mode over rounds (measured: FEMNIST, 9 of 11 qualifying
  writers inverted: gray noise to round 50, dark strokes on white at rounds 90-130, white on black from
  150), so where training stops decides what the final samples show. The released snapshots (64 samples on fixed noise every few rounds) are tested
  round by round against the reference's at the same round, skipping snapshots that are mostly
  blank or noise on either side; the largest z must clear the Bonferroni threshold for that many tests
  (one-sided p(Z > 3) / K: z ≈ 3.8 for 20 snapshots), so the path adds at most the final test's false
  alarm rate again. No GAN trained without the bug (0%, or high-accuracy users) drew a dark snapshot
  in any measured run.
- Blank samples: an image with ink (pixels further than 0.5 from its background) on under 1% of its
  pixels shows no character. A GAN drawing mostly blanks has not learned its data (seen with demo
  presets: collapses to uniform white or black), so its dark share is no evidence either way: the
  verdict is then flagged `inconclusive`, whatever its z. Such a "blank" may still hold faint ink (under
  half-ink, `FAINT_INK_CONTRAST` or more from the background): `diagnose` names those samples faint.
- Noise samples: an image whose neighbouring pixels differ by more than 0.3 on average is salt and
  pepper, not handwriting (handwriting: 0.03-0.08; learned demo GANs: 0.11-0.15; GANs whose noisy
  discriminator taught G nothing: 0.44-0.52, measured). Mostly noise is `inconclusive` too: such a
  GAN's frame median says "white" by chance.
- Samples without a background: the statistic reads a background from the frame, so the frame must be
  one. An image where under `FLAT_FRAME_SHARE` of the frame's pixels lie within `FLAT_FRAME_WITHIN` of
  its median has none, unless its outer ring or two are each flat (a line painted round the paper) and
  the rings inside are (`flat_frame_share`). Measured: every image of the real FEMNIST writers and of
  the synthetic ones has one; of 117 evaluation GANs, 95 drew 0% without, inverted or not, and 22 drew
  100%: 18 noise GANs and 4 dark textures of a bilinear generator that diverged under DP noise on real
  FEMNIST, speckle 0.11-0.19, inside learned GANs' range, so the noise test missed them.
  Mostly such images is `inconclusive` too: a dark texture is not an inverted character.
- Sample quality: Fréchet distance in the primary CNN's Dense-128 feature space, and the
  classifier score exp(E[KL(p(y|x) || p(y))]) from the CNN's logits (TF-GAN's EMNIST metrics).
- Near duplicates (mode collapse): in the same feature space, the share of samples whose nearest
  other sample is closer than the 5th percentile of clean held-out images' nearest distances. Pixel
  distances cannot tell: thin strokes on white make clean images close (FEMNIST: 5% of nearest RMS
  below 0.03) while a collapsed GAN's noisy copies of one mode are further apart (measured).
"""

from __future__ import annotations


import statistics
from collections.abc import Mapping

import numpy as np
from PIL import Image

from fedgen_debug.data.atomic import atomic_path
from fedgen_debug.analysis import image_properties
from fedgen_debug.models.gan import to_unit
from fedgen_debug.stats import (Z_THRESHOLD, feature_statistics, nearest_neighbour_distances, z_one_proportion,
                                z_two_proportions)
from fedgen_debug.models import cnn

DARK_NOISE_FLOOR = 0.05
DARK_BELOW = 0.5
FRAME = 3
INK_CONTRAST = 0.5
FAINT_INK_CONTRAST = 0.1
BLANK_INK_BELOW = 0.01
NOISE_SPECKLE_ABOVE = 0.3
FLAT_FRAME_WITHIN = 0.25
FLAT_FRAME_SHARE = 0.8
INCONCLUSIVE_SHARE = 0.5
NEAR_DUPLICATE_QUANTILE = 0.05


def _frame_pixels(images) -> np.ndarray:
    """Per image, the outer `FRAME`-pixel frame's pixels in [0, 1]: [n, 300]."""
    return to_unit(images)[:, _rings() < FRAME]


def background_intensity(images) -> np.ndarray:
    """Per image: the paper's level in [0, 1], the median of the outer `FRAME`-pixel frame unless that frame is a
    border around the paper (zero padding, a painted frame: `image_properties.background_levels`)."""
    return image_properties.background_levels(to_unit(images))


def _rings() -> np.ndarray:
    """[28, 28]: each pixel's ring, its distance in pixels from the image's nearest edge (0: the outermost)."""
    row, col = np.indices((28, 28))
    return np.minimum.reduce([row, col, 27 - row, 27 - col])


def _flat_share(pixels: np.ndarray) -> np.ndarray:
    """Per row of pixels [n, m]: the share within `FLAT_FRAME_WITHIN` of the row's median."""
    return np.mean(np.abs(pixels - np.median(pixels, axis=1, keepdims=True)) <= FLAT_FRAME_WITHIN, axis=1)


def flat_frame_share(images) -> np.ndarray:
    """Per image: the share of its frame's pixels within `FLAT_FRAME_WITHIN` of the frame's median (1.0 for
    a character on a plain background, however dark). A line painted round the image, its outer ring or two
    each flat (`FLAT_FRAME_SHARE` of the ring within `FLAT_FRAME_WITHIN` of its own median), is set aside: the
    share is then the larger of the whole frame's and the rings' inside it. A 1-pixel black frame round white
    paper left 64% of the frame at the median, and every such image without a background (2026-12-07)."""
    unit, rings = to_unit(images), _rings()
    share = _flat_share(unit[:, rings < FRAME])
    outer_flat = np.ones(len(unit), bool)
    for inner in range(1, FRAME):
        outer_flat &= _flat_share(unit[:, rings == inner - 1]) >= FLAT_FRAME_SHARE
        inside = _flat_share(unit[:, (rings >= inner) & (rings < FRAME)])
        share = np.where(outer_flat, np.maximum(share, inside), share)
    return share


def _per_image(values: np.ndarray) -> np.ndarray:
    if len(values) == 0:
        raise ValueError("no images to analyze.")
    return values


def _flagged(flags: np.ndarray, key: str, **extra) -> dict:
    """{"samples", key: how many are flagged, "share", **extra} of one boolean per image."""
    count = int(np.sum(flags))
    return {"samples": len(flags), key: count, "share": count / len(flags), **extra}


def no_background_samples(images) -> dict:
    """How many images have no background to read: a frame under `FLAT_FRAME_SHARE` flat (a texture), unless
    the frame is a border round paper (`background_intensity` then reads the paper, not the frame)."""
    values = _per_image(flat_frame_share(images))
    bordered = background_intensity(images) != np.median(_frame_pixels(images), axis=1)
    return _flagged((values < FLAT_FRAME_SHARE) & ~bordered, "no_background",
                    median_flat_frame=float(np.median(values)))


def dark_background(images) -> dict:
    background = _per_image(background_intensity(images))
    return _flagged(background < DARK_BELOW, "dark", median_background=float(np.median(background)))


def blank_samples(images, contrast: float = INK_CONTRAST) -> dict:
    """How many images show no character: ink (pixels further than `contrast` from the background) on
    under `BLANK_INK_BELOW` of their pixels."""
    unit = _per_image(to_unit(images))
    ink = np.mean(np.abs(unit - background_intensity(images)[:, None, None]) > contrast, axis=(1, 2))
    return _flagged(ink < BLANK_INK_BELOW, "blank")


def speckle(images) -> np.ndarray:
    """Per image: the mean absolute difference of horizontally and vertically neighbouring pixels."""
    unit = to_unit(images)
    return (np.abs(np.diff(unit, axis=1)).mean(axis=(1, 2)) + np.abs(np.diff(unit, axis=2)).mean(axis=(1, 2))) / 2


def noise_samples(images) -> dict:
    """How many images are salt-and-pepper noise (speckle above `NOISE_SPECKLE_ABOVE`)."""
    values = _per_image(speckle(images))
    return _flagged(values > NOISE_SPECKLE_ABOVE, "noise", median_speckle=float(np.median(values)))


def near_duplicates(features, reference_nearest) -> dict:
    """Mode collapse: the share of samples whose nearest other sample (in the primary CNN's feature
    space) is closer than all but `NEAR_DUPLICATE_QUANTILE` of clean images are to theirs.

    Nearest distances shrink as the set grows, so the samples are compared at the reference's size
    (its first len(reference_nearest) rows). A GAN drawing as varied images as the clean data has a
    share near `NEAR_DUPLICATE_QUANTILE`; a collapsed one, near 1."""
    reference_nearest = np.asarray(reference_nearest, np.float64)
    n = len(reference_nearest)
    if len(features) < n:
        raise ValueError(f"near duplicates compare {n} samples with the reference; found {len(features)}.")
    threshold = float(np.quantile(reference_nearest, NEAR_DUPLICATE_QUANTILE))
    values = nearest_neighbour_distances(np.asarray(features)[:n])
    duplicated = int(np.sum(values < threshold))
    return {"samples": n, "near_duplicates": duplicated, "share": duplicated / n, "threshold": threshold,
            "clean_share": NEAR_DUPLICATE_QUANTILE}


def snapshot_statistics(images) -> dict:
    """The cheap statistics of a training snapshot (eval.csv; `training.gan_snapshots`)."""
    return {"dark_background_share": dark_background(images)["share"],
            "blank_share": blank_samples(images)["share"],
            "noise_share": noise_samples(images)["share"]}


# A GAN still changing vs one that settled (`training_trend`), measured on the released snapshots of the 54
# T4 GANs of 2026-12-03/04 (docs/analysis.md): 257 of their 258 mostly-blank snapshots from round 40 on had
# moved by more than these over their last 4 snapshots (the GANs were learning, or, twice, diverging).
TREND_SNAPSHOTS = 4
TREND_SHARE_MOVE = 0.1      # of the blank share, or of the mean peak darkness (0-1)
TREND_PIXEL_CHANGE = 0.03   # mean |Δ pixel| (0-1) between consecutive snapshots of the same public noise


def training_trend(snapshots: Mapping[int, np.ndarray]) -> dict | None:
    """Whether the generator was still changing at the end of training, from its last `TREND_SNAPSHOTS`
    snapshots (round → images in [-1, 1], one fixed batch of public noise, so consecutive snapshots differ
    only by training): still changing when the blank share or the mean peak darkness moved by more than
    `TREND_SHARE_MOVE`, or consecutive snapshots' pixels by more than `TREND_PIXEL_CHANGE` on average.
    A GAN that draws faint marks and still learns will draw more; one that settled drew what it learned
    (faint or thin strokes in its data, or a GAN stuck). None with fewer snapshots."""
    rounds = sorted(snapshots)[-TREND_SNAPSHOTS:]
    if len(rounds) < TREND_SNAPSHOTS:
        return None
    units = [_per_image(to_unit(snapshots[r])) for r in rounds]
    blank = [blank_samples(snapshots[r])["share"] for r in rounds]
    darkness = [float(np.mean(1.0 - u.min(axis=(1, 2)))) for u in units]   # darkest pixel vs white: faint is low
    change = [float(np.mean(np.abs(b - a))) for a, b in zip(units, units[1:])]
    moved = max(max(blank) - min(blank), max(darkness) - min(darkness))
    return {"rounds": rounds, "blank_share": blank, "peak_darkness": darkness, "pixel_change": change,
            "still_changing": bool(moved > TREND_SHARE_MOVE or max(change) > TREND_PIXEL_CHANGE)}


def path_z_threshold(tests: int) -> float:
    """The z a one-sided test must clear among `tests` so that all together alarm as rarely as one test
    at `Z_THRESHOLD` (Bonferroni)."""
    normal = statistics.NormalDist()
    return normal.inv_cdf(1.0 - (1.0 - normal.cdf(Z_THRESHOLD)) / max(tests, 1))


def _learned(images) -> bool:
    return (blank_samples(images)["share"] <= INCONCLUSIVE_SHARE
            and noise_samples(images)["share"] <= INCONCLUSIVE_SHARE
            and no_background_samples(images)["share"] <= INCONCLUSIVE_SHARE)


def training_path_evidence(current: Mapping[int, np.ndarray], reference: Mapping[int, np.ndarray] | None = None) -> dict:
    """The dark-background test at every round with a snapshot of `current` (and of `reference`, when
    given: the rounds both have), skipping snapshots mostly blank, noise or without a background on either
    side. Images in
    [-1, 1]. Suspected when the largest z clears `path_z_threshold(rounds tested)`."""
    rounds = sorted(current) if reference is None else sorted(set(current) & set(reference))
    tests = []
    for r in rounds:
        if not _learned(current[r]) or (reference is not None and not _learned(reference[r])):
            continue
        now = dark_background(current[r])
        if reference is None:
            base, z = None, z_one_proportion(now["dark"], now["samples"], DARK_NOISE_FLOOR)
        else:
            base = dark_background(reference[r])
            z = z_two_proportions(now["dark"], now["samples"], base["dark"], base["samples"])
        tests.append({"round": r, "dark_share": now["share"], "reference_dark_share": None if base is None else base["share"],
                      "z": z})
    threshold = path_z_threshold(len(tests))
    top = max(tests, key=lambda t: t["z"], default=None)
    return {"rounds": len(rounds), "rounds_tested": len(tests), "z_threshold": threshold,
            "max_z": None if top is None else top["z"], "round_of_max_z": None if top is None else top["round"],
            "dark_rounds": [t["round"] for t in tests if t["z"] > threshold],
            "suspected": bool(top is not None and top["z"] > threshold), "tests": tests}


def inversion_verdict(current, reference=None, path: dict | None = None) -> dict:
    """Is a pixel-inversion bug suspected? `current`/`reference` are image arrays of two GANs; `path`,
    their `training_path_evidence` (optional): a bug the path shows is suspected even if the final
    samples show the clean mode.

    `inconclusive` is set when either GAN draws mostly blank, noise or background-less images (it did
    not learn its data)
    and the path, tested on learned snapshots only, does not show the bug."""
    now = dark_background(current)
    if reference is None:
        base = None
        z = z_one_proportion(now["dark"], now["samples"], DARK_NOISE_FLOOR)
        test = f"dark-background share vs a {DARK_NOISE_FLOOR:.0%} noise floor"
    else:
        base = dark_background(reference)
        z = z_two_proportions(now["dark"], now["samples"], base["dark"], base["samples"])
        test = "dark-background share vs the reference GAN's"
    blank = {"current": blank_samples(current), "reference": None if reference is None else blank_samples(reference)}
    noise = {"current": noise_samples(current), "reference": None if reference is None else noise_samples(reference)}
    mostly_blank = [name for name, b in blank.items() if b is not None and b["share"] > INCONCLUSIVE_SHARE]
    mostly_noise = [name for name, b in noise.items() if b is not None and b["share"] > INCONCLUSIVE_SHARE]
    no_background = {"current": no_background_samples(current),
                     "reference": None if reference is None else no_background_samples(reference)}
    mostly_no_background = [name for name, b in no_background.items()
                            if b is not None and b["share"] > INCONCLUSIVE_SHARE]
    on_path = bool(path is not None and path["suspected"])
    return {"pixel_inversion_suspected": bool(z > Z_THRESHOLD) or on_path,
            "inconclusive": bool(mostly_blank or mostly_noise or mostly_no_background) and not on_path,
            "evidence": {"statistic": "dark_background_share", "test": test, "z": z, "z_threshold": Z_THRESHOLD,
                         "current": now, "reference": base, "blank": blank, "mostly_blank": mostly_blank,
                         "noise": noise, "mostly_noise": mostly_noise, "no_background": no_background,
                         "mostly_no_background": mostly_no_background, "training_path": path}}


def sample_grid(images, rows: int, cols: int) -> np.ndarray:
    """The first rows×cols images (generator range) as one [0, 1] picture with 1-pixel gray gutters."""
    if rows < 1 or cols < 1:
        raise ValueError(f"rows and cols must be >= 1. Found {rows}, {cols}.")
    unit = to_unit(images)[: rows * cols]
    if len(unit) == 0:
        raise ValueError("no images to draw.")
    grid = np.full((rows * 29 + 1, cols * 29 + 1), 0.5)
    for i, image in enumerate(unit):
        r, c = divmod(i, cols)
        grid[1 + r * 29:1 + r * 29 + 28, 1 + c * 29:1 + c * 29 + 28] = image
    return grid


def sample_grid_png(images, path: str, rows: int = 8, cols: int = 8, scale: int = 2) -> None:
    """The first rows×cols images as a grayscale grid PNG (1-pixel gray gutters), written atomically."""
    if rows < 1 or cols < 1 or scale < 1:
        raise ValueError(f"rows, cols and scale must be >= 1. Found {rows}, {cols}, {scale}.")
    grid = sample_grid(images, rows, cols)
    picture = Image.fromarray(np.round(grid * 255).astype(np.uint8), mode="L")
    picture = picture.resize((picture.width * scale, picture.height * scale), Image.NEAREST)
    with atomic_path(path) as tmp:
        picture.save(tmp, format="PNG")


def frechet_distance_from_statistics(mu1, sigma1, mu2, sigma2) -> float:
    """||mu1 - mu2||² + Tr(S1 + S2 - 2 (S1 S2)^½) between two Gaussians.

    Tr (S1 S2)^½ is the sum of square roots of the eigenvalues of S1^½ S2 S1^½ (same spectrum as
    S1 S2, but symmetric): real and stable even for the singular covariances of few samples, where
    `scipy.linalg.sqrtm` returns complex noise.
    """
    mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
    sigma1, sigma2 = np.asarray(sigma1, np.float64), np.asarray(sigma2, np.float64)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != mu1.shape * 2:
        raise ValueError(f"mismatched statistics: means {mu1.shape}, {mu2.shape}; covariances "
                         f"{sigma1.shape}, {sigma2.shape}.")
    w, v = np.linalg.eigh(sigma1)
    root1 = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    cross = np.linalg.eigvalsh(root1 @ sigma2 @ root1)
    trace_sqrt = np.sum(np.sqrt(np.clip(cross, 0.0, None)))
    value = np.sum((mu1 - mu2) ** 2) + np.trace(sigma1) + np.trace(sigma2) - 2.0 * trace_sqrt
    return float(max(value, 0.0))


def frechet_distance(features_a, features_b) -> float:
    return frechet_distance_from_statistics(*feature_statistics(features_a), *feature_statistics(features_b))


def classifier_score(logits) -> float:
    """exp(E_x[KL(p(y|x) || p(y))]): from 1 (one class, or uninformative) up to the number of classes."""
    logits = np.asarray(logits, np.float64)
    log_p = logits - logits.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    log_marginal = np.log(np.clip(p.mean(axis=0), 1e-300, None))
    return float(np.exp(np.mean(np.sum(p * (log_p - log_marginal), axis=1))))


def sample_quality(model, images, reference_statistics: tuple[np.ndarray, np.ndarray],
                   reference_nearest=None) -> dict:
    """Fréchet distance (to the reference feature statistics), classifier score and, when the
    reference has them (`primary_cnn.reference_nearest`) and there are enough samples, near duplicates."""
    pixels = to_unit(images)
    features = cnn.features(model, pixels)
    quality = {"samples": len(pixels),
               "frechet_distance": frechet_distance_from_statistics(*feature_statistics(features),
                                                                    *reference_statistics),
               "classifier_score": classifier_score(cnn.logits(model, pixels))}
    if reference_nearest is not None and len(pixels) >= len(reference_nearest):
        quality["near_duplicates"] = near_duplicates(features, reference_nearest)
    return quality
