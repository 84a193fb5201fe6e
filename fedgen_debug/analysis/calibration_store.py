"""Which calibration a diagnosis uses, and where calibrations live.

A calibration (`analysis.calibration`) holds for the training settings it was measured at: training noise
grows with the noise multiplier and shrinks with the clients per round and the rounds. Each records those
settings (`source["settings"]`, `training_settings`); a pair of runs uses the calibration measured at its
own settings for its kind and pair type. The tool ships calibrations for its presets (`SHIPPED_DIR`,
measured by `evaluation/any_bug.py` and `fedgen-debug calibrate`, see docs/analysis.md); a modeler with
other settings makes one from their own replicate runs (`fedgen-debug calibrate RUN RUN RUN ... --out F`) and
passes it with `--calibration F`; a calibration names the data it was measured on (`source["data"]`; with
several sources, each one's own noise in `by_source`): runs on one of its sources use that source's
noise, runs on other data the widest of them, and the diagnosis says so in its note. A selection pair given
the other way round (T4's low-accuracy run as A) uses its calibration with the offsets negated (`in_order`).
A selection pair (T4 or T2) chosen by another primary model or on other data, which no selection calibration holds for, gets the shipped
selection noise transferred to its own replicate noise (`transfer`, `selection_transfer`). Without one, a
diagnosis is calibrated against the samples' noise only and says so (`calibrated: false`).
"""

from __future__ import annotations

import glob
import json
import os

from fedgen_debug.analysis import image_properties, selection_transfer
from fedgen_debug.analysis.calibration import Calibration, matching_source
from fedgen_debug.runs import store

SHIPPED_DIR = os.path.join(os.path.dirname(__file__), "calibrations")
NONE = "none"
# Run options that change what the auxiliary draws and how it varies from training to training, with their
# defaults: a run that sets one is calibrated only by runs that set it alike (an EMA generator with bilinear
# upsampling draws legible FEMNIST letters where the preset alone draws blobs, docs/gan.md; a public
# initialisation pulls samples towards the public data). Defaults are left out of the settings, so runs at
# the defaults keep matching calibrations measured before these options existed.
MODEL_OPTIONS = {"cycle_client_data": False, "gen_ema": 0.0, "gen_upsample": "transpose", "d_step": "fixed",
                 "init": None}


def training_settings(run_dir: str) -> dict:
    """The settings a run's training noise depends on, from its released config (`MODEL_OPTIONS` under
    "options", when any is not at its default)."""
    config = store.released_config(run_dir)
    run = config.get("gan") or config.get("lm")
    training, dp = config["training"], config["training"]["dp"]

    def number(value):   # an adaptive clip has no fixed S: its quantile is the setting then
        return None if value is None else float(value)

    options = {name: run[name] for name, default in MODEL_OPTIONS.items() if run.get(name, default) != default}
    return {"preset": run["preset"], "rounds": int(training["rounds"]),
            "clients_per_round": int(dp["clients_per_round"]), "noise_multiplier": float(dp["noise_multiplier"]),
            "clip": number(dp.get("clip")) if dp.get("clip_quantile") is None else f"adaptive:{dp['clip_quantile']}",
            **({"options": options} if options else {})}


def run_data(run_dir: str) -> str | None:
    """The data spec a run trained on (its released config; None if it does not name one)."""
    config = store.read_config(run_dir) or {}
    return (config.get("gan") or config.get("lm") or {}).get("data")


def primary_identity(run_dir: str) -> str | None:
    """Which primary model a GAN run's selection and class mix read (its released `primary_cnn.json`): the
    name of the modeler's own model file, or None for the tool's stand-in CNN (and for an LM). A run given
    another run's `primary_cnn.npz` (`--primary`) reads what that run read: the same identity."""
    path = store.released(run_dir, store.PRIMARY_INFO)
    if not os.path.exists(path):
        return None
    info = store.read_json(path)
    return info.get("source") if "model_file" in info else None


def measured_specs(calibration: Calibration) -> list[str]:
    """The data specs a calibration was measured on: each of its sources', else its one `data` (none: unsaid)."""
    measured = calibration.source.get("data")
    return ([s["data"] for s in calibration.source.get("sources", []) if s.get("data")]
            or ([measured] if measured else []))


def selection_mismatch(calibration: Calibration, run_dirs) -> str | None:
    """Why a selection calibration does not hold for these runs, or None. Its offsets are how two selections
    of users differ without a bug (T4's low-accuracy writers draw otherwise than its high-accuracy ones, and the
    primary model sees another class mix in them); they belong to the data and the primary model that chose
    the users, so on other data or with another model nothing says how far apart clean pairs would be."""
    if calibration.pair_type != "selection":
        return None
    measured = measured_specs(calibration)
    used = [run_data(d) for d in run_dirs]
    if measured and not all(matching_source(measured, d) for d in used):
        return (f"{calibration.name} measured how these two selections differ without a bug on "
                f"{', '.join(measured)}; these runs train on {', '.join(sorted({d or '?' for d in used}))}")
    primaries = {primary_identity(d) for d in run_dirs}
    expected = calibration.source.get("primary")
    if primaries != {expected}:
        def name(p):
            return "the tool's stand-in CNN" if p is None else f"your model {p}"
        return (f"{calibration.name} measured how these two selections differ without a bug with {name(expected)} "
                f"choosing the users; these runs use {', '.join(sorted(map(name, primaries)))}")
    return None


def data_note(calibration: Calibration, run_dirs) -> str | None:
    """A note when the runs train on data `calibration` did not measure (`calibration.matching_source`: the
    same spec, or the tool's same synthetic generator): training noise depends on the data as well as on
    the settings (docs/analysis.md). None when the calibration does not say what it was measured on."""
    measured, specs = calibration.source.get("data"), measured_specs(calibration)
    used = sorted({d for d in map(run_data, run_dirs) if d})
    if not specs or not used or all(matching_source(specs, d) for d in used):
        return None
    widest = f", the widest noise of its {len(specs)} sources used" if len(specs) > 1 else ""
    return (f"calibration measured on {measured}{widest}, each property's noise at least its relative noise times "
            f"these samples' spread; these runs train on {', '.join(used)}: training noise depends on the data "
            "too, and data none of the sources is can be noisier (on a third source, 9 of 28 clean GAN pairs and "
            "7 of 66 word-LM pairs still alarmed, docs/analysis.md); for one that fits, `fedgen-debug calibrate` "
            "3 or more clean replicate runs of this data (with the shipped runs' sources if you like)")


def for_runs(calibration: Calibration, run_dirs) -> tuple[Calibration, str | None]:
    """(the calibration narrowed to the runs' source when it measured several and the runs train on one of
    them (`Calibration.for_data`), a note on the data)."""
    narrowed, source = calibration.for_data([run_data(d) for d in run_dirs])
    return narrowed, (None if source is not None else data_note(calibration, run_dirs))


def _joined(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def selections(run_a: str, run_b: str) -> list[str] | None:
    """The two sides' selectors of a GAN pair, A's first (a selection calibration holds for these only, in
    either order (`in_order`): T4's high/low pairs and T2's correct/misclassified pairs have other offsets);
    None for LMs."""
    configs = [store.read_config(d) for d in (run_a, run_b)]
    if not all("gan" in c for c in configs):
        return None
    return [c["gan"]["select"] for c in configs]


def load(path: str) -> Calibration:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read calibration {path}: {e}") from e
    return Calibration.from_json(data)


def save(calibration: Calibration, path: str) -> None:
    store.write_json(path, calibration.to_json())


def named(option: str) -> Calibration:
    """A calibration file, or the shipped calibration of that name."""
    if os.path.exists(option):
        return load(option)
    found = [c for c in shipped() if c.name == option]
    if not found:
        raise ValueError(f"no calibration file {option!r} and no shipped calibration of that name. Shipped: "
                         f"{', '.join(c.name for c in shipped())}.")
    return found[0]


def shipped() -> list[Calibration]:
    return [load(p) for p in sorted(glob.glob(os.path.join(SHIPPED_DIR, "*.json")))]


def choose(option: str | None, kind: str, pair: str, run_a: str, run_b: str) -> tuple[Calibration | None, str | None]:
    """(the calibration for this pair or None, a note for the report). `option`: a file, "none" (samples'
    noise only) or None: the shipped calibration measured at both runs' settings, if any; for a selection pair
    none holds for, the shipped selection noise transferred (`transfer`); else, for a selection pair, the
    replicate calibration at its settings, whose differences are candidates only (`diagnose.answer`)."""
    if option == NONE:
        return None, "calibration switched off (--calibration none): sampling noise only"
    settings = [training_settings(d) for d in (run_a, run_b)]
    sides = selections(run_a, run_b)
    if option is not None:
        calibration = load(option)
        if calibration.kind != kind:
            raise ValueError(f"calibration {option} is for {calibration.kind} runs; these are {kind} runs.")
        measured = calibration.source.get("settings")
        note = None if measured in settings else (f"calibration measured at {measured}, these runs use "
                                                  f"{settings[0]}: training noise differs with the settings")
        calibration, order = in_order(calibration, sides)
        calibration, data = for_runs(calibration, (run_a, run_b))
        return calibration, _joined(note, order, data)
    if settings[0] != settings[1]:
        return None, (f"the two runs were trained with different settings ({settings[0]} vs {settings[1]}); "
                      "no calibration: sampling noise only")
    calibrations = [c for c in shipped() if c.kind == kind]
    same_pairs = [c for c in calibrations if c.pair_type == pair
                  and (pair == "replicate" or c.source.get("selections") in (sides, sides[::-1]))]
    mismatches = []
    for c in same_pairs:
        if c.source.get("settings") == settings[0]:
            mismatch = selection_mismatch(c, (run_a, run_b))
            if mismatch is None:
                c, order = in_order(c, sides)
                calibration, data = for_runs(c, (run_a, run_b))
                return calibration, _joined(order, data)
            mismatches.append(mismatch)
    hint = _joined(*mismatches, elsewhere(same_pairs, settings[0]))
    if sides is not None and len(set(sides)) == 2:   # two selections: their noise may be transferred
        users = [selected_users(d) for d in (run_a, run_b)]
        few = [u for u in users if u is not None and u < MIN_TRANSFER_USERS]
        transferred = None if few or None in users else transfer(calibrations, sides, settings[0], run_a, run_b)
        if transferred is not None:
            calibration, note = transferred
            return calibration, _joined(*mismatches, note)
        if few:
            hint = _joined(hint, f"a side holds about {min(few):.0f} users: under {MIN_TRANSFER_USERS}, a selection's "
                                 "noise is not transferred (too few users for a GAN to vary as measured)")
    matching = [c for c in calibrations if c.pair_type == "replicate" and c.source.get("settings") == settings[0]]
    if matching:   # a selection pair with only replicate pairs at its settings: candidates only (diagnose.answer)
        calibration, data = for_runs(matching[0], (run_a, run_b))
        where = "for these runs" if mismatches else "at these settings"
        return calibration, _joined(f"no clean pairs of these selections ({' vs '.join(sides or [])}) measured {where}"
                                    ": calibrated against replicate pairs' training noise only; two "
                                    "selections are different users and also differ in style without a bug", hint, data)
    where = "holds for these runs" if mismatches else "measured at these settings"
    pairs = " (clean pairs of these selections: `--pairs A:B ...`)" if sides else ""
    described = ", ".join(f"{k} {v}" for k, v in settings[0].items())   # "preset demo, rounds 150, ..."
    return None, _joined(f"no calibration {where} ({described}): sampling noise only; make one with "
                         f"`fedgen-debug calibrate` from 3 or more replicate runs{pairs}", hint)


# Properties whose clean-pair value is a distance (≥ 0, the same in either order): the class mix's.
DISTANCES = tuple(p.name for p in image_properties.CLASSIFIER_PROPERTIES if p.family == "class_mix")


def in_order(calibration: Calibration, sides: list[str] | None) -> tuple[Calibration, str | None]:
    """(the calibration for a pair whose A and B are `sides`, a note when it was measured in the other order).
    A selection pair given B first (T4's low-accuracy run as A) is the same clean pairs' noise with each offset
    negated (`Calibration.other_order`), not a pair nobody measured: without this it would get the wider
    transferred noise, or none."""
    measured = calibration.source.get("selections")
    if calibration.pair_type != "selection" or not sides or len(set(sides)) != 2 or measured != sides[::-1]:
        return calibration, None
    return calibration.other_order(DISTANCES), (
        f"{calibration.name} was measured with A {measured[0]} and B {measured[1]}; these runs are the other way "
        "round, so its offsets are negated (the class mix's distance is kept)")


def _without(settings: dict, *keys: str) -> dict:
    return {k: v for k, v in settings.items() if k not in keys}


# The fewest users (the released DP count) a side may hold for the transfer: it was measured on selections of
# 23-110 FEMNIST writers and about 25 synthetic ones; clean T4 pairs on scikit-learn's digits whose low-accuracy
# side held 7-14 users (a 98%-accurate model) alarmed in 4 of 4 (a GAN on a handful of users draws a few
# shapes again and again: quarter_turn_match +4 to +5), docs/analysis.md, 2026-12-07 (later).
MIN_TRANSFER_USERS = 20


def selected_users(run_dir: str) -> float | None:
    """The users a GAN run's selection holds, as released (a DP count; None when not released)."""
    path = store.released(run_dir, store.POPULATION)
    return store.read_json(path).get("users") if os.path.exists(path) else None


def transfer(calibrations, sides: list[str], settings: dict, run_a: str, run_b: str
             ) -> tuple[Calibration, str] | None:
    """(a selection calibration for a pair none holds for, a note) or None (`selection_transfer`): a shipped
    selection calibration of these two selections, in either order, at these settings up to the generator
    options; its reference, the replicate calibration of its data at its settings up to the rounds; and the
    replicate calibration for these runs: the reference's settings with the runs' generator options. `choose`
    calls it only when each side holds `MIN_TRANSFER_USERS` or more."""
    def measured_at(c: Calibration) -> dict:
        return c.source.get("settings") or {}

    replicates = [c for c in calibrations if c.pair_type == "replicate"]
    for selection in (c for c in calibrations if c.pair_type == "selection"
                      and sorted(c.source.get("selections") or []) == sorted(sides)
                      and _without(measured_at(c), "options") == _without(settings, "options")):
        data = selection.source.get("data")
        for reference in (c for c in replicates
                          if _without(measured_at(c), "rounds") == _without(measured_at(selection), "rounds")):
            source = matching_source(measured_specs(reference), data)
            if source is None:
                continue
            narrowed, _ = reference.for_data([data])
            options = {"options": settings["options"]} if "options" in settings else {}
            for replicate in (c for c in replicates if measured_at(c) == {**measured_at(reference), **options}):
                own, data_note_ = for_runs(replicate, (run_a, run_b))
                calibration = selection_transfer.selection_from_replicate(selection, narrowed, own)
                low, high = _ratio_range(selection, narrowed)
                return calibration, _joined(
                    f"selection noise transferred: {replicate.name}'s replicate noise for these runs, times how much "
                    f"more clean pairs of these selections varied than replicate pairs where both were measured "
                    f"({selection.name} against {reference.name} on {source}: {low:.1f}-{high:.1f}x), their offsets "
                    f"counted as noise; what the primary model reads ({', '.join(selection_transfer.MODEL_READ)}) is "
                    "not called (docs/analysis.md, 2026-12-07)", data_note_)
    return None


def _ratio_range(selection: Calibration, reference: Calibration) -> tuple[float, float]:
    ratios = [selection_transfer.noise_ratio(noise, reference.properties[name])
              for name, noise in selection.properties.items()
              if name in reference.properties and name not in selection_transfer.MODEL_READ]
    ratios = [r for r in ratios if r != float("inf")]
    return min(ratios), max(ratios)


def elsewhere(calibrations, settings: dict) -> str | None:
    """Where the shipped calibrations of this pair type were measured, when not at `settings`: the settings that
    differ, so a modeler can train at a calibrated setting instead (e.g. T4 pairs at the demo's 150 rounds)."""
    hints = []
    for c in calibrations:
        measured = c.source.get("settings") or {}
        differ = sorted(k for k in {*measured, *settings} if measured.get(k) != settings.get(k))
        if differ:
            hints.append(f"{c.name} at " + ", ".join(f"{k} {measured.get(k, 'default')} (these runs: "
                                                     f"{settings.get(k, 'default')})" for k in differ))
    return ("shipped calibrations of this pair type were measured elsewhere: " + "; ".join(hints)) if hints else None
