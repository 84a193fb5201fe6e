"""RDP of dp_accounting events kept on disk (`disk_cache`), so that no process computes one event's RDP twice.

A sampled-without-replacement Gaussian's RDP takes dp_accounting 0.3-0.4 s on the 2-core machine (its
orders up to 512 are Python loops), and every command that checks a release recomposes its population's
whole ledger: a process-level cache (`accounting.rdp_of_event`) forgets it all at exit, so a ledger of a
hundred distinct releases cost every command half a minute. The values are what `accounting` computes,
stored as float64 bytes: a hit returns exactly what computing would.

The key is a digest of everything the value depends on: dp_accounting's version, the orders, the
neighbouring relation, the event's repr and the method that computed it (`accounting.RDP_METHOD`). What is
stored is the ledger's own content (events a release boundary shows anyway), never data.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from fedgen_debug import disk_cache

NAMESPACE = "rdp"


def cache_dir() -> str | None:
    return disk_cache.cache_dir(NAMESPACE)


def key(event, accounting: str, orders: Sequence[float], method: str = "") -> str:
    return disk_cache.digest(disk_cache.code_version((), ("dp-accounting",)), tuple(orders), accounting, event,
                             method)


def rdp_values(event, accounting: str, orders: Sequence[float], compute: Callable[[], np.ndarray],
               method: str = "") -> np.ndarray:
    """`compute()`'s RDP values of `event`, from the disk when another process computed them. `method`
    names how `compute` computes (a value computed another way is another value)."""
    arrays = disk_cache.cached_arrays(
        NAMESPACE, key(event, accounting, orders, method), lambda: {"rdp": np.asarray(compute(), dtype=np.float64)},
        valid=lambda a: set(a) == {"rdp"} and a["rdp"].dtype == np.float64 and a["rdp"].shape == (len(orders),))
    return arrays["rdp"]
