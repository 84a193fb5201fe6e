"""Seeded, FEMNIST-like synthetic handwriting: 28x28 images of 62 classes, grouped by writer.

Glyphs are rendered from the DejaVu fonts that matplotlib ships. Each writer has a persistent style
(font, slant, stroke width, size, aspect, rotation, wobble, ink, noise) and writes 50-400 characters
(log-normal, median ~190, like FEMNIST's 3,400 writers with ~198 each); every character gets its own
small jitter and a smooth elastic displacement. Class frequencies follow FEMNIST's shape: digits are
half of all characters, upper and lower case a quarter each. Output follows the canonical image
format (float32, 1.0 = white background).

Writer w's data depends only on (seed, w): a dataset of 10 writers is a prefix of one of 3,400.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import string

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage
from fedgen_debug.progress import progress

from fedgen_debug import disk_cache
from fedgen_debug.data import client_data as cd
from fedgen_debug.kept import KeptArrays

CLASS_CHARS = string.digits + string.ascii_uppercase + string.ascii_lowercase  # TFF EMNIST label order
assert len(CLASS_CHARS) == cd.NUM_IMAGE_CLASSES
FONTS = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSerif.ttf",
    "DejaVuSerif-Italic.ttf", "DejaVuSansMono.ttf", "DejaVuSerif-Bold.ttf",
)
_CANVAS = 56  # rendered at 2x, averaged down to 28x28
_CLASS_PROBS = np.concatenate([np.full(10, 0.5 / 10), np.full(26, 0.25 / 26), np.full(26, 0.25 / 26)])


@dataclasses.dataclass(frozen=True)
class SyntheticImagesConfig:
    writers: int = 3400
    seed: int = 0
    min_examples: int = 50
    max_examples: int = 400
    median_examples: float = 190.0

    def __post_init__(self):
        if self.writers < 1:
            raise ValueError(f"writers must be >= 1. Found {self.writers}.")
        if not 1 <= self.min_examples <= self.max_examples:
            raise ValueError(
                f"need 1 <= min_examples <= max_examples. Found {self.min_examples}, {self.max_examples}."
            )


@functools.lru_cache(maxsize=1)
def glyph_bank() -> np.ndarray:
    """Ink coverage [font, class, 56, 56] in [0, 1], each glyph centred on the canvas."""
    font_dir = os.path.join(matplotlib.get_data_path(), "fonts", "ttf")
    bank = np.zeros((len(FONTS), len(CLASS_CHARS), _CANVAS, _CANVAS), np.float32)
    for f, name in enumerate(FONTS):
        font = ImageFont.truetype(os.path.join(font_dir, name), size=40)
        for c, char in enumerate(CLASS_CHARS):
            image = Image.new("L", (_CANVAS * 2, _CANVAS * 2), 0)
            ImageDraw.Draw(image).text((_CANVAS // 2, _CANVAS // 2), char, fill=255, font=font)
            ink = np.asarray(image, np.float32) / 255.0
            rows, cols = np.nonzero(ink > 0.05)
            cy, cx = (rows.min() + rows.max()) / 2, (cols.min() + cols.max()) / 2
            shifted = ndimage.shift(ink, (_CANVAS - cy, _CANVAS - cx), order=1)
            half = _CANVAS // 2
            bank[f, c] = shifted[_CANVAS - half:_CANVAS + half, _CANVAS - half:_CANVAS + half]
    return bank


@dataclasses.dataclass(frozen=True)
class WriterStyle:
    font: int
    slant: float
    stroke: int
    scale: float
    aspect: float
    rotation: float
    wobble: float
    ink: float
    noise: float


def _writer_style(rng: np.random.Generator) -> WriterStyle:
    return WriterStyle(
        font=int(rng.integers(len(FONTS))),
        slant=float(rng.normal(0.0, 0.22)),
        stroke=int(rng.choice([0, 0, 0, 1, 1, 2])),
        scale=float(rng.uniform(0.8, 1.1)),
        aspect=float(rng.uniform(0.85, 1.15)),
        rotation=float(rng.normal(0.0, 0.06)),
        wobble=float(rng.uniform(0.5, 2.5)),
        ink=float(rng.uniform(0.75, 1.0)),
        noise=float(rng.uniform(0.0, 0.04)),
    )


def _stroked(glyph: np.ndarray, stroke: int) -> np.ndarray:
    if stroke > 0:
        return ndimage.grey_dilation(glyph, size=(stroke + 1, stroke + 1))
    return glyph


_GRID = np.stack(np.meshgrid(np.arange(_CANVAS), np.arange(_CANVAS), indexing="ij")).astype(np.float32)


def _render(glyph: np.ndarray, style: WriterStyle, rng: np.random.Generator) -> np.ndarray:
    """One handwritten character, 28x28 ink coverage in [0, 1]."""
    rot = style.rotation + rng.normal(0.0, 0.04)
    shear = style.slant + rng.normal(0.0, 0.05)
    sy = style.scale * rng.uniform(0.93, 1.07)
    sx = sy * style.aspect
    # Output pixel -> source pixel: inverse of rotate(shear(scale(glyph))) about the centre.
    c, s = np.cos(rot), np.sin(rot)
    forward = np.array([[c, -s], [s, c]]) @ np.array([[1.0, 0.0], [shear, 1.0]]) @ np.diag([sy, sx])
    inverse = np.linalg.inv(forward)
    centre = (_CANVAS - 1) / 2.0
    offset = rng.normal(0.0, 1.5, size=2)
    rel = _GRID.reshape(2, -1) - centre - offset[:, None]
    src = inverse @ rel + centre
    # Smooth elastic wobble: a few random low-frequency waves (cheap stand-in for Gaussian-filtered
    # random fields).
    for axis in range(2):
        k = rng.normal(0.0, 0.12, size=(3, 2))
        phase = rng.uniform(0, 2 * np.pi, size=3)
        src[axis] += style.wobble / 3 * np.sin(k @ rel + phase[:, None]).sum(axis=0)
    warped = ndimage.map_coordinates(glyph, src, order=1, mode="constant").reshape(_CANVAS, _CANVAS)
    small = warped.reshape(28, 2, 28, 2).mean(axis=(1, 3))
    return np.clip(small * style.ink, 0.0, 1.0)


def generate_writer(seed: int, writer: int, config: SyntheticImagesConfig) -> tuple[np.ndarray, np.ndarray]:
    """(pixels float32 [n,28,28] with 1.0 = background, labels int32 [n]) of one writer."""
    rng = np.random.default_rng([seed, writer])
    style = _writer_style(rng)
    n = int(np.clip(np.round(rng.lognormal(np.log(config.median_examples), 0.45)),
                    config.min_examples, config.max_examples))
    labels = rng.choice(cd.NUM_IMAGE_CLASSES, size=n, p=_CLASS_PROBS).astype(np.int32)
    glyphs = glyph_bank()[style.font]
    stroked = {c: _stroked(glyphs[c], style.stroke) for c in np.unique(labels)}
    ink = np.stack([_render(stroked[c], style, rng) for c in labels])
    pixels = 1.0 - ink + rng.normal(0.0, style.noise, size=ink.shape)
    return np.clip(pixels, 0.0, 1.0).astype(np.float32), labels


def writer_id(writer: int) -> str:
    return f"writer_{writer:05d}"


# Rendering takes time (docs/performance.md, "Second profile on the EPYC") and one process often loads the
# same writers again: the demo's GAN stage loads its users once per run (four runs) and the analysis
# again. A rendered writer is kept, read-only, while all kept writers hold at most this many bytes;
# beyond it, writers are rendered on every load as before.
WRITER_CACHE_BYTES = 256 << 20
_writers = KeptArrays(lambda: WRITER_CACHE_BYTES)


def _kept_writer(seed: int, writer: int, config: SyntheticImagesConfig) -> tuple[np.ndarray, np.ndarray]:
    """`generate_writer`'s arrays, read-only, rendered once per process within `WRITER_CACHE_BYTES` and,
    across processes, once per machine (`disk_cache`)."""
    key = (seed, writer, config.min_examples, config.max_examples, config.median_examples)
    return _writers.get(key, lambda: _stored_writer(seed, writer, config))


def generator_version() -> str:
    """What a rendered writer depends on besides its arguments: this module's code, the fonts'
    matplotlib, and the libraries that draw, warp and add."""
    return disk_cache.code_version((__file__,), ("numpy", "scipy", "pillow", "matplotlib"))


def _stored_writer(seed: int, writer: int, config: SyntheticImagesConfig) -> tuple[np.ndarray, np.ndarray]:
    """`generate_writer`'s arrays, rendered once per machine (`disk_cache`)."""
    key = disk_cache.digest("synthetic-images writer", generator_version(), seed, writer, config.min_examples,
                            config.max_examples, config.median_examples)
    arrays = disk_cache.cached_arrays(
        "synthetic", key, lambda: dict(zip(("pixels", "labels"), generate_writer(seed, writer, config))),
        valid=lambda a: set(a) == {"pixels", "labels"} and a["pixels"].dtype == np.float32
        and a["labels"].dtype == np.int32 and a["pixels"].shape == (len(a["labels"]), 28, 28))
    return arrays["pixels"], arrays["labels"]


def generate(config: SyntheticImagesConfig) -> cd.ArrayClientData:
    examples = {}
    for w in progress(range(config.writers), desc="synthesizing handwriting", unit="writer"):
        pixels, labels = _kept_writer(config.seed, w, config)
        examples[writer_id(w)] = cd.image_examples(pixels, labels)
    return cd.ArrayClientData(examples)
