"""Walks the released part of run stores and fails on anything private: a file the store does not
declare, secret material, a client id, a raw sentence or image, an exact count of private data, or a
digest of a raw data file (a deterministic function of every example: a guess of one user's data can
be checked against it). Shared by test_release_boundary.py and the demo test."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store

TEXT_SUFFIXES = (".json", ".csv", ".txt")


def released_files(run_dir: str) -> list[str]:
    root = os.path.join(run_dir, store.RELEASED)
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


def _numbers(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


def file_digests(paths) -> list[str]:
    """The common digests of each file (hex, and the 16- and 8-character prefixes keys are cut to)."""
    digests = []
    for path in paths:
        content = open(path, "rb").read()
        for name in ("sha256", "sha1", "md5", "blake2b", "sha512"):
            full = hashlib.new(name, content).hexdigest()
            digests += [full, full[:16]]
    return digests


def check_released(run_dir: str, client_ids=(), sentences=(), images=None, exact_counts=(), data_files=()) -> None:
    """Asserts the boundary for one run directory. `exact_counts`: numbers that only private data
    determines (e.g. selected users, kept images); they must not appear in released JSON or CSV.
    `data_files`: the raw data files the run read; no digest of them may appear in any released file."""
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
    for path in released_files(run_dir):
        raw = open(path, "rb").read()
        for needle in needles:
            assert needle.encode() not in raw, f"{path}: holds secret material or a digest of the data"
        if not path.endswith(TEXT_SUFFIXES):
            continue
        text = raw.decode("utf-8")
        for cid in client_ids:
            assert f'"{cid}"' not in text and f",{cid}," not in text, f"{path}: names client {cid}"
        for sentence in sentences:
            assert sentence not in text, f"{path}: holds a raw sentence {sentence!r}"
        if path.endswith(".json"):
            numbers = set(_numbers(json.loads(text)))
            for count in exact_counts:
                assert float(count) not in numbers, f"{path}: holds the exact count {count}"
    if images is not None and os.path.exists(store.released(run_dir, store.SAMPLES_NPZ)):
        (samples,) = store.load_arrays(store.released(run_dir, store.SAMPLES_NPZ))
        flat = (samples.reshape(len(samples), -1) + 1.0) / 2.0
        for image in np.asarray(images).reshape(len(images), -1)[:200]:
            assert np.min(np.abs(flat - image).max(axis=1)) > 1e-3, "a released sample is a client's image"
