"""Per-client random streams: what a device draws depends only on (seed, stream, client id), so
simulations are reproducible and independent of the order in which clients are visited."""

from __future__ import annotations

import hashlib

import numpy as np


def client_rng(seed: int, client_id: str, stream: int, *more: int) -> np.random.Generator:
    """`more`: further non-negative ints the stream depends on (e.g. the round: a fresh draw each round)."""
    digest = hashlib.sha256(client_id.encode("utf-8")).digest()
    return np.random.default_rng([seed, stream, int.from_bytes(digest[:8], "little"), *more])
