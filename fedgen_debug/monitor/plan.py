"""A monitoring plan (`fedgen-debug monitor --plan PLAN`, issue 14): what to watch, how often, with which
auxiliaries, under which budget and alert rules. TOML or JSON with the same keys:

    data = "synthetic-images:writers=100,seed=0"
    periods = 12
    rounds_per_period = 20
    rollout = "invert:3=0.05,4=0.2,5=0.5,8=0"     # simulation only: the bug's schedule
    cadence = "24h"                               # --every overrides; absent: periods back to back
    seed = 0
    first_period_rounds = 100                     # period 1 starts from scratch (later ones warm-start)
    samples = 1000                                # per auxiliary and period, for the signals
    primary = "model.keras"                       # GAN: the users' primary model, as `train-gan --primary` takes it
    primary_background = "white"                  # ... and its contract (`models.primary`): "black" for MNIST's
    primary_output = "auto"                       #     pixels; "logits" | "probabilities"; scale 1 or 255
    primary_scale = 1
    [fleet]                                       # each section's keys on lines of their own in TOML:
    initial = 0.8, join_rate = 0.1, leave_rate = 0.05, window = 0.25
    [privacy]    noise_multiplier, clients_per_round, clip
    [budget]     epsilon                          # the population's; δ is the ledger's default
    [alerts]     persistence = 2, window = 3, calibration_periods = 3
    [[auxiliaries]]  kind = "gan", select = "by-user-accuracy:low", preset = "demo"   (one table each)
                     warm_start = "previous" | "last-clean"   (default: GAN previous, LMs last-clean)
                     vocab = "file:PATH" | "public:SPEC" | "dp"  (LMs; the train commands' --vocab; default:
                     the data's public stand-in for synthetic text, else DP heavy hitters, which a word-LM
                     cannot use: its vocabulary must stay the same from period to period)

(docs/monitoring.md has a complete TOML plan; a test loads it.)
Frozen and validated on load: an unknown key, a missing one or a bad value is refused with its name.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib

from fedgen_debug.data.fleet import FleetConfig
from fedgen_debug.data.spec import parse_data_spec
from fedgen_debug.device.rollout import parse_rollout
from fedgen_debug.training.presets import DEFAULT_PRESET, PRESET_NAMES
from fedgen_debug.validation import check_at_least, check_in_range, check_non_negative, check_one_of, check_positive

KINDS = ("gan", "char-lm", "word-lm")
# Where a period's training starts: the previous period's model, or the last period whose signals were
# all within their thresholds (runner.Monitor._start). LMs default to the latter: a warm-started LM keeps
# generating the glued words it learned (measured: 10% glued, the space mass stayed 2-4x its clean
# threshold for 4 periods after the fix), so an alert could not clear; from the last clean model each
# period's signal shows that period's data. GANs keep "previous" (their fleets were measured so, with the
# restart rule for a GAN that went bad).
WARM_STARTS = ("previous", "last-clean")


def default_warm_start(kind: str) -> str:
    return "previous" if kind == "gan" else "last-clean"


_CADENCE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def cadence_seconds(text: str) -> float:
    """"24h", "30m", "90s", "1d" → seconds."""
    number, unit = text[:-1], text[-1:]
    try:
        seconds = float(number) * _CADENCE_UNITS[unit]
    except (KeyError, ValueError):
        raise ValueError(f"cadence must look like 24h, 30m, 90s or 1d. Found {text!r}.") from None
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"cadence must be > 0. Found {text!r}.")
    return seconds


@dataclasses.dataclass(frozen=True)
class Auxiliary:
    kind: str
    select: str = "random"      # GAN: a selector (`fedgen-debug selectors`); LMs train on T3's OOV words / all
    preset: str = DEFAULT_PRESET
    warm_start: str | None = None   # WARM_STARTS; None: the kind's default (default_warm_start)
    vocab: str | None = None        # LMs: "file:PATH" | "public:SPEC" | "dp"; None: the data's default source

    def __post_init__(self):
        check_one_of("auxiliaries: kind", self.kind, KINDS)
        if self.kind == "gan" and self.vocab is not None:
            raise ValueError("auxiliaries: vocab is for LM auxiliaries; a gan has none.")
        if self.warm_start is None:
            object.__setattr__(self, "warm_start", default_warm_start(self.kind))
        check_one_of("auxiliaries: warm_start", self.warm_start, WARM_STARTS)
        check_one_of("auxiliaries: preset", self.preset, PRESET_NAMES)
        if self.kind == "gan":
            from fedgen_debug.selectors.registry import parse_selector

            parse_selector(self.select)

    @property
    def name(self) -> str:
        """A directory name: gan-by-user-accuracy-low, char-lm."""
        if self.kind != "gan":
            return self.kind
        return "gan-" + "".join(c if c.isalnum() else "-" for c in self.select).strip("-")


@dataclasses.dataclass(frozen=True)
class PrivacyPlan:
    noise_multiplier: float
    clients_per_round: int
    clip: float

    def __post_init__(self):
        check_non_negative("privacy: noise_multiplier", self.noise_multiplier)
        check_at_least("privacy: clients_per_round", self.clients_per_round, 1)
        check_positive("privacy: clip", self.clip)


@dataclasses.dataclass(frozen=True)
class AlertPlan:
    persistence: int = 2           # an alert needs the signal past its threshold in `persistence` ...
    window: int = 3                # ... of the last `window` periods
    calibration_periods: int = 3   # thresholds come from these first (clean) periods

    def __post_init__(self):
        check_in_range("alerts: persistence", self.persistence, 1, self.window, note=f"window = {self.window}")
        check_at_least("alerts: calibration_periods", self.calibration_periods, 2)


@dataclasses.dataclass(frozen=True)
class MonitorPlan:
    data: str
    periods: int
    rounds_per_period: int
    auxiliaries: tuple[Auxiliary, ...]
    privacy: PrivacyPlan
    budget_epsilon: float
    fleet: FleetConfig = FleetConfig()
    alerts: AlertPlan = AlertPlan()
    rollout: str | None = None
    cadence: str | None = None
    seed: int = 0
    first_period_rounds: int | None = None   # period 1 trains from scratch: more rounds (default: the same)
    samples: int = 1000                      # samples drawn per auxiliary and period for the signals
    primary: str | None = None               # GAN: the users' model (`models.primary`) or a primary CNN's .npz;
                                             # default: a CNN trained on public data
    primary_background: str = "white"        # the model file's contract (`models.primary.PrimaryContract`)
    primary_output: str = "auto"
    primary_scale: float = 1.0

    def __post_init__(self):
        parse_data_spec(self.data)
        check_at_least("periods", self.periods, 1)
        check_at_least("rounds_per_period", self.rounds_per_period, 1)
        if self.first_period_rounds is not None:
            check_at_least("first_period_rounds", self.first_period_rounds, 1)
        check_at_least("samples", self.samples, 10)
        try:   # the contract's values; the model itself is loaded by `monitor.inputs.check_inputs`
            object.__setattr__(self, "primary_scale", float(self.primary_scale))
            self.primary_contract()
        except (TypeError, ValueError) as error:
            raise ValueError(f"primary_{error}") from None
        if self.primary is not None:
            if not any(a.kind == "gan" for a in self.auxiliaries):
                raise ValueError("primary: the plan has no GAN auxiliary to use a primary model.")
            if not os.path.exists(self.primary):
                raise ValueError(f"primary: no such file or model directory {self.primary!r}.")
        modality = parse_data_spec(self.data).modality
        for auxiliary in self.auxiliaries:
            needs = "images" if auxiliary.kind == "gan" else "text"
            if modality != needs:
                raise ValueError(f"auxiliaries: a {auxiliary.kind} needs {needs} data. Found {self.data!r}.")
        from fedgen_debug.device.lm_data import DP_VOCABULARY, check_vocabulary_source

        for auxiliary in (a for a in self.auxiliaries if a.kind != "gan"):
            source = self.vocab_source(auxiliary)
            check_vocabulary_source(source, self.data)
            if auxiliary.kind == "word-lm" and source == DP_VOCABULARY:
                raise ValueError(f"auxiliaries: a word-LM is warm-started from period to period, so its vocabulary "
                                 f"must stay the same; give it vocab = \"file:PATH\" (the users' model's own "
                                 f"vocabulary) or \"public:SPEC\" ({self.data} has no public one), or use a char-LM.")
        if not self.auxiliaries:
            raise ValueError("auxiliaries: the plan needs at least one.")
        if len({a.name for a in self.auxiliaries}) != len(self.auxiliaries):
            raise ValueError(f"auxiliaries: each must differ. Found {[a.name for a in self.auxiliaries]}.")
        check_positive("budget: epsilon", self.budget_epsilon, allow_inf=True)
        if self.alerts.calibration_periods >= self.periods:
            raise ValueError(f"alerts: calibration_periods ({self.alerts.calibration_periods}) must be fewer than "
                             f"periods ({self.periods}).")
        if self.rollout is not None:
            rollout = parse_rollout(self.rollout, self.seed)
            kinds = {"invert": {"gan"}, "concat": {"char-lm", "word-lm"}}[rollout.bug]
            if not any(a.kind in kinds for a in self.auxiliaries):
                raise ValueError(f"rollout: {rollout.bug} needs a {' or '.join(sorted(kinds))} auxiliary.")
        if self.cadence is not None:
            cadence_seconds(self.cadence)

    def vocab_source(self, auxiliary: Auxiliary) -> str:
        """An LM auxiliary's vocabulary source: its own, or the data's default (`lm_data`)."""
        from fedgen_debug.device.lm_data import default_vocabulary_source

        return auxiliary.vocab if auxiliary.vocab is not None else default_vocabulary_source(self.data)

    def primary_contract(self):
        from fedgen_debug.models.primary import PrimaryContract

        return PrimaryContract(self.primary_background, self.primary_output, self.primary_scale)

    def rounds(self, period: int, *, from_scratch: bool = False) -> int:
        """Rounds trained in `period` (1-based): `first_period_rounds` when the auxiliary starts from
        scratch (period 1, or after a period in which it had not learned its data)."""
        fresh = period == 1 or from_scratch
        return self.first_period_rounds if fresh and self.first_period_rounds else self.rounds_per_period

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


_SECTIONS = {"fleet": FleetConfig, "alerts": AlertPlan}


def _only(section: str, given: dict, allowed) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"{section}: unknown key(s) {', '.join(unknown)}; expected some of {', '.join(allowed)}.")


# What a plan's value must be, by its field's annotation ("int | None": an int, or null in JSON).
_VALUE_TYPES = {"int": ((int,), "an integer"), "float": ((int, float), "a number"), "str": ((str,), "a string")}


def _checked_type(section: str, name: str, annotation: str, value) -> None:
    optional = annotation.endswith(" | None")
    expected = _VALUE_TYPES.get(annotation.removesuffix(" | None"))
    if expected is None or (optional and value is None):
        return
    types, words = expected
    if isinstance(value, bool) or not isinstance(value, types):
        raise ValueError(f"{section}: {name} must be {words}. Found {value!r}.")


def _build(section: str, cls, given, **fixed):
    """`cls(**given, **fixed)` with an unknown or missing key, or a value of the wrong type, refused by name (the
    section's name leads every message: [fleet] and [alerts] both have a `window`)."""
    if not isinstance(given, dict):
        raise ValueError(f"{section}: must be a table of keys. Found {given!r}.")
    _only(section, given, [f.name for f in dataclasses.fields(cls) if f.name not in fixed])
    for field in dataclasses.fields(cls):
        if field.name in given:
            _checked_type(section, field.name, str(field.type), given[field.name])
        elif field.name not in fixed and field.default is dataclasses.MISSING \
                and field.default_factory is dataclasses.MISSING:
            raise ValueError(f"{section}: missing {field.name}.")
    try:
        return cls(**given, **fixed)
    except ValueError as error:   # the plan's own checks name their keys ("budget: epsilon ...")
        message = str(error)
        raise ValueError(message if section == "plan" or message.startswith(section) else f"{section}: {message}") \
            from None


def plan_from_dict(raw: dict) -> MonitorPlan:
    fields = [f.name for f in dataclasses.fields(MonitorPlan)]
    top = {k: v for k, v in raw.items() if k not in ("budget",)}
    _only("plan", top, [f for f in fields if f != "budget_epsilon"] + ["budget"])
    missing = [k for k in ("data", "periods", "rounds_per_period", "auxiliaries", "privacy", "budget") if k not in raw]
    if missing:
        raise ValueError(f"plan: missing {', '.join(missing)}.")
    values = dict(top)
    if not isinstance(raw["budget"], dict):
        raise ValueError(f"budget: must be a table of keys ([budget] epsilon = ...). Found {raw['budget']!r}.")
    _only("budget", raw["budget"], ["epsilon"])
    _checked_type("budget", "epsilon", "float", raw["budget"].get("epsilon"))
    values["budget_epsilon"] = float(raw["budget"]["epsilon"])
    values["privacy"] = _build("privacy", PrivacyPlan, raw["privacy"])
    if not isinstance(raw["auxiliaries"], list):
        raise ValueError("auxiliaries: must be a list of tables ([[auxiliaries]] in TOML).")
    values["auxiliaries"] = tuple(_build("auxiliaries", Auxiliary, entry) for entry in raw["auxiliaries"])
    for section, cls in _SECTIONS.items():
        if section in raw:
            values[section] = _build(section, cls, raw[section],
                                     **({"seed": raw.get("seed", 0)} if cls is FleetConfig else {}))
        elif cls is FleetConfig:
            values[section] = FleetConfig(seed=raw.get("seed", 0))
    built = ("privacy", "auxiliaries", "budget_epsilon", *_SECTIONS)   # checked above, section by section
    return _build("plan", MonitorPlan, {k: v for k, v in values.items() if k not in built},
                  **{k: v for k, v in values.items() if k in built})


def _beside(base: str, path: str) -> str:
    return path if not path or os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def _spec_beside(base: str, text: str) -> str:
    """A data spec with its file (npz, jsonl, play) or cache directory read beside the plan; a spec that
    does not parse is left for the plan's own check to refuse."""
    from fedgen_debug.device.lm_data import FILE_PREFIX, PUBLIC_PREFIX

    if text.startswith(PUBLIC_PREFIX):
        return PUBLIC_PREFIX + _spec_beside(base, text[len(PUBLIC_PREFIX):])
    if text.startswith(FILE_PREFIX):
        return FILE_PREFIX + _beside(base, text[len(FILE_PREFIX):])
    try:
        spec = parse_data_spec(text)
    except ValueError:
        return text
    return str(dataclasses.replace(spec, path=_beside(base, spec.path))) if spec.path else text


def paths_beside_plan(raw: dict, base: str) -> dict:
    """The plan's relative paths (the data's file, `primary`, an LM's vocabulary file or public data) read
    from the plan's directory `base`, as a plan file says where its neighbours are: resumed from another
    working directory, a plan must not find other data or none."""
    raw = dict(raw)
    if isinstance(raw.get("data"), str):
        raw["data"] = _spec_beside(base, raw["data"])
    if isinstance(raw.get("primary"), str):
        raw["primary"] = _beside(base, raw["primary"])
    if isinstance(raw.get("auxiliaries"), list):
        raw["auxiliaries"] = [
            {**a, "vocab": _spec_beside(base, a["vocab"])} if isinstance(a, dict) and isinstance(a.get("vocab"), str)
            else a for a in raw["auxiliaries"]]
    return raw


def stored_plan_read_here(stored: dict | None, plan: dict, working_directory: str) -> dict | None:
    """A monitor's stored plan (`to_json`) with its relative paths read from `working_directory`, when that
    makes it `plan` (up to `periods`, which a resumed monitor may change); else None. A monitor started before
    plans read their paths beside the plan file (2026-12-07) stored them as written and read them from its
    working directory: read from here, they are the files it would have read on resuming here, so the same plan
    resumes instead of being refused as another plan."""
    if not stored:
        return None
    read_here = paths_beside_plan(stored, working_directory)
    if read_here == stored or {**read_here, "periods": plan["periods"]} != plan:
        return None
    return read_here


def load_plan(path: str) -> MonitorPlan:
    """A plan from a .toml or .json file, its relative paths read beside it (`paths_beside_plan`); every
    problem is a ValueError naming the file."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such plan file.")
    if not path.endswith((".toml", ".json")):
        raise ValueError(f"{path}: a plan is a .toml or a .json file.")
    with open(path, "rb") as f:
        try:
            raw = tomllib.load(f) if path.endswith(".toml") else json.load(f)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: not {'TOML' if path.endswith('.toml') else 'JSON'} ({error}).") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a plan is a table of keys.")
    try:
        return plan_from_dict(paths_beside_plan(raw, os.path.dirname(os.path.abspath(path))))
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
