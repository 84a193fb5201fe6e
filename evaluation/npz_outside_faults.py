"""Image faults outside the device catalog, written into a copy of an images `.npz`: data that reaches the
tool already corrupted, as a modeler's would (issue 55: build for the family, not the catalog's cases).

  .venv/bin/python evaluation/npz_outside_faults.py images.npz --fault squash --fraction 0.5 --out squash.npz

Faults, on every image of a `fraction` of the users (drawn with `--seed`), in the file's own convention
(uint8 or float, white or black background: `--background`):
- squash: the glyph resized to 60% of its width about the centre, height kept (a resize that ignores the
  aspect ratio);
- shear: rows shifted in proportion to their height, 0.3 pixel per row, the bottom to the left (a
  skewed scan);
- ruled: a grey line (half the ink's darkness) across row 21 (ruled paper showing through);
- occlude: the right third blanked to the background (a crop box that cuts the glyph);
- pad: the glyph resized into 20×20 and padded with zeros: a black band round white paper;
- frame: a 2-pixel black frame painted round the image; thin_frame: a 1-pixel one;
- stretch: the glyph 1.4 times taller, width kept; shrink: the glyph at 70%, white round it;
- motion_blur: a 5-pixel horizontal box blur; downsample: halved, then bilinear back to 28×28;
- darken: x → 0.7x (the paper grey too); washed: x → 0.25 + 0.6x (grey paper, grey ink);
- posterize: 4 grey levels; rotate180: upside down and mirrored.
"""

from __future__ import annotations

import argparse
import random

import numpy as np
from scipy import ndimage

SIZE = 28
BACKGROUNDS = ("white", "black")


def _squash(image: np.ndarray) -> np.ndarray:
    # output column c reads input column centre + (c − centre) / 0.6: the glyph narrows to 60%
    centre = (SIZE - 1) / 2.0
    return ndimage.affine_transform(image, np.diag([1.0, 1.0 / 0.6]), offset=(0.0, centre - centre / 0.6),
                                    order=1, cval=1.0)


def _shear(image: np.ndarray) -> np.ndarray:
    centre = (SIZE - 1) / 2.0   # output (r, c) reads input (r, c + 0.3 (r − centre)): lower rows move left
    return ndimage.affine_transform(image, np.array([[1.0, 0.0], [0.3, 1.0]]), offset=(0.0, -0.3 * centre),
                                    order=1, cval=1.0)


def _ruled(image: np.ndarray) -> np.ndarray:
    out = image.copy()
    out[21] = np.minimum(out[21], 0.5)
    return out


def _occlude(image: np.ndarray) -> np.ndarray:
    out = image.copy()
    out[:, 2 * SIZE // 3:] = 1.0
    return out


def _shrunk(image: np.ndarray, factor: float, paper: float) -> np.ndarray:
    """The glyph resized by `factor` about the centre, the space it leaves filled with `paper`."""
    centre = (SIZE - 1) / 2.0
    return ndimage.affine_transform(image, np.diag([1.0 / factor] * 2), offset=centre - centre / factor, order=1,
                                    cval=paper)


def _pad(image: np.ndarray) -> np.ndarray:
    out = _shrunk(image, 20 / SIZE, 0.0)   # a resize into 20×20 whose padding is zeros: black round white paper
    out[4:-4, 4:-4] = _shrunk(image, 20 / SIZE, 1.0)[4:-4, 4:-4]
    return out


def _frame(image: np.ndarray, width: int = 2) -> np.ndarray:
    out = image.copy()
    out[:width], out[-width:], out[:, :width], out[:, -width:] = 0.0, 0.0, 0.0, 0.0
    return out


def _stretch(image: np.ndarray) -> np.ndarray:
    centre = (SIZE - 1) / 2.0   # taller by 1.4, width kept
    return ndimage.affine_transform(image, np.diag([1.0 / 1.4, 1.0]), offset=(centre - centre / 1.4, 0.0), order=1,
                                    cval=1.0)


FAULTS = {"squash": _squash, "shear": _shear, "ruled": _ruled, "occlude": _occlude,
          # 2026-12-06 (night): ten more, for the ceiling on the data itself (outside_fault_ceiling.py)
          "pad": _pad, "frame": _frame, "stretch": _stretch,
          "shrink": lambda image: _shrunk(image, 0.7, 1.0),
          "motion_blur": lambda image: ndimage.uniform_filter1d(image, 5, axis=1, mode="nearest"),
          "downsample": lambda image: ndimage.zoom(ndimage.zoom(image, 0.5, order=1, mode="nearest"), 2.0, order=1,
                                                mode="nearest"),
          "darken": lambda image: 0.7 * image,
          "washed": lambda image: 0.25 + 0.6 * image,
          "posterize": lambda image: np.round(image * 3.0) / 3.0,
          "rotate180": lambda image: image[::-1, ::-1],
          # 2026-12-07
          "thin_frame": lambda image: _frame(image, 1)}


def corrupt(pixels: np.ndarray, client_ids: np.ndarray, fault: str, fraction: float, seed: int,
            background: str = "white") -> tuple[np.ndarray, set]:
    """(pixels with `fault` on every image of round(fraction × users) users, in the input's dtype and
    convention, those users)."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {', '.join(FAULTS)}. Found {fault!r}.")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]. Found {fraction}.")
    if background not in BACKGROUNDS:
        raise ValueError(f"background must be one of {BACKGROUNDS}. Found {background!r}.")
    ids = np.asarray(client_ids).astype(str)
    users = sorted(set(ids))
    hit = set(random.Random(seed).sample(users, round(fraction * len(users))))
    scale = 255.0 if pixels.dtype == np.uint8 else 1.0
    canonical = pixels.astype(np.float64) / scale          # 1.0 the white background, as the faults assume
    if background == "black":
        canonical = 1.0 - canonical
    rows = np.flatnonzero(np.isin(ids, sorted(hit)))
    change = FAULTS[fault]
    for i in rows:
        canonical[i] = np.clip(change(canonical[i]), 0.0, 1.0)
    if background == "black":
        canonical = 1.0 - canonical
    out = canonical * scale
    return (np.rint(out).astype(np.uint8) if pixels.dtype == np.uint8 else out.astype(pixels.dtype)), hit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="an images .npz (pixels, labels, client_ids)")
    parser.add_argument("--fault", choices=sorted(FAULTS), required=True)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--background", choices=BACKGROUNDS, default="white")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with np.load(args.source, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["pixels"], hit = corrupt(arrays["pixels"], arrays["client_ids"], args.fault, args.fraction, args.seed,
                                    args.background)
    np.savez_compressed(args.out, **arrays)
    print(f"{args.fault}: {len(hit)} of {len(set(arrays['client_ids'].astype(str)))} users' images changed -> {args.out}")


if __name__ == "__main__":
    main()
