"""The privacy ledger: every DP release on a population, composed, and checked before it happens.

Every auxiliary model, DP quantile, DP count and DP vocabulary computed on the same users spends
those users' privacy (augenstein2020 App. A.2). The ledger is one append-only file in one place:
`$FEDGEN_DEBUG_LEDGER/ledger.jsonl`, by default `~/.fedgen-debug/ledger/ledger.jsonl`. It belongs to
the trusted server, like the run secret: whoever can point it elsewhere can also run code that
accounts for nothing.

- `spend(records)` composes the records with every earlier one of their population, refuses them all
  if a total would exceed its budget, and appends them, under a file lock. It is called before the
  release (a run charges all its releases, training's T rounds included, before computing any). It
  is idempotent by `release_id`: a resumed run finds its records (re-validated: same events, still
  within the budget) and charges nothing twice; the same id with other events is refused.
- Records are never removed: deleting a run directory refunds nothing.
- Populations are canonical keys (`fedgen_debug.data.spec.population_key`): the same users under
  another spelling, path or copy of the file are the same population.
- Budgets are entries of the same file (`set_budget`); without one a population gets
  `DEFAULT_BUDGET_EPSILON` at δ = 0.01/N. δ must be < 1/N.
- Each line carries the SHA-256 of the line before it, so an edited or reordered ledger is detected.

Line format: {"kind": "release", "record": {...}, "time": ..., "prev": ...} or
{"kind": "budget", "population": key or "*", "epsilon": E, "delta": D or null, ...}.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib
import json
import math
import os
import time

import dp_accounting

from fedgen_debug.privacy.accounting import (ACCOUNTINGS, ADD_REMOVE, TIGHT, PrivacyGuarantee, check_delta,
                                             default_delta, epsilon_of_events)

LEDGER_ENV = "FEDGEN_DEBUG_LEDGER"
DEFAULT_HOME = os.path.join("~", ".fedgen-debug", "ledger")
LEDGER_FILE = "ledger.jsonl"
DEFAULT_BUDGET_EPSILON = 10.0
ALL_POPULATIONS = "*"


class PrivacyBudgetExceeded(ValueError):
    pass


class LedgerCorrupted(ValueError):
    pass


def ledger_home() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get(LEDGER_ENV) or DEFAULT_HOME))


def event_to_json(event: dp_accounting.DpEvent) -> dict:
    def convert(value):
        if hasattr(value, "_fields"):
            return {k: convert(getattr(value, k)) for k in value._fields}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        return value

    return convert(event.to_named_tuple())


def event_from_json(data: dict) -> dp_accounting.DpEvent:
    def convert(value):
        if isinstance(value, dict) and "class_name" in value:
            if not value["module_name"].startswith("dp_accounting"):
                raise ValueError(f"not a dp_accounting event: {value['module_name']}.{value['class_name']}")
            cls = getattr(importlib.import_module(value["module_name"]), value["class_name"])
            return cls(**{k: convert(v) for k, v in value.items() if k not in ("module_name", "class_name")})
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    return convert(data)


@dataclasses.dataclass(frozen=True)
class PrivacyRecord:
    """One DP release: its population, the events of the mechanism that released, and who released it.

    `extra_delta` is δ the mechanism spends outside the RDP accountant (the threshold of DP heavy
    hitters); the ledger subtracts it from the population's δ before converting RDP to ε."""

    population: str
    population_size: int
    accounting: str
    events: tuple
    label: str
    release_id: str
    extra_delta: float = 0.0
    source: str = ""

    def __post_init__(self):
        if self.accounting not in ACCOUNTINGS:
            raise ValueError(f"accounting must be one of {ACCOUNTINGS}. Found {self.accounting!r}.")
        if self.population_size < 1:
            raise ValueError(f"population_size must be >= 1. Found {self.population_size}.")
        if not self.release_id:
            raise ValueError("a privacy record needs a release_id.")
        if not 0.0 <= self.extra_delta < 1.0:
            raise ValueError(f"extra_delta must be in [0, 1). Found {self.extra_delta}.")

    def to_json(self) -> dict:
        return {"population": self.population, "population_size": self.population_size,
                "accounting": self.accounting, "label": self.label, "release_id": self.release_id,
                "extra_delta": self.extra_delta, "source": self.source,
                "events": [event_to_json(e) for e in self.events]}

    @classmethod
    def from_json(cls, data: dict) -> "PrivacyRecord":
        return cls(data["population"], int(data["population_size"]), data["accounting"],
                   tuple(event_from_json(e) for e in data["events"]), data.get("label", ""),
                   data["release_id"], float(data.get("extra_delta", 0.0)), data.get("source", ""))

    def guarantee(self, delta: float | None = None) -> PrivacyGuarantee:
        """(ε, δ) of this release alone, at δ = 0.01/N by default."""
        return composed_guarantee([self], delta if delta is not None else default_delta(self.population_size))


def composed_guarantee(records, delta: float) -> PrivacyGuarantee:
    """(ε, δ) of the composition of `records` (one population), extra δ included."""
    relations = {r.accounting == ADD_REMOVE for r in records}
    if len(relations) > 1:
        raise ValueError(f"population {records[0].population!r} mixes add/remove and replace-one records; their "
                         "neighbouring relations cannot be composed in one accountant.")
    accounting = records[0].accounting if len({r.accounting for r in records}) == 1 else "replace-one+paper"
    rdp_delta = delta - sum(r.extra_delta for r in records)
    relation = ADD_REMOVE if relations.pop() else "replace-one"
    if rdp_delta <= 0:
        return PrivacyGuarantee(math.inf, delta, TIGHT, accounting, math.nan)
    g = epsilon_of_events([e for r in records for e in r.events], rdp_delta, relation, TIGHT)
    return PrivacyGuarantee(g.epsilon, delta, TIGHT, accounting, g.optimal_order)


@dataclasses.dataclass(frozen=True)
class Budget:
    epsilon: float
    delta: float
    source: str     # "default", or the budget entry's population key ("*" for all)


@dataclasses.dataclass(frozen=True)
class PopulationTotal:
    population: str
    population_size: int
    releases: tuple[PrivacyRecord, ...]
    guarantee: PrivacyGuarantee
    budget: Budget

    def as_dict(self) -> dict:
        return {"population": self.population, "population_size": self.population_size,
                "releases": [{"label": r.label, "source": r.source, "release_id": r.release_id,
                              "epsilon_alone": r.guarantee(self.guarantee.delta).epsilon} for r in self.releases],
                **self.guarantee.as_dict(), "budget": dataclasses.asdict(self.budget)}


def _line_hash(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


class Ledger:
    def __init__(self, home: str | None = None):
        self.home = os.path.abspath(home) if home else ledger_home()
        self.path = os.path.join(self.home, LEDGER_FILE)

    # ---- file ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(self.home, exist_ok=True)
        with open(os.path.join(self.home, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def entries(self) -> list[dict]:
        """Every entry, oldest first; raises LedgerCorrupted if the chain of hashes is broken."""
        if not os.path.exists(self.path):
            return []
        entries, prev = [], ""
        with open(self.path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line:
                    continue
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    raise LedgerCorrupted(f"{self.path}:{number}: not a JSON line; the ledger was edited "
                                          "or cut short.") from None
                if entry.get("prev") != prev:
                    raise LedgerCorrupted(f"{self.path}:{number}: the chain of hashes is broken; lines were "
                                          "edited, removed or reordered.")
                prev = _line_hash(line)
                entries.append(entry)
        return entries

    def _append(self, entry: dict) -> None:
        entries = self.entries()
        prev = ""
        if entries:
            with open(self.path, encoding="utf-8") as f:
                last = [line.rstrip("\n") for line in f if line.strip()][-1]
            prev = _line_hash(last)
        line = json.dumps({**entry, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "prev": prev},
                          sort_keys=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    # ---- reading ---------------------------------------------------------------------------------

    def records(self, population: str | None = None) -> list[PrivacyRecord]:
        records = [PrivacyRecord.from_json(e["record"]) for e in self.entries() if e["kind"] == "release"]
        return [r for r in records if population is None or r.population == population]

    def populations(self) -> list[str]:
        return sorted({r.population for r in self.records()})

    def budget(self, population: str, population_size: int) -> Budget:
        """The latest budget set for `population`, else for all populations, else the default."""
        latest = {}
        for entry in self.entries():
            if entry["kind"] == "budget":
                latest[entry["population"]] = entry
        chosen = latest.get(population, latest.get(ALL_POPULATIONS))
        if chosen is None:
            return Budget(DEFAULT_BUDGET_EPSILON, default_delta(population_size), "default")
        delta = chosen["delta"] if chosen["delta"] is not None else default_delta(population_size)
        return Budget(float(chosen["epsilon"]), float(delta), chosen["population"])

    def total(self, population: str, *extra: PrivacyRecord) -> PopulationTotal:
        records = self.records(population) + list(extra)
        if not records:
            raise ValueError(f"the ledger has no release on population {population!r}.")
        size = max(r.population_size for r in records)
        budget = self.budget(population, size)
        check_delta(budget.delta, size)
        return PopulationTotal(population, size, tuple(records), composed_guarantee(records, budget.delta), budget)

    def totals(self) -> list[PopulationTotal]:
        return [self.total(p) for p in self.populations()]

    # ---- writing ---------------------------------------------------------------------------------

    def spend(self, records) -> dict[str, PopulationTotal]:
        """Charges `records` (one or several releases) to their populations, all or nothing, or raises
        PrivacyBudgetExceeded. Call it before releasing. Returns each population's new total."""
        records = [records] if isinstance(records, PrivacyRecord) else list(records)
        with self._locked():
            known = {r.release_id: r for r in self.records()}
            new = []
            for record in records:
                earlier = known.get(record.release_id)
                if earlier is None:
                    new.append(record)
                elif earlier.to_json()["events"] != record.to_json()["events"] or earlier.population != record.population:
                    raise ValueError(f"release {record.release_id} ({record.label}) is in the ledger with other "
                                     "events or another population; a resumed run must keep its configuration.")
            totals = {}
            for population in dict.fromkeys(r.population for r in records):
                extra = [r for r in new if r.population == population]
                total = self.total(population, *extra)
                self._check_budget(total, extra[0] if extra else records[0], resumed=not extra)
                totals[population] = total
            for record in new:
                self._append({"kind": "release", "record": record.to_json()})
            return totals

    @staticmethod
    def _check_budget(total: PopulationTotal, record: PrivacyRecord, resumed: bool) -> None:
        if not total.guarantee.epsilon <= total.budget.epsilon:
            where = "the default budget" if total.budget.source == "default" else \
                f"the budget set for {total.budget.source!r}"
            action = "This release's record is in the ledger, but the budget no longer covers" if resumed else \
                "Refusing"
            raise PrivacyBudgetExceeded(
                f"population {total.population!r}: {record.label or record.release_id} would bring the total to "
                f"ε = {total.guarantee.epsilon:.4g} at δ = {total.budget.delta:.3g}, over {where} "
                f"(ε = {total.budget.epsilon:g}) over {len(total.releases)} release(s) in all. {action} it. Deleting runs refunds nothing; raise the budget with "
                f"`fedgen-debug ledger budget` if the data owner agrees.")

    def set_budget(self, population: str, epsilon: float, delta: float | None = None, reason: str = "") -> None:
        """Sets the (ε, δ) budget of `population` ("*": every population without its own)."""
        if not epsilon > 0:
            raise ValueError(f"budget epsilon must be > 0. Found {epsilon}.")
        if delta is not None:
            check_delta(delta)
        with self._locked():
            self._append({"kind": "budget", "population": population, "epsilon": epsilon, "delta": delta,
                          "reason": reason})
