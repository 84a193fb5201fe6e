"""The `--bug KIND:FRACTION` flag of train-lm (concat) and train-gan (invert)."""

from __future__ import annotations


def parse_bug(text: str | None, kind: str, example: str) -> float:
    """The fraction of `kind:FRACTION`; 0.0 without the flag."""
    if text is None:
        return 0.0
    given, _, fraction = text.partition(":")
    if given != kind or not fraction:
        raise ValueError(f"--bug must look like {kind}:{example}. Found {text!r}.")
    try:
        return float(fraction)
    except ValueError:
        raise ValueError(f"--bug fraction must be a number. Found {fraction!r}.") from None
