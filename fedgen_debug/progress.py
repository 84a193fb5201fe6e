"""Progress bars for long work: tqdm on stderr, silent when stderr is not a terminal (CI, pipes)."""

from __future__ import annotations

from tqdm.auto import tqdm


def progress(iterable, desc: str, unit: str = "it", total: int | None = None):
    return tqdm(iterable, desc=desc, unit=unit, total=total, leave=False, disable=None)
