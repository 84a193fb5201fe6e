"""Writes that leave either the complete new file or nothing (never a half-written file)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile


@contextlib.contextmanager
def atomic_path(path: str):
    """Yields a temporary path beside `path`; renames it onto `path` only if the block succeeds."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path: str, data, sort_keys: bool = False) -> None:
    """Writes `data` as indented JSON to `path`, atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=sort_keys)
