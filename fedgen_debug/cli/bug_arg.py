"""The `--bug NAME:FRACTION` flag of train-lm and train-gan: `device.catalog.parse_bug` with the flag named."""

from __future__ import annotations


def bug_settings(text: str | None, modality: str) -> dict:
    """The run settings `--bug` names: the paper's bug as `bug_fraction` (invert, concat), any other catalog
    fault as `fault` (`device.catalog`)."""
    from fedgen_debug.device.catalog import PAPER_BUGS, parse_bug

    if text is None:
        return {}
    try:
        bug = parse_bug(text, modality)
    except ValueError as error:
        raise ValueError(f"--bug: {error}") from None
    if text.strip().partition(":")[0] == PAPER_BUGS[modality]:
        return {"bug_fraction": bug.fraction}
    return {"fault": text.strip()}
