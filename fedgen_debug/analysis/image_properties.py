"""Interpretable properties of generated images, one value per image (issue 55, "How they differ").

Images are GAN samples as the analysis sees them: [n, 28, 28] in [0, 1], 1.0 = white background, dark ink
(`models.gan.to_unit` of the generator's output). As in `gan_analysis`, an image's background is the
median of its outer `FRAME`-pixel frame, or, where that frame is a border around the paper (zero padding,
a painted frame), the median of what it encloses (`background_levels`). Everything is numpy over the whole
batch (2,000 images in a fraction of a second).

Polarity first, then everything else on the *polarity-normalized* image: an image whose lightest pixels
differ more from its background than its darkest ones (light ink) is flipped (1 − x), so that an inverted
set differs from a clean one in `light_ink` alone and not also in brightness, contrast, ... The ink is then
`darkness` = background − pixel (≥ 0); the *ink mask* holds the pixels darker than half the image's peak
darkness (relative, so that faint or blurred ink is still ink), less its specks: pieces of fewer than
`MIN_INK_PIECE` pixels (8-connected) are noise, not strokes, unless nothing else is ink (a speck far from
the glyph would otherwise widen its extent and box, and its edges count as the glyph's). An image
without ink (peak darkness under `MIN_INK_DARKNESS`: blank) has no geometric properties: nan, which
`differences.compare` leaves out.

Families (`differences.IMAGE_FAMILIES`) and the properties that measure them:
- polarity: `light_ink` (yes/no).
- brightness: `mid_level` = (background + ink level)/2: a darkening or lightening of the whole image moves
  it; a contrast change about mid-gray does not.
- contrast: `michelson_contrast` = (background − ink)/(background + ink): a contrast change moves it; a
  multiplicative darkening (x·k) does not. A blur moves it too (thin strokes no longer reach full ink), so
  `diagnose` files it (and `mid_level`) under contrast only when the ink's total darkness moved with its level
  (`ink_spread`, `ink_masses`): a blur spreads the ink and keeps its total, a fading loses both.
- sharpness: `edge_width` (pixels in the 20-80% darkness transition, within `BACKGROUND_CLEARANCE` pixels
  of the ink, per ink-boundary pixel: the background beyond is the noise family's) and `edge_steepness`
  (the gradient at the ink's edge over the ink's darkness): blur widens edges and flattens them.
- position: `centre_x`, `centre_y`: the ink's bounding-box centre, pixels from the image centre (a box,
  not the ink's centre of mass, which orientation measures: mirroring a "7" moves its mass, not its box).
- scale: `extent` (the ink's radius of gyration, in pixels: rotation does not change it), `ink_area`.
- stroke: `stroke_width` (2 × the mean city-block depth of ink pixels). A blur widens it too (the ink's edges
  pass half the peak further out), so `diagnose` files it under stroke only when the ink's total moved with
  the width (`ink_spread`).
- resolution: `blockiness` (2×2 blocks from nearest-neighbour upsampling: how much weaker the differences
  inside 2-pixel blocks are than across their borders, at the better of the two block phases).
- noise: `background_speckle` (mean neighbour difference on the background at least 3 pixels from ink).
- artefact, a mark a faulty pipeline draws into every image (a ruled line, a frame, a stamp, a date), often
  lighter than the glyph (a grey ruled line is no ink by the half-peak rule): `line_darkness` (the darkest
  straight line across the whole image: over rows and columns, each read in a band of `LINE_BAND` so that
  a wavy line counts, the `LINE_PERCENTILE`th percentile of the relative darkness along it, less the
  median line's, which noise on every pixel raises as much. No glyph spans a whole row, so a clean image
  reads about 0, a line across or a frame its own darkness, however broken or faint: a GAN trained on half
  ruled writers draws the line faint and in pieces) and `detached_ink`
  (the share of the faint ink, darker than `FAINT_OF_PEAK` of the peak and less its specks, outside its
  largest 8-connected piece: a stamp or a date beside the glyph). A shift or a turn of the glyph moves
  neither.
- orientation: `vertical_strokes` (gradient energy across x vs across y: rotation by 90° or transposition
  swaps them), `stroke_slant` (the gradients' x·y correlation: mirroring flips it, rotating by 15-30°
  shifts it), `axis_alignment`, `axis_twist` (the gradient angle's 4th harmonic: strokes along the axes or
  the diagonals; a 15-30° turn moves it, 90° turns and mirrors do not), `ink_slant` (the x·y correlation
  of the ink mass), `elongation` (taller vs wider), `skew_x`, `skew_y`, `coskew_x`, `coskew_y` (the ink's
  third moments: rotating by 180° flips all four) and `mass_balance_x`, `mass_balance_y` (ink centroid vs
  box centre), and, against the other samples of the set (`image_symmetry`), `quarter_turn_match`,
  `half_turn_match`, `mirror_match`, `flip_match`, `transpose_match`: how much nearer that turn or mirror
  brings a sample to another sample of its set than its six turns and mirrors do on average, which a set
  holding turned copies of its glyphs (a fault on some of the devices) raises. They alone depend on the
  rest of the set (differences of log distances within it, so its size largely cancels). Measured limits of
  the moments: rotating synthetic glyphs by 180° or flipping them moves `centre_y` (their boxes sit off
  centre) about as far as any orientation property, and a mirror of 200 glyphs is below significance (the
  population is nearly symmetric); on real FEMNIST a mirror or flip moves `stroke_slant` by 1.6 spreads
  (handwriting leans right), a 180° turn nothing much.

The primary model's view (`classifier_properties`, from its logits [n, K]): `predicted_class` (class_mix;
compared with `differences.compare_categories`) and `confidence` (max softmax).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from fedgen_debug.analysis import image_symmetry
from fedgen_debug.analysis.differences import Property

FRAME = 3                  # the frame gan_analysis reads the background from (gan_analysis.FRAME)
MIN_INK_DARKNESS = 0.1     # an image with no pixel this much darker than its background has no ink
INK_OF_PEAK = 0.5          # ink: darker than this share of the image's peak darkness
INK_CORE = 0.05           # the ink level: the mean of this darkest share of the ink pixels
EDGE_BAND = (0.2, 0.8)     # the transition band of an edge, in shares of the peak darkness
BACKGROUND_CLEARANCE = 3   # background speckle is read this many pixels (city block) away from ink
MIN_INK_PIECE = 3          # 8-connected ink pieces smaller than this are specks (noise), not strokes
FAINT_OF_PEAK = 0.25       # faint ink (the artefact family): darker than this share of the peak darkness
LINE_BAND = 2              # a straight line may wander across this many rows (columns)
LINE_PERCENTILE = 25       # a line across: this share of its pixels at least this dark (gaps allowed)
BORDER_WITHIN = 0.25       # a border's pixels: this close to the frame's level (gan_analysis.FLAT_FRAME_WITHIN)
BORDER_INTERIOR = 0.25     # what a border encloses covers at least this share of the image
BORDER_FAR = 0.5           # ... at a level this far from the border's
MOSTLY_LIGHT = 0.6         # a dark frame round this share of light pixels or more is a broken border
_SIZE = 28

IMAGE_PROPERTIES = (
    Property("light_ink", "polarity", "less often light ink on dark", "more often light ink on dark",
             "share of images whose ink is lighter than their background (inverted)"),
    Property("mid_level", "brightness", "darker", "lighter",
             "mean of background and ink level, after undoing inversion"),
    Property("michelson_contrast", "contrast", "lower contrast", "higher contrast",
             "(background − ink) / (background + ink), after undoing inversion"),
    Property("edge_width", "sharpness", "sharper", "blurrier",
             "pixels in the 20-80% darkness transition near the ink, per ink-boundary pixel"),
    Property("edge_steepness", "sharpness", "blurrier", "sharper",
             "90th percentile of the gradient on the ink's edge over the peak darkness"),
    Property("centre_x", "position", "further left", "further right",
             "ink bounding-box centre, pixels right of the image centre"),
    Property("centre_y", "position", "higher up", "lower down",
             "ink bounding-box centre, pixels below the image centre"),
    Property("extent", "scale", "smaller", "larger", "radius of gyration of the ink, pixels"),
    Property("ink_area", "scale", "less ink", "more ink", "share of the image's pixels that are ink"),
    Property("stroke_width", "stroke", "thinner strokes", "thicker strokes",
             "2 × the mean city-block depth of ink pixels, pixels"),
    Property("blockiness", "resolution", "finer", "blockier",
             "how much weaker neighbour differences are inside 2×2 blocks than across their borders"),
    Property("background_speckle", "noise", "cleaner background", "noisier background",
             "mean neighbour difference on the background, 3+ pixels from ink"),
    Property("line_darkness", "artefact", "fainter lines across the image",
             "darker lines across the image (a ruled line, a frame)",
             "darkest row or column (a band of 2) across the whole image: its 25th percentile of darkness over "
             "the peak, less the median line's"),
    Property("detached_ink", "artefact", "less ink apart from the glyph",
             "more ink apart from the glyph (a mark, a stamp)",
             "share of the faint ink outside its largest 8-connected piece"),
    Property("vertical_strokes", "orientation", "more horizontal strokes", "more vertical strokes",
             "(x-gradient − y-gradient energy) / both: +1 all vertical edges"),
    Property("stroke_slant", "orientation", "strokes lean more like \\", "strokes lean more like /",
             "correlation of the x and y gradients (structure tensor)"),
    Property("ink_slant", "orientation", "ink leans more like \\", "ink leans more like /",
             "correlation of the ink's x and (upward) y positions"),
    Property("axis_alignment", "orientation", "strokes less along the axes", "strokes more along the axes",
             "4th harmonic of the gradient angle: +1 edges along x and y, −1 along diagonals"),
    Property("axis_twist", "orientation", "turned anticlockwise", "turned clockwise",
             "sine 4th harmonic of the gradient angle (a turn under 22.5° moves it; sign measured)"),
    Property("coskew_x", "orientation", "wide parts further left", "wide parts further right",
             "co-skewness E[x·y²] of the ink (mirroring flips it)"),
    Property("coskew_y", "orientation", "wide parts higher up", "wide parts lower down",
             "co-skewness E[y·x²] of the ink (turning upside down flips it)"),
    Property("elongation", "orientation", "wider", "taller",
             "(y variance − x variance) / both, of the ink"),
    Property("skew_x", "orientation", "heavier on the right", "heavier on the left",
             "skewness of the ink along x (positive: a tail to the right)"),
    Property("skew_y", "orientation", "heavier at the bottom", "heavier at the top",
             "skewness of the ink along y (positive: a tail downwards)"),
    Property("mass_balance_x", "orientation", "ink mass further left in its box", "ink mass further right in its box",
             "ink centroid minus box centre, over the box's half width"),
    Property("mass_balance_y", "orientation", "ink mass higher in its box", "ink mass lower in its box",
             "ink centroid minus box centre, over the box's half height"),
    # `image_symmetry`: a sample against the other samples of its own set.
    Property("quarter_turn_match", "orientation", "fewer quarter-turned copies", "more quarter-turned copies",
             "mean log distance to the nearest other sample over six turns, minus it after a 90° turn either way"),
    Property("half_turn_match", "orientation", "fewer upside-down (180°) copies", "more upside-down (180°) copies",
             "mean log distance to the nearest other sample over six turns, minus it after a 180° turn"),
    Property("mirror_match", "orientation", "fewer mirrored copies", "more mirrored copies",
             "mean log distance to the nearest other sample over six turns, minus it mirrored left-right"),
    Property("flip_match", "orientation", "fewer flipped copies", "more flipped (top-bottom) copies",
             "mean log distance to the nearest other sample over six turns, minus it flipped top-bottom"),
    Property("transpose_match", "orientation", "fewer transposed copies", "more transposed copies",
             "mean log distance to the nearest other sample over six turns, minus it transposed"),
)

CLASSIFIER_PROPERTIES = (
    Property("predicted_class", "class_mix", "fewer", "more", "the primary model's most probable class"),
    Property("confidence", "confidence", "less confident", "more confident",
             "the primary model's largest class probability"),
)


def as_unit_images(images) -> np.ndarray:
    """[n, 28, 28] (or [n, 28, 28, 1]) in [0, 1] → float64 [n, 28, 28]; anything else raises."""
    images = np.asarray(images, np.float64)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim != 3 or images.shape[1:] != (_SIZE, _SIZE) or len(images) == 0:
        raise ValueError(f"images must be [n, 28, 28] with n >= 1. Found shape {list(images.shape)}.")
    if not np.all(np.isfinite(images)):
        raise ValueError("images must be finite. Found nan or inf.")
    if images.min() < -1e-6 or images.max() > 1 + 1e-6:
        raise ValueError(f"images must be in [0, 1] (models.gan.to_unit). Found [{images.min()}, {images.max()}].")
    return np.clip(images, 0.0, 1.0)


def background_levels(images: np.ndarray) -> np.ndarray:
    """Per image [n, 28, 28] in [0, 1]: the level of the paper the character is drawn on. That is the median
    of the outer `FRAME`-pixel frame (characters are centred with a margin), unless the frame is a border
    around the paper (`_inside_a_border`: then the median of what it encloses) or a dark frame, broken, round
    an image mostly light (then the light pixels' median)."""
    frame = np.ones((_SIZE, _SIZE), bool)
    frame[FRAME:-FRAME, FRAME:-FRAME] = False
    levels = np.median(images[:, frame], axis=1)
    far = np.mean(np.abs(images - levels[:, None, None]) > BORDER_WITHIN, axis=(1, 2))
    for i in np.flatnonzero(far >= BORDER_INTERIOR / 2):   # the enclosed paper is at least half of it
        levels[i] = _inside_a_border(images[i], levels[i])
    # A dark frame round an image mostly light is a broken border (a GAN draws a padded set's black band in
    # pieces), not dark paper: ink covers far less than `MOSTLY_LIGHT` of any image (at most 45% of a synthetic
    # glyph with its holes, 22% of a FEMNIST one). The paper is then the light pixels' median.
    light = images >= 0.5
    broken = (levels < 0.5) & (light.mean(axis=(1, 2)) >= MOSTLY_LIGHT)
    for i in np.flatnonzero(broken):
        levels[i] = float(np.median(images[i][light[i]]))
    return levels


def _inside_a_border(image: np.ndarray, frame_level: float) -> float:
    """The paper's level of one image whose frame reads `frame_level`: the median of the region a border
    encloses when there is a border, else `frame_level`.

    A border is what zero padding around a shrunk image or a painted frame leaves: the whole outer edge at
    the frame's level (within `BORDER_WITHIN`), and, connected to it, a band of that level equally deep all
    along each side (within a pixel, at 90% of the rows or columns that cross it) around a rectangle
    (90% filled) of at least `BORDER_INTERIOR` of the image whose median lies more than `BORDER_FAR` from the
    frame's. Read from the frame alone, a black border around white paper would make every such image
    "light ink on a dark background": an inversion. No character is such a band: on the real FEMNIST
    writers (18,796 images), 100 synthetic writers (19,805) and the demo's GAN samples no image has one,
    and 1 in 3,000 synthetic images under the catalog's blur or dilate (docs/analysis.md)."""
    near = np.abs(image - frame_level) <= BORDER_WITHIN
    edge = np.zeros_like(near)
    edge[0], edge[-1], edge[:, 0], edge[:, -1] = True, True, True, True
    if not near[edge].all():
        return frame_level
    labels, _ = ndimage.label(near)
    inside = ~np.isin(labels, np.unique(labels[edge]))
    rows, cols = np.flatnonzero(inside.any(axis=1)), np.flatnonzero(inside.any(axis=0))
    if inside.mean() < BORDER_INTERIOR or inside[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].mean() < 0.9:
        return frame_level
    paper = float(np.median(image[inside]))
    if abs(paper - frame_level) <= BORDER_FAR:
        return frame_level
    border = ~inside
    for side in (border, border[::-1], border.T, border.T[::-1]):   # each side, seen from its edge
        crossing = ~side.all(axis=0)   # rows or columns that reach the paper (not the band along a side)
        depth = np.argmin(side[:, crossing], axis=0)
        if np.mean(np.abs(depth - np.median(depth)) <= 1) < 0.9:
            return frame_level
    return paper


def _erode(mask: np.ndarray) -> np.ndarray:
    """4-neighbour binary erosion of [n, H, W] masks (outside the image counts as background)."""
    padded = np.pad(mask, ((0, 0), (1, 1), (1, 1)), constant_values=False)
    return (mask & padded[:, :-2, 1:-1] & padded[:, 2:, 1:-1] & padded[:, 1:-1, :-2] & padded[:, 1:-1, 2:])


def _dilate(mask: np.ndarray) -> np.ndarray:
    return ~_erode(~mask)


def _gradients(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sobel x and y gradients of [n, H, W] (edge pixels replicated)."""
    p = np.pad(image, ((0, 0), (1, 1), (1, 1)), mode="edge")
    gx = (p[:, :-2, 2:] + 2 * p[:, 1:-1, 2:] + p[:, 2:, 2:] - p[:, :-2, :-2] - 2 * p[:, 1:-1, :-2] - p[:, 2:, :-2]) / 8
    gy = (p[:, 2:, :-2] + 2 * p[:, 2:, 1:-1] + p[:, 2:, 2:] - p[:, :-2, :-2] - 2 * p[:, :-2, 1:-1] - p[:, :-2, 2:]) / 8
    return gx, gy


def _ratio(numerator, denominator) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (a constant image has no contrast to share)."""
    numerator, denominator = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator > 1e-12)
    return out


def _pieces(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8-connected pieces of [n, H, W] masks, within each image, never across images: (labels [n, H, W],
    each label's pixel count, label 0 the background's)."""
    in_plane = np.zeros((3, 3, 3), bool)
    in_plane[1] = True
    labels, count = ndimage.label(mask, structure=in_plane)
    return labels, np.bincount(labels.ravel(), minlength=count + 1)


def _without_specks(ink: np.ndarray) -> np.ndarray:
    """[n, H, W] ink masks less their 8-connected pieces of under `MIN_INK_PIECE` pixels; an image whose
    ink is all specks keeps it (it is then measured as it is, not called blank)."""
    labels, sizes = _pieces(ink)
    sizes[0] = 0
    kept = sizes[labels] >= MIN_INK_PIECE
    return np.where(kept.any(axis=(1, 2))[:, None, None], kept, ink)


def _line_darkness(relative: np.ndarray) -> np.ndarray:
    """Over rows and columns, each a band of `LINE_BAND` merged by their darker pixel, the
    `LINE_PERCENTILE`th percentile of `relative` along it; the largest, less the median line's (noise on
    every pixel darkens every line alike, a mark one): [n, H, W] → [n]."""
    def excess(image):    # [n, rows, cols]: each band of rows merged by its darker pixel
        banded = np.maximum.reduce([image[:, k:image.shape[1] - LINE_BAND + 1 + k] for k in range(LINE_BAND)])
        along = np.percentile(banded, LINE_PERCENTILE, axis=2)
        return along.max(axis=1) - np.median(along, axis=1)
    return np.maximum(excess(relative), excess(np.transpose(relative, (0, 2, 1))))


def _detached_share(faint: np.ndarray) -> np.ndarray:
    """The share of each image's `faint` pixels outside its largest 8-connected piece (0 without any)."""
    labels, sizes = _pieces(faint)
    image_of = np.zeros(len(sizes), np.int64)
    image_of[labels.ravel()] = np.repeat(np.arange(len(faint)), faint[0].size)
    largest = np.zeros(len(faint))
    np.maximum.at(largest, image_of[1:], sizes[1:])
    total = faint.sum(axis=(1, 2))
    return _ratio(total - largest, total)


def _within(mask: np.ndarray, pixels: int) -> np.ndarray:
    """The pixels at most `pixels` (city block) from `mask`."""
    for _ in range(pixels):
        mask = _dilate(mask)
    return mask


def _blockiness(image: np.ndarray) -> np.ndarray:
    """(across − inside) / (across + inside) of 2-pixel-block neighbour differences, best phase."""
    dx = np.abs(np.diff(image, axis=2))  # dx[..., j]: columns j, j+1
    dy = np.abs(np.diff(image, axis=1))
    best = np.full(len(image), -1.0)
    for phase in (0, 1):
        inside = dx[:, :, phase::2].sum(axis=(1, 2)) + dy[:, phase::2, :].sum(axis=(1, 2))
        across = dx[:, :, 1 - phase::2].sum(axis=(1, 2)) + dy[:, 1 - phase::2, :].sum(axis=(1, 2))
        best = np.maximum(best, _ratio(across - inside, across + inside))
    return best


def image_properties(images) -> dict[str, np.ndarray]:
    """Every property of `IMAGE_PROPERTIES` for each image: {name: float64 [n]} (nan: not measured)."""
    images = as_unit_images(images)
    n = len(images)
    light_ink, upright, background, darkness = _polarity_normalized(images)
    peak = darkness.max(axis=(1, 2))
    has_ink = peak >= MIN_INK_DARKNESS
    relative = _ratio(darkness, peak[:, None, None])
    ink = _without_specks(relative > INK_OF_PEAK)
    ink_pixels = ink.sum(axis=(1, 2))
    # The ink level is read from the core of the strokes (the darkest `INK_CORE` of the ink pixels): any
    # resampling (a rotation, a resize) softens stroke edges, which is sharpness, not contrast.
    ranked = -np.sort(-np.where(ink, darkness, 0.0).reshape(n, -1), axis=1)   # a speck is not the ink's level
    core = np.maximum((ink_pixels * INK_CORE).astype(np.int64), 1)
    ink_level = background - np.take_along_axis(np.cumsum(ranked, axis=1), core[:, None] - 1, axis=1)[:, 0] / core
    out = {"light_ink": light_ink.astype(np.float64),
           "mid_level": (background + np.where(has_ink, ink_level, background)) / 2.0}
    out["michelson_contrast"] = np.where(has_ink, _ratio(background - ink_level, background + ink_level), 0.0)

    near_ink = _within(ink, BACKGROUND_CLEARANCE)
    transition = (relative > EDGE_BAND[0]) & (relative < EDGE_BAND[1]) & near_ink
    boundary = ink & ~_erode(ink)
    out["edge_width"] = _ratio(transition.sum(axis=(1, 2)), boundary.sum(axis=(1, 2)))
    gx, gy = _gradients(darkness)
    magnitude = np.hypot(gx, gy)
    edge = ink ^ _erode(ink) | (_dilate(ink) & ~ink)
    edge_gradients = np.where(edge, magnitude, np.nan).reshape(n, -1)
    with np.errstate(all="ignore"):
        steep = np.nanpercentile(np.where(has_ink[:, None], edge_gradients, 0.0), 90, axis=1)
    out["edge_steepness"] = _ratio(steep, peak)

    rows = np.arange(_SIZE, dtype=np.float64)
    any_rows, any_cols = ink.any(axis=2), ink.any(axis=1)
    top = np.argmax(any_rows, axis=1)
    bottom = _SIZE - 1 - np.argmax(any_rows[:, ::-1], axis=1)
    left = np.argmax(any_cols, axis=1)
    right = _SIZE - 1 - np.argmax(any_cols[:, ::-1], axis=1)
    centre = (_SIZE - 1) / 2.0
    box_x, box_y = (left + right) / 2.0, (top + bottom) / 2.0
    out["centre_x"], out["centre_y"] = box_x - centre, box_y - centre

    weight = darkness * ink
    mass = weight.sum(axis=(1, 2))
    wy = _ratio(weight.sum(axis=2), mass[:, None])  # [n, rows]: the ink's distribution over y
    wx = _ratio(weight.sum(axis=1), mass[:, None])
    mean_y, mean_x = wy @ rows, wx @ rows
    dy, dx = rows[None, :] - mean_y[:, None], rows[None, :] - mean_x[:, None]
    var_y, var_x = (wy * dy ** 2).sum(axis=1), (wx * dx ** 2).sum(axis=1)
    ys, xs = np.meshgrid(rows, rows, indexing="ij")
    cov_xy = _ratio((weight * (xs[None] - mean_x[:, None, None]) * (ys[None] - mean_y[:, None, None])).sum(axis=(1, 2)),
                    mass)
    out["extent"] = np.sqrt(var_x + var_y)
    out["ink_area"] = ink_pixels / float(_SIZE * _SIZE)

    depth = np.zeros(n)
    layer = ink
    for _ in range(_SIZE // 2):
        depth += layer.sum(axis=(1, 2))
        layer = _erode(layer)
        if not layer.any():
            break
    out["stroke_width"] = 2.0 * _ratio(depth, ink_pixels)
    out["blockiness"] = _blockiness(upright)

    clear = ~near_ink
    pairs_x = clear[:, :, 1:] & clear[:, :, :-1]
    pairs_y = clear[:, 1:, :] & clear[:, :-1, :]
    speckle_sum = (np.abs(np.diff(upright, axis=2)) * pairs_x).sum(axis=(1, 2)) + \
        (np.abs(np.diff(upright, axis=1)) * pairs_y).sum(axis=(1, 2))
    out["background_speckle"] = _ratio(speckle_sum, pairs_x.sum(axis=(1, 2)) + pairs_y.sum(axis=(1, 2)))

    out["line_darkness"] = _line_darkness(relative)
    out["detached_ink"] = _detached_share(_without_specks(relative > FAINT_OF_PEAK))

    energy_x, energy_y = (gx ** 2).sum(axis=(1, 2)), (gy ** 2).sum(axis=(1, 2))
    out["vertical_strokes"] = _ratio(energy_x - energy_y, energy_x + energy_y)
    # y grows downwards in the array; slants are measured with y upwards, so "/" is positive.
    out["stroke_slant"] = _ratio(2.0 * (gx * gy).sum(axis=(1, 2)), energy_x + energy_y)
    # The gradient angle's 4th harmonic: +1 for edges along the axes (type and handwriting are mostly
    # vertical and horizontal strokes), −1 along the diagonals; a rotation by θ turns it by 4θ, so 15-30°
    # rotations move it far, while 90° rotations, mirrors and flips keep it.
    squared = gx ** 2 + gy ** 2
    cos2, sin2 = _ratio(gx ** 2 - gy ** 2, squared), _ratio(2.0 * gx * gy, squared)
    out["axis_alignment"] = _ratio((squared * (cos2 ** 2 - sin2 ** 2)).sum(axis=(1, 2)), energy_x + energy_y)
    out["axis_twist"] = _ratio((squared * 2.0 * cos2 * sin2).sum(axis=(1, 2)), energy_x + energy_y)
    from_x, from_y = xs[None] - mean_x[:, None, None], ys[None] - mean_y[:, None, None]
    out["coskew_x"] = _ratio((weight * from_x * from_y ** 2).sum(axis=(1, 2)), mass * np.sqrt(var_x) * var_y)
    out["coskew_y"] = _ratio((weight * from_y * from_x ** 2).sum(axis=(1, 2)), mass * np.sqrt(var_y) * var_x)
    out["ink_slant"] = _ratio(-cov_xy, np.sqrt(var_x * var_y))
    out["elongation"] = _ratio(var_y - var_x, var_y + var_x)
    out["skew_x"] = _ratio((wx * dx ** 3).sum(axis=1), var_x ** 1.5)
    out["skew_y"] = _ratio((wy * dy ** 3).sum(axis=1), var_y ** 1.5)
    out["mass_balance_x"] = _ratio(mean_x - box_x, (right - left + 1) / 2.0)
    out["mass_balance_y"] = _ratio(mean_y - box_y, (bottom - top + 1) / 2.0)
    out.update(image_symmetry.symmetry_matches(relative, has_ink))

    geometric = [p.name for p in IMAGE_PROPERTIES if p.family not in ("polarity", "brightness", "contrast", "noise")]
    for name in geometric:
        out[name] = np.where(has_ink, out[name], np.nan)
    return {p.name: np.asarray(out[p.name], np.float64) for p in IMAGE_PROPERTIES}


def _polarity_normalized(images: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(light_ink [n] bool, the upright images (light ink flipped to dark), their backgrounds [n], their
    darkness: background − pixel, ≥ 0) of unit images [n, 28, 28]."""
    background = background_levels(images)
    offset = images - background[:, None, None]
    light_ink = offset.max(axis=(1, 2)) > (-offset).max(axis=(1, 2))
    upright = np.where(light_ink[:, None, None], 1.0 - images, images)
    background = np.where(light_ink, 1.0 - background, background)
    return light_ink, upright, background, np.clip(background[:, None, None] - upright, 0.0, None)


def ink_masses(images) -> np.ndarray:
    """Each image's total darkness on and near its ink: its faint ink (darker than `FAINT_OF_PEAK` of the peak,
    less specks) and the pixels within `BACKGROUND_CLEARANCE` of it, where a blur spreads the ink (the
    background beyond is the noise family's; the half-peak ink mask would lose thin strokes a blur lightens
    below half the peak). Not a property (it is a glyph's size as much as its ink): `ink_spread` reads it to
    tell ink that faded from ink that spread. A blank image's is 0."""
    images = as_unit_images(images)
    _, _, _, darkness = _polarity_normalized(images)
    peak = darkness.max(axis=(1, 2))
    faint = _without_specks(_ratio(darkness, peak[:, None, None]) > FAINT_OF_PEAK)
    faint &= (peak >= MIN_INK_DARKNESS)[:, None, None]
    return (darkness * _within(faint, BACKGROUND_CLEARANCE)).sum(axis=(1, 2))


def paper_levels(values: dict) -> np.ndarray:
    """Each image's paper (background) level, read back from its `mid_level` and `michelson_contrast`:
    (b + i)/2 · (1 + (b − i)/(b + i)) = b, and a blank image's mid_level is its background."""
    return np.asarray(values["mid_level"], np.float64) * (1.0 + np.asarray(values["michelson_contrast"], np.float64))


def level_family(values_a: dict, values_b: dict) -> str:
    """The family of `mid_level`'s difference between two sets: "brightness" when the paper moved with it (by
    at least half as much, the same way: the whole image lighter or darker), else "contrast": the ink's level
    moved against a paper that stayed. On white paper a faded or washed-out ink, a lightening clipped at white
    and strokes too thin or blurred to reach full ink all lighten the ink alone; the mean of paper and ink
    then moves as far as the contrast does, and often by more training noises (docs/analysis.md)."""
    def mean(values, of):
        return float(np.nanmean(of(values)))

    moved = mean(values_b, lambda v: v["mid_level"]) - mean(values_a, lambda v: v["mid_level"])
    paper = mean(values_b, paper_levels) - mean(values_a, paper_levels)
    return "brightness" if paper * moved > 0 and abs(paper) >= abs(moved) / 2 else "contrast"


def ink_levels(values: dict) -> np.ndarray:
    """Each image's ink darkness at the core of its strokes (paper − ink level), read back like
    `paper_levels`: the ink level is 2 · mid_level − paper. A blank image's is 0."""
    return 2.0 * (paper_levels(values) - np.asarray(values["mid_level"], np.float64))


# What `ink_spread` reads for each property it may refile: the ink level for the contrast rows, the strokes'
# width for the stroke row (over the images with ink: a blank image has none).
_SPREAD_MEASURES = {"michelson_contrast": "ink_level", "mid_level": "ink_level", "stroke_width": "stroke_width"}


def ink_spread(values_a: dict, values_b: dict, name: str) -> bool:
    """Whether `name`'s difference between two sets is the same ink spread or gathered, and so sharpness: True
    when its measure (the ink's level at the strokes' cores for `michelson_contrast` and `mid_level`, the
    strokes' width for `stroke_width`) moved and the ink's total darkness near the strokes (`ink_masses`, the
    values' "ink_mass") stayed: it moved less than half as far, relatively, either way.
    - Ink that faded (or darkened) everywhere loses its total with its level: contrast, not spread.
    - Strokes made thicker (or thinner) gain (or lose) ink with their width: stroke, not spread.
    - A blur, a resize or a motion blur spreads the same ink over more pixels: thin strokes no longer reach
      full ink and look wider at half their peak, while the total stays. A threshold gathers it.
    A total that moved the other way, or as far, keeps the row's own family: GANs differ in how much ink they
    draw (two clean demo GANs by 21%), and a GAN of faded ink drew more of it, softer (level −6%, total +15%;
    docs/analysis.md, 2026-12-07). False for any other property, or without "ink_mass" on both sides."""
    if name not in _SPREAD_MEASURES or "ink_mass" not in values_a or "ink_mass" not in values_b:
        return False
    if _SPREAD_MEASURES[name] == "ink_level":
        moved = relative_change(values_a, values_b, ink_levels)
        mass = relative_change(values_a, values_b, lambda v: v["ink_mass"])
    else:   # over the images with ink (a blank's width is nan, its mass 0)
        moved = relative_change(values_a, values_b, lambda v: v["stroke_width"])
        mass = relative_change(values_a, values_b,
                               lambda v: np.where(np.isfinite(v["stroke_width"]), v["ink_mass"], np.nan))
    return moved != 0.0 and abs(mass) < abs(moved) / 2


def relative_change(values_a: dict, values_b: dict, of) -> float:
    """B's mean of `of(values)` against A's, less 1, over the finite values; 0 when a side has nothing to average
    (every image blank) or A's mean is not positive (nothing to move from)."""
    before, after = (np.asarray(of(v), np.float64) for v in (values_a, values_b))
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if not len(before) or not len(after) or before.mean() <= 0:
        return 0.0
    return float(after.mean() / before.mean() - 1.0)


def classifier_properties(logits) -> dict[str, np.ndarray]:
    """The primary model's view of each image from its logits [n, K]: {"predicted_class": int64 [n] (for
    `differences.compare_categories`), "confidence": float64 [n], the largest softmax probability}."""
    logits = np.asarray(logits, np.float64)
    if logits.ndim != 2 or logits.shape[1] < 2 or len(logits) == 0:
        raise ValueError(f"logits must be [n, K] with n >= 1 and K >= 2. Found shape {list(logits.shape)}.")
    if not np.all(np.isfinite(logits)):
        raise ValueError("logits must be finite. Found nan or inf.")
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    return {"predicted_class": np.argmax(logits, axis=1).astype(np.int64),
            "confidence": probabilities.max(axis=1)}
