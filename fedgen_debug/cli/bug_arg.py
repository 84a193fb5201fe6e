"""The `--bug NAME:FRACTION` flag of train-lm and train-gan: `device.catalog.parse_bug` with the flag named."""

from __future__ import annotations


def bug_fraction(text: str | None, modality: str) -> float:
    """The fraction of the bug the flag names (0.0 without the flag)."""
    from fedgen_debug.device.catalog import parse_bug

    if text is None:
        return 0.0
    try:
        return parse_bug(text, modality).fraction
    except ValueError as error:
        raise ValueError(f"--bug: {error}") from None
