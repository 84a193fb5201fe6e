"""The run store as the app sees it: every run under a root, summarized from its `released/` files only.

TF-free and data-reader-free (the app must never touch raw examples): it reads JSON written by
`runs.store` and never imports `fedgen_debug.data` or TensorFlow. A run whose files are missing or
corrupt comes back as a `RunSummary` with `broken` set, so one bad run never hides the others.
"""

from __future__ import annotations

import dataclasses
import json
import os

from fedgen_debug.privacy import deployment
from fedgen_debug.runs import store

MAX_DEPTH = 4  # run directories are found this many levels below the root at most
AGGREGATES = "DP aggregates"
MODEL_KINDS = ("GAN", "char-LM", "word-LM")  # runs with an auxiliary model (what Compare compares)


@dataclasses.dataclass(frozen=True)
class RunSummary:
    path: str                       # relative to the root
    kind: str                       # "char-LM", "word-LM", "GAN", "DP aggregates", or "?" when broken
    data: str = ""
    selector: str = ""
    bug: str = ""
    state: str = ""
    rounds_completed: int = 0
    rounds: int = 0
    epsilon: float | None = None
    delta: float | None = None
    above_warning: bool = False
    verdict: str = ""               # the analysis' verdict in a few words, "" before analysis
    memorization: str = ""          # "PASS" / "FAIL" / "" (not checked)
    broken: str = ""                # why the run cannot be read ("" when it can)
    # what the training's noise on the mean update is worth at a deployment (`privacy.deployment`), or None
    deployment_equivalent: dict | None = None

    @property
    def progress(self) -> str:
        return f"{self.rounds_completed}/{self.rounds}" if self.rounds else "–"


def find_marked(root: str, marker: str, max_depth: int = MAX_DEPTH) -> list[str]:
    """Directories under `root` with `released/<marker>` (at most `max_depth` levels down), sorted,
    relative to it; nothing below a found one is searched."""
    found = []
    root = os.path.abspath(root)
    for here, dirs, _ in os.walk(root):
        depth = os.path.relpath(here, root).count(os.sep) + (here != root)
        if os.path.isfile(os.path.join(here, store.RELEASED, marker)):
            found.append(os.path.relpath(here, root))
            dirs[:] = []
        elif depth >= max_depth or os.path.basename(here) in (store.RELEASED, store.SERVER):
            dirs[:] = []
        else:
            dirs.sort()
    return sorted(found)


def find_runs(root: str) -> list[str]:
    """Run directories under `root` (those with `released/config.json`), sorted, relative to it
    (a monitor's period runs included)."""
    return find_marked(root, store.CONFIG)


def _read(run_dir: str, name: str):
    try:
        return store.read_json(store.released(run_dir, name))
    except FileNotFoundError:
        return None


def _verdict(kind: str, analysis: dict | None) -> str:
    if not analysis:
        return ""
    if kind == "GAN":
        evidence = analysis.get("verdict") or analysis
        if evidence.get("inconclusive"):
            return "inconclusive"
        if "pixel_inversion_suspected" in evidence:
            return "inversion suspected" if evidence["pixel_inversion_suspected"] else "no inversion"
        return ""
    if "tokenization_bug_suspected" in analysis:
        if analysis.get("inconclusive"):
            return "inconclusive"
        return "tokenization bug suspected" if analysis["tokenization_bug_suspected"] else "no tokenization bug"
    return ""


def summarize(root: str, relative: str) -> RunSummary:
    run_dir = os.path.join(root, relative)
    try:
        config = _read(run_dir, store.CONFIG)
        if "lm" in config:
            lm = config["lm"]
            kind, data, selector = f"{lm['kind']}-LM", lm["data"], "T3 OOV" if lm["kind"] == "char" else "all"
            bug = f"concat {lm['bug_fraction']:.0%}" if lm.get("bug_fraction") else ""
        elif "gan" in config:
            gan = config["gan"]
            kind, data, selector = "GAN", gan["data"], gan["select"]
            bug = f"invert {gan['bug_fraction']:.0%}" if gan.get("bug_fraction") else ""
        elif "demo-data" in config:  # the demo's data stage: DP aggregates of device statistics
            kind, data, selector, bug = AGGREGATES, config["demo-data"]["data"], "all", ""
        else:
            raise ValueError("neither an LM, a GAN nor a DP-aggregates run")
        status = _read(run_dir, store.STATUS) or {}
        privacy = _read(run_dir, store.PRIVACY) or {}
        releases = list(privacy.get("releases", {}).values())
        release = store.training_release(privacy) or (releases[0] if len(releases) == 1 else {})
        memorization = _read(run_dir, store.MEMORIZATION)
        return RunSummary(relative, kind, data, selector, bug, status.get("state", "not started"),
                          int(status.get("rounds_completed", 0)), int(status.get("rounds", 0)),
                          release.get("epsilon"), release.get("delta"), bool(release.get("above_warning", False)),
                          _verdict(kind, _read(run_dir, store.ANALYSIS)),
                          "" if memorization is None else ("PASS" if memorization["verdict"]["passed"] else "FAIL"),
                          deployment_equivalent=release.get(deployment.RELEASE_KEY))
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as error:
        return RunSummary(relative, "?", broken=f"{type(error).__name__}: {error}")


def catalog(root: str) -> list[RunSummary]:
    return [summarize(root, relative) for relative in find_runs(root)]
