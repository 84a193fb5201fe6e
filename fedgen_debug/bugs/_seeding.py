"""Per-client random streams: a client's decisions depend only on (seed, client id)."""

from __future__ import annotations

import hashlib

import numpy as np


def client_rng(seed: int, client_id: str, stream: int) -> np.random.Generator:
    digest = hashlib.sha256(client_id.encode("utf-8")).digest()
    return np.random.default_rng([seed, stream, int.from_bytes(digest[:8], "little")])


def check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]. Found {fraction}.")
