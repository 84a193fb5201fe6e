"""RDP of dp_accounting events kept on disk, so that no process computes one event's RDP twice.

A sampled-without-replacement Gaussian's RDP takes dp_accounting 0.3-0.4 s on the 2-core machine (its
orders up to 512 are Python loops), and every command that checks a release recomposes its population's
whole ledger: a process-level cache (`accounting.rdp_of_event`) forgets it all at exit, so a ledger of a
hundred distinct releases cost every command half a minute. The values here are dp_accounting's own,
stored as float64 bytes: a hit returns exactly what computing would.

The key is a digest of everything the value depends on: dp_accounting's version, the orders, the
neighbouring relation and the event's repr (attrs reprs list every field; floats print round-trip).
What is stored is the ledger's own content (events a release boundary shows anyway), never data.

`FEDGEN_DEBUG_CACHE`: the directory (default `~/.cache/fedgen-debug`); `off` keeps nothing on disk. A
file that cannot be read is computed again; one that cannot be written is skipped (a read-only home).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from importlib import metadata
from typing import Callable, Sequence

import numpy as np

CACHE_ENV = "FEDGEN_DEBUG_CACHE"
OFF = "off"

logger = logging.getLogger(__name__)


def cache_dir() -> str | None:
    """The RDP cache's directory, or None when `FEDGEN_DEBUG_CACHE=off`."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "fedgen-debug")
    return None if root == OFF else os.path.join(root, "rdp")


def key(event, accounting: str, orders: Sequence[float]) -> str:
    text = "|".join((f"dp_accounting=={metadata.version('dp-accounting')}", repr(tuple(orders)), accounting, repr(event)))
    return hashlib.sha256(text.encode()).hexdigest()


def rdp_values(event, accounting: str, orders: Sequence[float], compute: Callable[[], np.ndarray]) -> np.ndarray:
    """`compute()`'s RDP values of `event`, from the disk cache when another process computed them."""
    directory = cache_dir()
    if directory is None:
        return compute()
    path = os.path.join(directory, key(event, accounting, orders) + ".npy")
    try:
        values = np.load(path, allow_pickle=False)
        if values.dtype == np.float64 and values.shape == (len(orders),):
            return values
    except (OSError, ValueError, EOFError):   # missing, truncated or not an array
        pass
    values = np.asarray(compute(), dtype=np.float64)
    temporary = None
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, suffix=".tmp", delete=False) as f:
            temporary = f.name
            np.save(f, values, allow_pickle=False)
        os.replace(temporary, path)   # atomic: a concurrent reader sees the whole file or none
    except OSError as e:
        logger.debug("RDP cache not written (%s): %s", path, e)
        if temporary and os.path.exists(temporary):
            os.remove(temporary)
    return values
