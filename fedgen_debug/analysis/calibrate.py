"""`fedgen-debug calibrate`: a calibration (`analysis.calibration`) from clean runs of one kind and one set of
training settings, with its false alarms measured on the same runs left out.

Replicate runs: the same users trained R ≥ 3 times with different secrets (`--seed` changes only the public
initialisation; each run draws its own secret), no bug in any. Every pair of runs on the same data, read by
the same primary model (a GAN's class mix and confidence are its primary's view), is a clean pair (R − 1
degrees of freedom; runs minus groups when several primaries split them). Runs on several sources of data
(3 or more runs each) calibrate each source apart: runs on one of them are later diagnosed against its own
noise, runs on other data against the widest per property (`calibration.envelope`, `Calibration.for_data`).
Selection pairs: K ≥ 3 clean pairs "A:B" of the two selections a diagnosis will compare (e.g. T4's high-
and low-accuracy runs), each trained with its own secret. Reads released artefacts only: sampling is post-processing, no ε.
"""

from __future__ import annotations

import dataclasses
import logging

from fedgen_debug.analysis import calibration as calibration_module
from fedgen_debug.analysis import calibration_store, diagnose
from fedgen_debug.progress import progress

log = logging.getLogger(__name__)


def build(run_dirs: list[str], pairs: list[tuple[int, int]] | None, pair_type: str, name: str,
          samples: int = 1000, seed: int = 0, description: str = "",
          supplement_to: calibration_module.Calibration | None = None) -> calibration_module.Calibration:
    """The calibration from `run_dirs` (indices into it as `pairs`; None: all pairs, replicate runs only).
    With `supplement_to`, that calibration `supplement`ed by these runs (their false alarms measured as the
    result diagnoses them)."""
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
    if pairs is None:   # replicates: runs of one source, read by one primary model (its class mix, confidence)
        primary = [calibration_store.primary_identity(d) for d in run_dirs]
        pairs = [(i, j) for i, j in calibration_module.all_pairs(len(run_dirs), data) if primary[i] == primary[j]]
    pairs = list(pairs)
    calibration_module.check_one_source_per_pair(pairs, data)
    sides = {tuple(calibration_store.selections(run_dirs[a], run_dirs[b]) or ()) for a, b in pairs}
    if pair_type == "selection" and len(sides) != 1:
        raise ValueError(f"selection pairs must all compare the same two selections (A:B). Found {sorted(sides)}.")
    primaries = {calibration_store.primary_identity(run_dirs[r]) for pair in pairs for r in pair}
    if pair_type == "selection" and len(primaries) > 1:
        raise ValueError(f"selection pairs must all be chosen by one primary model. Found "
                         f"{', '.join(sorted(p or 'the stand-in CNN' for p in primaries))}.")
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
    alarms_as_supplement = None if supplement_to is None else \
        calibration_module.false_alarms_left_out(rows, pair_type, kind, data, base=supplement_to)
    by_source = {source["data"]: {"degrees_of_freedom": source["degrees_of_freedom"],
                                  "properties": source.pop("properties")} for source in sources}
    for source in sources:
        source["runs"] = len({r for p in pairs if data[p[0]] == source["data"] for r in p})
        source["false_alarms"] = sum(d["alarm"] for d in alarms["details"] if d.get("data") == source["data"])
        source["tested"] = sum(d.get("data") == source["data"] for d in alarms["details"])
    log.info("calibration %s: %d clean pairs, %d degrees of freedom; left out, %d of %d pairs alarmed", name,
             len(pairs), dof, alarms["alarms"], alarms["pairs"])
    measured = calibration_module.Calibration(
        name=name, kind=kind, preset=settings[0]["preset"], pair_type=pair_type, properties=noise,
        degrees_of_freedom=dof,
        z_threshold=calibration_module.threshold_with_clean_pairs(len(next(iter(rows.values()))), alarms),
        source={"settings": settings[0], "data": ", ".join(sorted({d for d in data if d})) or None,
                **({"sources": sources} if len(sources) > 1 else {}),
                "runs": len(kept_dirs), "pairs": len(pairs), "samples": samples,
                **({"left_out_unhealthy": len(unhealthy)} if unhealthy else {}),
                "seed": seed, "description": description,
                # the modeler's model that chose the users (`calibration_store.selection_mismatch`); none: the stand-in
                **({"primary": next(iter(primaries))} if len(primaries) == 1 and None not in primaries else {}),
                **({"selections": list(next(iter(sides)))} if pair_type == "selection" else {})},
        false_alarms=alarms, by_source=by_source if len(by_source) > 1 else None)
    return measured if supplement_to is None else supplement(supplement_to, measured, alarms_as_supplement)


def supplement(base: calibration_module.Calibration, extra: calibration_module.Calibration,
               false_alarms: dict | None = None) -> calibration_module.Calibration:
    """`base` with the properties it does not hold taken from `extra`: clean runs at base's settings and of
    each of its sources, measured after it (for a property the tool added since). Base's own properties
    keep their noise; each added one keeps extra's, from extra's pairs and degrees of freedom (its own
    upper bound); the threshold counts every property now held (and stays at least base's clean pairs' own),
    so base's measured false alarms stay an upper bound. `false_alarms`: extra's clean pairs diagnosed as the
    result would (`build`).
    `source["supplements"]` lists what came from where."""
    for field in ("kind", "preset", "pair_type"):
        if getattr(base, field) != getattr(extra, field):
            raise ValueError(f"a supplement must be of the same {field} as {base.name}. Found "
                             f"{getattr(extra, field)}, not {getattr(base, field)}.")
    if base.source.get("settings") != extra.source.get("settings"):
        raise ValueError(f"a supplement must be trained at {base.name}'s settings {base.source.get('settings')}. "
                         f"Found {extra.source.get('settings')}.")
    base_sources = list(base.by_source or [base.source.get("data")])
    extra_sources = list(extra.by_source or [extra.source.get("data")])
    matched = {calibration_module.matching_source([b for b in base_sources if b], e): e for e in extra_sources}
    if set(matched) != set(base_sources):
        raise ValueError(f"a supplement needs clean runs of each of {base.name}'s sources of data, and of no "
                         f"other: {', '.join(map(str, base_sources))}. Found {', '.join(map(str, extra_sources))}.")
    added = sorted(set(extra.properties) - set(base.properties))
    if not added:
        raise ValueError(f"{extra.name} holds no property that {base.name} does not already hold.")

    def own(source):
        return extra.by_source[source]["properties"] if extra.by_source else extra.properties

    properties = {**base.properties, **{name: extra.properties[name] for name in added}}
    by_source = None if base.by_source is None else {
        source: {"degrees_of_freedom": held["degrees_of_freedom"],
                 "properties": {**held["properties"], **{name: own(matched[source])[name] for name in added}}}
        for source, held in base.by_source.items()}
    record = {"properties": added, "data": extra.source.get("data"), "runs": extra.source.get("runs"),
              "pairs": extra.source.get("pairs"), "degrees_of_freedom": extra.degrees_of_freedom,
              "description": extra.source.get("description", ""),
              **({} if false_alarms is None else {"false_alarms": {k: false_alarms[k] for k in
                                                                    ("pairs", "alarms", "rate_upper_95")}})}
    return dataclasses.replace(
        base, properties=properties, by_source=by_source,
        z_threshold=calibration_module.threshold_with_clean_pairs(len(properties), base.false_alarms),
        source={**base.source, "supplements": [*base.source.get("supplements", []), record]})


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
