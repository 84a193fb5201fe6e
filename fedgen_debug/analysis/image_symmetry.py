"""Which turn or mirror of a generated image brings it nearest the *other* images of its set (issue 55, family
orientation).

A GAN trained on devices of which some turn or mirror their images draws both kinds of glyph. Moments of the
ink (`image_properties`: elongation, skews, slants) see such a mixture only as a shifted mean, half way at
a 50% fault and within the training noise. Within the set the mixture shows directly: an upright glyph has
turned siblings among the other samples, so *that* turn brings it nearer its nearest other sample than the
other turns do. Per image x and transform T of the six (turns by 90°, 270° and 180°, mirror, flip, transpose):

    mean over the six T' of log d(T'(x))  −  log d(T(x))

with d(·) the Euclidean distance to the nearest *other* image of the set (never x itself), on the image's
ink (polarity undone, darkness over its peak, so brightness and contrast do not move it) moved so that its
centre of ink mass sits at the image centre (so a shifted glyph is not a turned one). Larger: the set holds
more T-turned copies of its glyphs. Against the mean of the six, not against x itself: how far a sample
lies from its neighbours at all (blurrier or more varied samples, a GAN's run-to-run spread) moves every
transform alike, by 0.02-0.11 between clean trainings, and cancels here (0.001-0.04 left). The set's size
cancels in the differences; distances are taken to at most `MAX_REFERENCE` images of the set (its first).

Measured (2026-12-05; `docs/analysis.md`): on real FEMNIST images, 1,000 against 1,000 of other writers,
half of the second set faulty (sampling z): rotate 90° moves the quarter turn by z 26, mirror the mirror
by 15, flip the flip by 14, transpose the transpose by 19 (and the quarter turn by 11); a shift moves
nothing (centred); noise moves the quarter turn by 7.6, JPEG and erosion the half turn by −7. On a T1 GAN
of synthetic writers with half the devices rotating, the quarter turn moved by 0.070-0.088 (rot90, three
seeds) against 0.003-0.020 between three clean trainings; the moments found those pairs too (elongation).
On real FEMNIST at the demo preset the GAN draws ink blobs whose turns no one can tell: nothing moved;
with `--cycle-client-data --gen-ema 0.9 --gen-upsample bilinear` it draws letters, and a 50% rotation
moved the quarter turn by 0.069-0.071 against 0.002 between two clean runs.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug.stats import nearest_neighbour_distances

MAX_REFERENCE = 1000       # an image's neighbours are looked for among at most this many images of its set
# Distances below this count as this (darkness units; GAN samples' nearest others lie 1.5-5.6 apart): an exact
# duplicate would otherwise give a log without bound, and one outlier would outweigh a thousand samples.
DISTANCE_FLOOR = 0.1
_SIZE = 28

TURNS = {
    "rot90": lambda x: np.rot90(x, 1, axes=(1, 2)), "rot270": lambda x: np.rot90(x, 3, axes=(1, 2)),
    "rot180": lambda x: np.rot90(x, 2, axes=(1, 2)), "mirror": lambda x: x[:, :, ::-1],
    "flip": lambda x: x[:, ::-1, :], "transpose": lambda x: np.transpose(x, (0, 2, 1)),
}
# property → the turns it averages (a quarter turn either way: a set holding glyphs turned one way also
# holds, seen from those, glyphs turned the other way).
TRANSFORMS = {"quarter_turn_match": ("rot90", "rot270"), "half_turn_match": ("rot180",),
              "mirror_match": ("mirror",), "flip_match": ("flip",), "transpose_match": ("transpose",)}


def centred(relative: np.ndarray) -> np.ndarray:
    """Each image [n, 28, 28] rolled by whole pixels so that its centre of mass sits at the image centre."""
    n = len(relative)
    rows = np.arange(_SIZE, dtype=np.float64)
    mass = relative.sum(axis=(1, 2))
    safe = np.where(mass > 0, mass, 1.0)
    centre = (_SIZE - 1) / 2.0
    shift_y = np.rint(centre - np.where(mass > 0, (relative.sum(axis=2) @ rows) / safe, centre)).astype(np.int64)
    shift_x = np.rint(centre - np.where(mass > 0, (relative.sum(axis=1) @ rows) / safe, centre)).astype(np.int64)
    ys = (np.arange(_SIZE)[None, :] - shift_y[:, None]) % _SIZE      # out[i, y] = in[i, y − shift]
    xs = (np.arange(_SIZE)[None, :] - shift_x[:, None]) % _SIZE
    return relative[np.arange(n)[:, None, None], ys[:, :, None], xs[:, None, :]]


def _nearest_other(queries: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The distance of each query i to its nearest reference image j ≠ i, at least `DISTANCE_FLOOR`."""
    return np.maximum(nearest_neighbour_distances(queries, reference), DISTANCE_FLOOR)


def symmetry_matches(relative: np.ndarray, has_ink: np.ndarray) -> dict[str, np.ndarray]:
    """{name in `TRANSFORMS`: float64 [n]} for ink images [n, 28, 28] (darkness over peak, polarity undone);
    nan for images without ink, which are no one's neighbours either."""
    n = len(relative)
    out = {name: np.full(n, np.nan) for name in TRANSFORMS}
    inked = np.flatnonzero(has_ink)
    if len(inked) < 2:
        return out
    images = centred(np.asarray(relative[inked], np.float64))
    reference = images[:MAX_REFERENCE].reshape(min(len(inked), MAX_REFERENCE), -1)
    log_distance = {turn: np.log(_nearest_other(transform(images).reshape(len(inked), -1), reference))
                    for turn, transform in TURNS.items()}
    level = np.mean(list(log_distance.values()), axis=0)
    for name, turns in TRANSFORMS.items():
        out[name][inked] = np.mean([level - log_distance[turn] for turn in turns], axis=0)
    return out
