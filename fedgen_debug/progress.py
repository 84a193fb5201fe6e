"""Progress bars for long work: tqdm on stderr, silent when stderr is not a terminal (CI, pipes)."""

from __future__ import annotations

import os

from tqdm.auto import tqdm

# Set in a process that trains beside others (`runs.side_by_side`): the terminal row its bars take, so
# that two processes' bars do not overwrite each other.
PROGRESS_ROW_ENV = "FEDGEN_DEBUG_PROGRESS_ROW"


def progress(iterable, desc: str, unit: str = "it", total: int | None = None):
    row = os.environ.get(PROGRESS_ROW_ENV)
    return tqdm(iterable, desc=desc, unit=unit, total=total, leave=False, disable=None,
                position=int(row) if row else None)
