"""Walks the released part of run stores and fails on anything private: a file the store does not
declare, secret material, a client id (as a whole token, in any text file), a raw sentence, a client's
image or a near copy of one (in any released array of images, against every image given), an exact
count of private data (any number in a JSON, CSV or TXT file), a noised aggregate equal to its exact
value, or a digest of a raw data file (a deterministic function of every example: a guess of one user's
data can be checked against it). Shared by test_release_boundary.py, the demo test and the monitor's."""

from __future__ import annotations

import hashlib
import json
import os
import re

import numpy as np

from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store

TEXT_SUFFIXES = (".json", ".jsonl", ".csv", ".txt")
# A released image whose RMS distance to a client's image (both in [0, 1]) is below this is a near copy:
# two handwritten glyphs differ by ≥ 0.15 (a blank image from a glyph by more), a copy with a little
# noise or blur by less than 0.05.
NEAR_COPY_RMS = 0.05
# A number standing on its own: not a part of a word, a decimal or a hyphenated name ("pytest-263").
_NUMBER = re.compile(r"(?<![\w.])(?<!\w-)-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")


def released_files(run_dir: str) -> list[str]:
    root = os.path.join(run_dir, store.RELEASED)
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


def _numbers(value) -> list[float]:
    """Every number in a parsed JSON value: its numbers, and the numbers written inside its strings."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        return list(text_numbers(value))
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def text_numbers(text: str) -> set[float]:
    """Every number written in a CSV or TXT file (as a token of its own)."""
    return {float(m) for m in _NUMBER.findall(text)}


def names_client(text: str, client_id: str) -> bool:
    """Whether `client_id` stands in `text` as a whole token (not as part of a longer id)."""
    return re.search(r"(?<![\w-])" + re.escape(client_id) + r"(?![\w-])", text) is not None


def released_images(path: str):
    """The arrays of 28×28 images in a released .npz, scaled to [0, 1] ([-1, 1] samples mapped)."""
    for array in store.load_arrays(path):
        array = np.asarray(array)
        if array.ndim >= 3 and array.shape[1:3] == (28, 28) and np.issubdtype(array.dtype, np.floating):
            flat = array.reshape(len(array), -1).astype(np.float64)
            yield (flat + 1.0) / 2.0 if flat.size and flat.min() < -0.01 else flat


def nearest_rms(released: np.ndarray, images: np.ndarray) -> np.ndarray:
    """For each released image, the RMS distance to the nearest of `images` (all of them, in chunks)."""
    images = np.asarray(images, np.float64).reshape(len(images), -1)
    norms = np.sum(images ** 2, axis=1)
    best = np.full(len(released), np.inf)
    for start in range(0, len(released), 256):
        chunk = released[start:start + 256]
        squared = np.sum(chunk ** 2, axis=1)[:, None] - 2 * chunk @ images.T + norms[None, :]
        best[start:start + 256] = np.sqrt(np.maximum(squared.min(axis=1), 0.0) / images.shape[1])
    return best


def _at(value, dotted: str):
    for key in dotted.split("."):
        value = value[key]
    return value


def file_digests(paths) -> list[str]:
    """The common digests of each file (hex, and the 16- and 8-character prefixes keys are cut to)."""
    digests = []
    for path in paths:
        content = open(path, "rb").read()
        for name in ("sha256", "sha1", "md5", "blake2b", "sha512"):
            full = hashlib.new(name, content).hexdigest()
            digests += [full, full[:16]]
    return digests


def check_released(run_dir: str, client_ids=(), sentences=(), images=None, exact_counts=(), data_files=(),
                   noised=None) -> None:
    """Asserts the boundary for one run directory. `exact_counts`: numbers that only private data
    determines (e.g. selected users, kept images); they must not appear in any released text file.
    `data_files`: the raw data files the run read; no digest of them may appear in any released file.
    `images`: the clients' images in [0, 1]; no released image may be within `NEAR_COPY_RMS` of one.
    `noised`: {released file name: {dotted key: exact value}}: each released value must differ from it."""
    root = os.path.join(run_dir, store.RELEASED)
    assert os.path.isdir(root), f"{run_dir}: no released/ part"
    top = sorted(os.listdir(root))
    assert set(top) <= set(store.RELEASED_FILES), f"undeclared released files: {set(top) - set(store.RELEASED_FILES)}"
    assert sorted(os.listdir(run_dir)) in (["released", "server"], ["released"]), os.listdir(run_dir)
    secret = secret_lib.load(run_dir)
    needles = file_digests(data_files)
    if secret is not None:
        needles += [f"{secret.entropy:064x}", str(secret.entropy)]
        for stream in secret_lib.STREAMS:
            needles += [str(v) for v in secret.tf_seed(stream)]
    counts = {float(c) for c in exact_counts}
    for path in released_files(run_dir):
        raw = open(path, "rb").read()
        for needle in needles:
            assert needle.encode() not in raw, f"{path}: holds secret material or a digest of the data"
        if path.endswith(".npz") and images is not None:
            for released in released_images(path):
                nearest = nearest_rms(released, images)
                assert not np.any(nearest < NEAR_COPY_RMS), (
                    f"{path}: a released image is within RMS {nearest.min():.4f} of a client's image")
        if not path.endswith(TEXT_SUFFIXES):
            continue
        text = raw.decode("utf-8")
        for cid in client_ids:
            assert not names_client(text, cid), f"{path}: names client {cid}"
        for sentence in sentences:
            assert sentence not in text, f"{path}: holds a raw sentence {sentence!r}"
        if path.endswith(".json"):
            numbers = set(_numbers(json.loads(text)))
        elif path.endswith(".jsonl"):
            numbers = set(_numbers([json.loads(line) for line in text.splitlines() if line.strip()]))
        else:
            numbers = text_numbers(text)
        leaked = counts & numbers
        assert not leaked, f"{path}: holds the exact count(s) {sorted(leaked)}"
    for name, values in (noised or {}).items():
        report = store.read_json(store.released(run_dir, name))
        for key, exact in values.items():
            released = float(_at(report, key))
            assert abs(released - exact) > 1e-9 * max(1.0, abs(exact)), (
                f"{name}: {key} = {released} is the exact aggregate, not a noised one")
