"""GAN sample grids for the app from released arrays (numpy only): the final samples `analyze-gan`
drew, or the training snapshots behind the round slider (read with `store.load_snapshot`); and the
viewer's brightness / contrast (TensorBoard's image dashboard has both: an inversion is a question of
what is dark)."""

from __future__ import annotations

import os

import numpy as np

from fedgen_debug.runs import store

GRID_COLUMNS = 8
GRID_IMAGES = 64
GUTTER = 128  # gray lines between the images


def final_samples(run_dir: str) -> np.ndarray | None:
    """The first `GRID_IMAGES` samples `analyze-gan` drew (in [-1, 1]) as uint8, or None before analysis."""
    path = store.released(run_dir, store.SAMPLES_NPZ)
    if not os.path.isfile(path):
        return None
    images = np.asarray(store.load_arrays(path)[0][:GRID_IMAGES], np.float64).reshape(-1, 28, 28)
    return np.round(np.clip((images + 1.0) / 2.0, 0.0, 1.0) * 255).astype(np.uint8)


def grid(images: np.ndarray, columns: int = GRID_COLUMNS) -> np.ndarray:
    """uint8 images [n, 28, 28] → one uint8 picture with 1-pixel gray gutters, always `columns` wide
    and as many rows as 64 images need, so two runs' grids have the same size."""
    images = np.asarray(images, np.uint8)[:GRID_IMAGES]
    rows = -(-GRID_IMAGES // columns)
    picture = np.full((rows * 29 + 1, columns * 29 + 1), GUTTER, np.uint8)
    for i, image in enumerate(images):
        r, c = divmod(i, columns)
        picture[1 + r * 29:29 + r * 29, 1 + c * 29:29 + c * 29] = image
    return picture


def adjust(picture: np.ndarray, brightness: float = 0.0, contrast: float = 1.0) -> np.ndarray:
    """Contrast scales around mid-gray, then brightness shifts (both in units of full white); clipped."""
    if contrast <= 0:
        raise ValueError(f"contrast must be > 0. Found {contrast}.")
    values = (np.asarray(picture, np.float64) / 255.0 - 0.5) * contrast + 0.5 + brightness
    return np.round(np.clip(values, 0.0, 1.0) * 255).astype(np.uint8)


def enlarge(picture: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscaling: pixels stay sharp squares whatever the browser does."""
    return np.kron(picture, np.ones((factor, factor), np.uint8)) if factor > 1 else picture
