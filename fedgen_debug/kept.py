"""Arrays a process keeps instead of computing them again, within a byte budget.

Three things are costly to recompute and asked for again in one process: rendered synthetic writers
(`data.synthetic_images`), a device's selected GAN images between rounds and the primary CNN's outputs
on a device (`device.gan_data`). Each keeps its values here, read-only (one array serves every
caller, so nobody may change it), while all of its values hold at most its budget in bytes.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np


def _arrays(value) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    return list(value.values() if isinstance(value, dict) else value)


class KeptArrays:
    """Values (an array, or a tuple or dict of arrays) by key. `budget()` is read at each store, so a
    module constant behind it can be changed; a value that would exceed it is returned, not kept."""

    def __init__(self, budget: Callable[[], int]):
        self._budget, self._kept, self._bytes, self._lock = budget, {}, 0, threading.Lock()

    def get(self, key, compute: Callable[[], object]):
        """The kept value of `key`, else `compute()`'s, made read-only (and kept within the budget)."""
        with self._lock:
            if key in self._kept:
                return self._kept[key]
        value = compute()
        arrays = _arrays(value)
        for array in arrays:
            array.flags.writeable = False
        size = sum(a.nbytes for a in arrays)
        with self._lock:
            if key not in self._kept and self._bytes + size <= self._budget():
                self._kept[key], self._bytes = value, self._bytes + size
        return value
