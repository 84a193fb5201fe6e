"""`fedgen-debug calibrate`: a calibration (`analysis.calibration`) from clean runs of one kind and one set of
training settings, with its false alarms measured on the same runs left out.

Replicate runs: the same users trained R ≥ 3 times with different secrets (`--seed` changes only the public
initialisation; each run draws its own secret), no bug in any. Every pair of runs on the same data is a
clean pair (R − 1 degrees of freedom). Runs on several sources of data (3 or more runs each) calibrate each
source apart: runs on one of them are later diagnosed against its own noise, runs on other data against
the widest per property (`calibration.envelope`, `Calibration.for_data`). Selection pairs: K ≥ 3 clean
pairs "A:B" of the two selections a diagnosis will compare (e.g. T4's high- and low-accuracy runs), each
trained with its own secret. Reads released artefacts only: sampling is post-processing, no ε.
"""

from __future__ import annotations

import logging

from fedgen_debug.analysis import calibration as calibration_module
from fedgen_debug.analysis import calibration_store, diagnose
from fedgen_debug.progress import progress

log = logging.getLogger(__name__)


def build(run_dirs: list[str], pairs: list[tuple[int, int]] | None, pair_type: str, name: str,
          samples: int = 1000, seed: int = 0, description: str = "") -> calibration_module.Calibration:
    """The calibration from `run_dirs` (indices into it as `pairs`; None: all pairs, replicate runs only)."""
    if len(run_dirs) < 3 and pairs is None:
        raise ValueError(f"calibrate needs 3 or more replicate runs. Found {len(run_dirs)}.")
    if pair_type == "selection" and pairs is None:
        raise ValueError("selection pairs must be given as pairs (A:B), not as a list of runs.")
    kinds = {diagnose.run_kind(d) for d in run_dirs}
    if len(kinds) != 1:
        raise ValueError(f"calibrate needs runs of one kind. Found {', '.join(sorted(kinds))}.")
    (kind,) = kinds
    settings = [calibration_store.training_settings(d) for d in run_dirs]
    if any(s != settings[0] for s in settings):
        raise ValueError(f"calibrate needs runs trained with the same settings. Found {settings}.")
    data = [calibration_store.run_data(d) for d in run_dirs]
    pairs = calibration_module.all_pairs(len(run_dirs), data) if pairs is None else list(pairs)
    calibration_module.check_one_source_per_pair(pairs, data)
    sides = {tuple(calibration_store.selections(run_dirs[a], run_dirs[b]) or ()) for a, b in pairs}
    if pair_type == "selection" and len(sides) != 1:
        raise ValueError(f"selection pairs must all compare the same two selections (A:B). Found {sorted(sides)}.")
    drawn = [diagnose.run_values(kind, d, samples, seed) for d in progress(run_dirs, desc="sampling runs", unit="run")]
    health = [diagnose.health(kind, run_samples) for _, run_samples in drawn]
    unhealthy = {i: h["reason"] for i, h in enumerate(health) if not h["healthy"]}
    for i, reason in unhealthy.items():
        log.warning("calibrate: %s left out, its auxiliary is unhealthy (%s)", run_dirs[i], reason)
    kept_dirs, (values, data), pairs = _healthy_only(run_dirs, [[v for v, _ in drawn], data], pairs, set(unhealthy),
                                                     pair_type)

    rows = {(i, j): diagnose.compare_values(kind, values[i], values[j]) for i, j in pairs}
    try:
        noise, dof, sources = calibration_module.estimate_by_source(rows, pair_type, data)
    except ValueError as e:
        raise ValueError(f"{e} Each source of data needs 3 or more healthy replicate runs (or selection pairs).") from e
    alarms = calibration_module.false_alarms_left_out(rows, pair_type, kind, data)
    by_source = {source["data"]: {"degrees_of_freedom": source["degrees_of_freedom"],
                                  "properties": source.pop("properties")} for source in sources}
    for source in sources:
        source["runs"] = len({r for p in pairs if data[p[0]] == source["data"] for r in p})
        source["false_alarms"] = sum(d["alarm"] for d in alarms["details"] if d.get("data") == source["data"])
        source["tested"] = sum(d.get("data") == source["data"] for d in alarms["details"])
    log.info("calibration %s: %d clean pairs, %d degrees of freedom; left out, %d of %d pairs alarmed", name,
             len(pairs), dof, alarms["alarms"], alarms["pairs"])
    return calibration_module.Calibration(
        name=name, kind=kind, preset=settings[0]["preset"], pair_type=pair_type, properties=noise,
        degrees_of_freedom=dof, z_threshold=calibration_module.threshold_for(len(next(iter(rows.values())))),
        source={"settings": settings[0], "data": ", ".join(sorted({d for d in data if d})) or None,
                **({"sources": sources} if len(sources) > 1 else {}),
                "runs": len(kept_dirs), "pairs": len(pairs), "samples": samples,
                **({"left_out_unhealthy": len(unhealthy)} if unhealthy else {}),
                "seed": seed, "description": description,
                **({"selections": list(next(iter(sides)))} if pair_type == "selection" else {})},
        false_alarms=alarms, by_source=by_source if len(by_source) > 1 else None)


def _healthy_only(run_dirs: list[str], per_run: list[list], pairs: list[tuple[int, int]], unhealthy: set[int],
                  pair_type: str) -> tuple[list[str], list[list], list[tuple[int, int]]]:
    """The runs, their entries in each list of `per_run`, and the pairs, without an unhealthy run. A GAN
    that diverged (no background, noise) is not training noise: `diagnose` never compares it (it answers
    "cannot tell"), and its properties would inflate τ for every pair (2 of 20 T4 GANs of 2026-12-04 made τ
    of the background speckle 10× the healthy runs')."""
    pairs = [p for p in pairs if not set(p) & unhealthy]
    kept = sorted({i for p in pairs for i in p})
    index = {old: new for new, old in enumerate(kept)}
    pairs = [(index[a], index[b]) for a, b in pairs]
    what, count = ("replicate runs", len(kept)) if pair_type == "replicate" else ("selection pairs", len(pairs))
    if count < 3:
        raise ValueError(f"calibrate needs 3 or more healthy {what}. Found {count}: {len(unhealthy)} of "
                         f"{len(run_dirs)} runs are unhealthy (`diagnose` says why). Train more clean runs.")
    return [run_dirs[i] for i in kept], [[entries[i] for i in kept] for entries in per_run], pairs
