"""The images `.npz` contract: `pixels` [N,28,28], `labels` [N], `client_ids` [N].

Also read: `pixels` as [N,28,28,1] or flattened row by row, [N,784]; `labels` as a column [N,1] or as
floats holding whole numbers.

`pixels` are uint8 0-255 or float 0-1. By default 255 / 1.0 is the white background, as in TFF's
EMNIST; `background="black"` reads files where 0 is the background (MNIST style) and flips them into
the canonical format.
"""

from __future__ import annotations

import zipfile

import numpy as np
import tensorflow_federated as tff
from fedgen_debug.progress import progress

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.atomic import atomic_path
from fedgen_debug.data.errors import DataError

REQUIRED_KEYS = ("pixels", "labels", "client_ids")
BACKGROUNDS = ("white", "black")


def _normalized_pixels(path: str, pixels: np.ndarray, background: str) -> np.ndarray:
    n = pixels.shape[0] if pixels.ndim else 0
    if pixels.ndim == 4 and pixels.shape[-1] == 1:
        pixels = pixels[..., 0]
    if pixels.ndim == 2 and pixels.shape[1] == cd.IMAGE_SIZE * cd.IMAGE_SIZE:   # flattened row by row (MNIST's CSVs)
        pixels = pixels.reshape(n, cd.IMAGE_SIZE, cd.IMAGE_SIZE)
    if pixels.ndim != 3 or pixels.shape[1:] != (cd.IMAGE_SIZE, cd.IMAGE_SIZE):
        raise DataError(path, f"'pixels' must have shape [N, 28, 28] ([N, 28, 28, 1] and [N, 784] are read too). "
                        f"Found {list(pixels.shape)}.")
    if pixels.dtype == np.uint8:
        out = pixels.astype(np.float32) / 255.0
    elif np.issubdtype(pixels.dtype, np.floating):
        finite = np.isfinite(pixels)
        if not finite.all():
            bad = int(np.argwhere(~finite.reshape(n, -1).all(axis=1))[0, 0])
            raise DataError(path, f"'pixels' contains NaN or infinite values (first at example {bad}).")
        lo, hi = float(pixels.min()), float(pixels.max())
        if lo < 0.0 or hi > 1.0:
            raise DataError(
                path, f"float 'pixels' must lie in [0, 1]. Found values in [{lo:g}, {hi:g}]; "
                "store uint8 0-255 or divide by 255."
            )
        out = pixels.astype(np.float32)
    else:
        raise DataError(path, f"'pixels' must be uint8 (0-255) or float (0-1). Found dtype {pixels.dtype}.")
    return 1.0 - out if background == "black" else out


def read_npz(path: str, background: str = "white") -> cd.ArrayClientData:
    """Reads an images `.npz` into an `ArrayClientData`; raises `DataError` for bad input."""
    if background not in BACKGROUNDS:
        raise DataError(path, f"background must be one of {BACKGROUNDS}. Found {background!r}.")
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        if head != b"PK\x03\x04":   # numpy reads anything else as a pickle, and says so
            raise DataError(path, "not a .npz file: a .npz is a zip archive of arrays, as numpy.savez writes it "
                                  f"(this file begins {head!r}).")
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in REQUIRED_KEYS if k not in f.files]
            if missing:
                raise DataError(path, f"missing key(s) {missing}; an images .npz needs {list(REQUIRED_KEYS)} "
                                f"(found {sorted(f.files)}).")
            pixels, labels, client_ids = (f[k] for k in REQUIRED_KEYS)
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(path, "file not found.") from None
    except ValueError as e:
        if "allow_pickle" in str(e):   # an object array, as pandas' .values and lists of str give
            raise DataError(path, "holds an object array, which is not read (unpickling can run code): save "
                            "each key as a plain array, e.g. client_ids=np.asarray(ids, dtype=str).") from None
        raise DataError(path, f"not a readable .npz file ({e}).") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(path, f"not a readable .npz file ({e}).") from None
    n = len(pixels) if pixels.ndim else 0
    if n == 0:
        raise DataError(path, "contains no examples.")
    pixels = _normalized_pixels(path, pixels, background)
    if labels.shape == (n, 1):   # a column, as Keras' y often is
        labels = labels[:, 0]
    if labels.shape != (n,) or client_ids.shape != (n,):
        raise DataError(path, f"'labels' and 'client_ids' must have shape [{n}] like 'pixels'. "
                        f"Found {list(labels.shape)} and {list(client_ids.shape)}.")
    if np.issubdtype(labels.dtype, np.floating) and np.isfinite(labels).all() and (labels == np.round(labels)).all():
        labels = labels.astype(np.int64)   # whole numbers stored as floats (a pandas column with gaps once)
    if not np.issubdtype(labels.dtype, np.integer):
        raise DataError(path, f"'labels' must be integers. Found dtype {labels.dtype}"
                        f"{' with fractional values' if np.issubdtype(labels.dtype, np.floating) else ''}.")
    if labels.min() < 0 or labels.max() >= cd.NUM_IMAGE_CLASSES:
        raise DataError(path, f"'labels' must lie in [0, {cd.NUM_IMAGE_CLASSES - 1}]. "
                        f"Found [{labels.min()}, {labels.max()}].")
    client_ids = client_ids.astype(str)
    empty = np.flatnonzero(np.char.str_len(client_ids) == 0)
    if len(empty):
        raise DataError(path, f"'client_ids' has {len(empty)} empty id(s) (first at example {empty[0]}).")
    groups = cd.group_by_client(client_ids)
    return cd.ArrayClientData(
        {cid: cd.image_examples(pixels[idx], labels[idx]) for cid, idx in groups.items()}
    )


def write_npz(client_data: tff.simulation.datasets.ClientData, path: str) -> int:
    """Writes image `client_data` in the npz contract (uint8, white background). Returns N."""
    pixels, labels, ids = [], [], []
    for cid in progress(client_data.client_ids, desc="writing npz", unit="client"):
        arrays = cd.client_numpy(client_data, cid)
        pixels.append(np.round(arrays["pixels"] * 255.0).astype(np.uint8))
        labels.append(arrays["label"].astype(np.int32))
        ids.append(np.full(len(arrays["label"]), cid))
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, pixels=np.concatenate(pixels), labels=np.concatenate(labels),
                                client_ids=np.concatenate(ids))
    return int(sum(len(l) for l in labels))
