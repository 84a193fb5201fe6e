"""The `--bug NAME:FRACTION` flag of train-lm and train-gan: `device.catalog.parse_bug` with the flag named."""

from __future__ import annotations

# The bug each run command simulates: runs take a fraction only (GANRun/LMRun `bug_fraction`), so the
# catalog's other faults (issue 55) are refused here rather than silently run as this one.
RUN_BUGS = {"images": "invert", "text": "concat"}


def bug_fraction(text: str | None, modality: str) -> float:
    """The fraction of the bug the flag names (0.0 without the flag)."""
    from fedgen_debug.device.catalog import parse_bug

    if text is None:
        return 0.0
    try:
        bug = parse_bug(text, modality)
    except ValueError as error:
        raise ValueError(f"--bug: {error}") from None
    name = text.strip().partition(":")[0]
    if name != RUN_BUGS[modality]:
        raise ValueError(f"--bug: runs simulate {RUN_BUGS[modality]} only for now; {name} is a device fault "
                         f"for evaluation scripts (fedgen_debug.device.catalog). Found {text!r}.")
    return bug.fraction
