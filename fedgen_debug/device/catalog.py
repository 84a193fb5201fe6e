"""The bugs a run can simulate on its devices, by name: the `NAME:FRACTION[,key=value...]` spec (`parse_bug`).

Each entry is a `DeviceTransform` class (`device.transform`) built as `cls(fraction, seed=seed, **settings)`,
and the modality of the data it applies to: the paper's two bugs, then the pipeline faults of
`image_faults` and `text_faults` (issue 55), whose public settings the spec may set (`rotate:0.5,degrees=180`).
`train-gan`/`train-lm --bug` simulate any of them on the devices (`cli.bug_arg`); a monitor's rollout, the paper's two.
"""

from __future__ import annotations

import math

from fedgen_debug.device.faults import DeviceFault, setting_types
from fedgen_debug.device.image_faults import IMAGE_FAULTS
from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.device.text_faults import TEXT_FAULTS
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.spec_grammar import split_spec

BUGS = {
    "invert": ("images", PixelInversionBug),   # paper §6: pixel intensities flipped
    "concat": ("text", TokenizationBug),       # paper §5: the first two tokens glued
    **{name: ("images", cls) for name, cls in IMAGE_FAULTS.items()},
    **{name: ("text", cls) for name, cls in TEXT_FAULTS.items()},
}


def bug_names(modality: str) -> tuple[str, ...]:
    return tuple(name for name, (m, _) in BUGS.items() if m == modality)


def bug_settings(name: str) -> dict[str, type]:
    """The settings `NAME:FRACTION,key=value` may give the bug, with their types (none for the paper's)."""
    cls = BUGS[name][1]
    return setting_types(cls) if issubclass(cls, DeviceFault) else {}


def _setting(name: str, key: str, value: str, kind: type):
    try:
        return kind(value)
    except ValueError:
        noun = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
        raise ValueError(f"{name}: {key} must be {noun}. Found {value!r}.") from None


def parse_bug(text: str, modality: str, seed: int = 0):
    """`NAME:FRACTION[,key=value...]` (e.g. `invert:0.5`, `blur:0.1,sigma=2`) → the bug's `DeviceTransform`
    for data of `modality`."""
    names = bug_names(modality)
    example = f"{names[0]}:0.5" if names else "NAME:FRACTION"
    parts = split_spec(text)
    if parts.name not in BUGS:
        raise ValueError(f"bug must be one of {', '.join(BUGS)}. Found {parts.name!r} (e.g. {example}).")
    if parts.name not in names:
        noun = {"images": "image"}.get(BUGS[parts.name][0], BUGS[parts.name][0])
        raise ValueError(f"{parts.name} is a bug of {noun} data; for {modality} use {', '.join(names)}.")
    if len(parts.positional) != 1:
        raise ValueError(f"a bug looks like {example}. Found {text!r}.")
    known = bug_settings(parts.name)
    for key, _ in parts.settings:
        if key not in known:
            has = f"its settings are {', '.join(known)}" if known else "it has no settings"
            raise ValueError(f"{parts.name} has no setting {key!r}: {has}. Found {text!r}.")
    settings = {key: _setting(parts.name, key, value, known[key]) for key, value in parts.settings}
    try:
        fraction = float(parts.positional[0])
    except ValueError:
        raise ValueError(f"the bug's fraction must be a number. Found {parts.positional[0]!r}.") from None
    if math.isnan(fraction):
        raise ValueError(f"the bug's fraction must be a number. Found {parts.positional[0]!r}.")
    return BUGS[parts.name][1](fraction, seed=seed, **settings)


PAPER_BUGS = {"images": "invert", "text": "concat"}   # what a run's `bug_fraction` simulates


def parse_fault(text: str, modality: str, seed: int = 0):
    """A run's `fault`: a catalog entry other than the paper's bug of `modality` (that one is the run's
    `bug_fraction`)."""
    name = split_spec(text).name
    if name == PAPER_BUGS.get(modality):
        raise ValueError(f"fault: {name} is the run's bug_fraction, not a fault. Found {text!r}.")
    return parse_bug(text, modality, seed)
