"""The bugs a run can simulate on its devices, by name: the `--bug NAME:FRACTION` spec (`parse_bug`).

Each entry is a `DeviceTransform` class (`device.transform`) built as `cls(fraction, seed=seed)`, and the
modality of the data it applies to.
"""

from __future__ import annotations

import math

from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.spec_grammar import split_spec

BUGS = {
    "invert": ("images", PixelInversionBug),   # paper §6: pixel intensities flipped
    "concat": ("text", TokenizationBug),       # paper §5: the first two tokens glued
}


def bug_names(modality: str) -> tuple[str, ...]:
    return tuple(name for name, (m, _) in BUGS.items() if m == modality)


def parse_bug(text: str, modality: str, seed: int = 0):
    """`NAME:FRACTION` (e.g. `invert:0.5`) → the bug's `DeviceTransform` for data of `modality`."""
    names = bug_names(modality)
    example = f"{names[0]}:0.5" if names else "NAME:FRACTION"
    parts = split_spec(text)
    if parts.name not in BUGS:
        raise ValueError(f"bug must be one of {', '.join(BUGS)}. Found {parts.name!r} (e.g. {example}).")
    if parts.name not in names:
        noun = {"images": "image"}.get(BUGS[parts.name][0], BUGS[parts.name][0])
        raise ValueError(f"{parts.name} is a bug of {noun} data; for {modality} use {', '.join(names)}.")
    if len(parts.positional) != 1 or parts.settings:
        raise ValueError(f"a bug looks like {example}. Found {text!r}.")
    try:
        fraction = float(parts.positional[0])
    except ValueError:
        raise ValueError(f"the bug's fraction must be a number. Found {parts.positional[0]!r}.") from None
    if math.isnan(fraction):
        raise ValueError(f"the bug's fraction must be a number. Found {parts.positional[0]!r}.")
    return BUGS[parts.name][1](fraction, seed=seed)
