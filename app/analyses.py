"""Which released analysis describes a run. `analyze-gan RUN --compare OTHER` and `analyze-lm RUN
--baseline OTHER` write one analysis.json into RUN holding both runs' parts ("current", and "compare"
or "baseline") and the verdict on the pair; OTHER gets none of its own. The Compare page shows a
pair's verdict when one of the two analyzed the other, and each run's part from whichever analysis
holds it."""

from __future__ import annotations

import json
import os

from fedgen_debug.runs import store

PARTS = ("current", "compare", "baseline")


def own_analysis(root: str, relative: str) -> dict | None:
    try:
        return store.read_json(store.released(os.path.join(root, relative), store.ANALYSIS))
    except (OSError, ValueError, json.JSONDecodeError):
        return None


def names(stored: str, root: str, relative: str) -> bool:
    """Whether a run_dir recorded by an analysis (as typed on its command line) is `root/relative`."""
    if os.path.realpath(stored) == os.path.realpath(os.path.join(root, relative)):
        return True
    stored = os.path.normpath(stored)
    return stored == os.path.normpath(relative) or stored.endswith(os.sep + os.path.normpath(relative))


def part_of(analysis: dict | None, root: str, relative: str) -> dict | None:
    """The part of `analysis` describing `root/relative`, if it holds one."""
    for key in PARTS:
        part = (analysis or {}).get(key)
        if isinstance(part, dict) and isinstance(part.get("run_dir"), str) and names(part["run_dir"], root, relative):
            return part
    return None


def pair_analysis(root: str, left: str, right: str) -> dict | None:
    """The analysis that compared these two runs (written into either), or None."""
    for one, other in ((left, right), (right, left)):
        analysis = own_analysis(root, one)
        if part_of(analysis, root, one) is not None and part_of(analysis, root, other) is not None:
            return analysis
    return None


def has_finding(analysis: dict | None) -> bool:
    """Whether an analysis says yes: an inversion or a tokenization bug suspected (not inconclusive)."""
    if not analysis or analysis.get("inconclusive"):
        return False
    return bool(analysis.get("pixel_inversion_suspected") or analysis.get("tokenization_bug_suspected"))


def part_for(root: str, relative: str, pair: dict | None) -> dict | None:
    """The run's part: from the pair's analysis when it holds one, else from the run's own."""
    return part_of(pair, root, relative) or part_of(own_analysis(root, relative), root, relative)
