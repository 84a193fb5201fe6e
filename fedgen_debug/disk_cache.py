"""Values a later process would compute again, kept on disk: pure functions of public inputs only.

Two kinds are kept, each keyed by a digest of everything it depends on:
- the RDP of a dp_accounting event (`privacy.rdp_cache`): every command recomposes its ledger;
- the simulated users of `synthetic-images` and `synthetic-text` (`data.synthetic_images`,
  `data.synthetic_text`): rendering the paper's 3,400 writers takes minutes on 2 cores, and every
  process of a demo, sweep or evaluation loads the same ones again.
Never data a user brings, never a secret, never anything of a run: a hit returns exactly the arrays
computing would (stored as .npz, float bits unchanged).

`FEDGEN_DEBUG_CACHE`: the directory (default `~/.cache/fedgen-debug`); `off` keeps nothing on disk. A
file that cannot be read is computed again and replaced; one that cannot be written is skipped (a
read-only home costs time, never a result).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
import zipfile
from importlib import metadata
from typing import Callable, Mapping

import numpy as np

CACHE_ENV = "FEDGEN_DEBUG_CACHE"
OFF = "off"

logger = logging.getLogger(__name__)


def cache_dir(namespace: str) -> str | None:
    """The directory of `namespace`'s values, or None when `FEDGEN_DEBUG_CACHE=off`."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "fedgen-debug")
    return None if root == OFF else os.path.join(root, namespace)


def digest(*parts) -> str:
    """A file name for the value of `parts` (reprs: attrs and dataclass reprs list every field, floats
    print round-trip)."""
    return hashlib.sha256("|".join(repr(p) for p in parts).encode()).hexdigest()


@functools.cache
def code_version(sources: tuple[str, ...], distributions: tuple[str, ...]) -> str:
    """What a value depends on besides its arguments: a digest of the source files that compute it and the
    installed versions of the distributions it uses (a value computed by other code is another value).
    Once per process."""
    h = hashlib.sha256()
    for path in sources:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16] + ":" + ",".join(f"{d}=={metadata.version(d)}" for d in distributions)


def cached_arrays(namespace: str, key: str, compute: Callable[[], Mapping[str, np.ndarray]],
                  valid: Callable[[dict], bool] = lambda arrays: True) -> dict[str, np.ndarray]:
    """`compute()`'s arrays by name, read from `namespace`/`key`.npz when a process computed them before
    (and `valid` accepts what was read)."""
    directory = cache_dir(namespace)
    if directory is None:
        return dict(compute())
    path = os.path.join(directory, key + ".npz")
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
        if valid(arrays):
            return arrays
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):   # missing, truncated, foreign
        pass
    arrays = dict(compute())
    temporary = None
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, suffix=".tmp", delete=False) as f:
            temporary = f.name
            np.savez(f, **arrays)
        os.replace(temporary, path)   # atomic: a concurrent reader sees the whole file or none
    except OSError as e:
        logger.debug("not kept on disk (%s): %s", path, e)
        if temporary and os.path.exists(temporary):
            os.remove(temporary)
    return arrays
