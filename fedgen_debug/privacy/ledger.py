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
- Populations are their users (`privacy.populations`): keyed tags of the user ids, so the same users
  under another file, copy, edit, order or format are the same population, and overlapping
  populations compose per user (a release is checked against the worst user of every population it
  touches).
- Budgets are entries of the same file (`set_budget`); without one a population gets
  `DEFAULT_BUDGET_EPSILON` at δ = 0.01/N. δ must be < 1/N.
- Every line carries its sequence number, the MAC of the line before it and its own HMAC under the
  ledger key, and the key directory keeps the MAC of the last line (`privacy.ledger_keys`): an edited,
  removed, reordered, re-chained or truncated ledger is refused on the next read. Lines carry no
  wall time: when a monitoring period charged its releases would tell when the one before finished.

Line format: {"kind": "release", "record": {...}, "seq": n, "prev": MAC, "mac": MAC};
{"kind": "budget", "population": key or "*", "epsilon": E, "delta": D or null, ...};
{"kind": "declared-public", "population": key, "reason": ...} (`data inspect --public` on known users).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import fcntl
import importlib
import json
import math
import os

import dp_accounting

from fedgen_debug.privacy.accounting import (ACCOUNTINGS, ADD_REMOVE, TIGHT, PrivacyGuarantee, check_delta,
                                             default_delta, epsilon_of_events, format_epsilon)
from fedgen_debug.privacy.ledger_keys import LedgerCorrupted, LedgerKeys, keys_dir
from fedgen_debug.privacy.populations import PopulationRegistry
from fedgen_debug.validation import check_positive

LEDGER_ENV = "FEDGEN_DEBUG_LEDGER"
DEFAULT_HOME = os.path.join("~", ".fedgen-debug", "ledger")
LEDGER_FILE = "ledger.jsonl"
DEFAULT_BUDGET_EPSILON = 10.0
ALL_POPULATIONS = "*"


class PrivacyBudgetExceeded(ValueError):
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
    """The worst-off user of a population: ε composed over every release that held them (their own
    population's and every overlapping population's, `overlaps`)."""

    population: str
    population_size: int
    releases: tuple[PrivacyRecord, ...]
    guarantee: PrivacyGuarantee
    budget: Budget
    overlaps: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"population": self.population, "population_size": self.population_size,
                "releases": [{"label": r.label, "source": r.source, "release_id": r.release_id,
                              "population": r.population,
                              "epsilon_alone": r.guarantee(self.guarantee.delta).epsilon} for r in self.releases],
                **self.guarantee.as_dict(), "budget": dataclasses.asdict(self.budget),
                "overlaps": list(self.overlaps)}


def _entry_payload(entry: dict) -> str:
    return json.dumps({k: v for k, v in entry.items() if k != "mac"}, sort_keys=True)


class Ledger:
    def __init__(self, home: str | None = None):
        self.home = os.path.abspath(home) if home else ledger_home()
        self.path = os.path.join(self.home, LEDGER_FILE)
        self.keys = LedgerKeys(keys_dir(self.home))
        self.registry = PopulationRegistry(self.keys)

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

    def _lines(self) -> list[str]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f if line.strip()]

    def _ensure_key(self) -> None:
        """Makes the key of a new ledger; a ledger with entries and no key is refused (`entries`)."""
        if not self.keys.exists():
            self.entries()
            self.keys.create()

    def entries(self) -> list[dict]:
        """Every entry, oldest first; raises LedgerCorrupted unless every line verifies under the key,
        in order, and the ledger reaches the head the key directory remembers."""
        lines = self._lines()
        head = self.keys.read_head() if self.keys.exists() else None
        if not lines and head is None:
            return []
        if lines and not self.keys.exists():
            raise LedgerCorrupted(f"{self.path} has {len(lines)} entries but no ledger key at {self.keys.key_path} "
                                  "(or it was written before ledgers were authenticated); restore the key, or move "
                                  "the ledger aside and start a new one as the data owner.")
        entries, prev = [], ""
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                raise LedgerCorrupted(f"{self.path}:{number}: not a JSON line; the ledger was edited "
                                      "or cut short.") from None
            if not self.keys.verify("entry", _entry_payload(entry), entry.get("mac", "")):
                raise LedgerCorrupted(f"{self.path}:{number}: the line does not verify under the ledger key; it "
                                      "was edited or forged.")
            if entry.get("seq") != number or entry.get("prev") != prev:
                raise LedgerCorrupted(f"{self.path}:{number}: lines were removed or reordered.")
            prev = entry["mac"]
            entries.append(entry)
        # A crash between appending a line and moving the head leaves lines past the head; they verify,
        # so they were written with the key. Fewer lines than the head is a ledger cut short.
        if head is None or len(entries) < head[0] or (head[0] and entries[head[0] - 1]["mac"] != head[1]):
            raise LedgerCorrupted(f"{self.path}: {len(entries)} entries, but the ledger's head remembers "
                                  f"{head[0] if head else 'none'}; the ledger was cut short, replaced or deleted.")
        return entries

    def _append(self, entry: dict) -> None:
        self._ensure_key()
        entries = self.entries()
        entry = {**entry, "seq": len(entries) + 1, "prev": entries[-1]["mac"] if entries else ""}
        entry["mac"] = self.keys.mac("entry", _entry_payload(entry))
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.keys.write_head(entry["seq"], entry["mac"])

    # ---- populations -----------------------------------------------------------------------------

    def population_key(self, spec, client_ids=None) -> str:
        """The ledger key of the users of data `spec` (all its users unless `client_ids` are given)."""
        from fedgen_debug.data import spec as data_spec

        ids = data_spec.client_ids(spec) if client_ids is None else client_ids
        self._ensure_key()
        return self.registry.register(data_spec.user_namespace(spec), ids)

    def known_users(self, spec, client_ids=None) -> list[str]:
        """The populations with releases in the ledger that hold any user of `spec` (nothing written)."""
        from fedgen_debug.data import spec as data_spec

        if not self.keys.exists():
            return []
        ids = data_spec.client_ids(spec) if client_ids is None else client_ids
        return self.registry.overlapping(self.registry.tags(data_spec.user_namespace(spec), ids), self.populations())

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
        """The worst user of `population`: for each group of its users that took part in the same
        populations' releases (overlapping populations' included), ε of their composition; the largest."""
        by_population = collections.defaultdict(list)
        for record in self.records() + list(extra):
            by_population[record.population].append(record)
        if not by_population.get(population):
            raise ValueError(f"the ledger has no release on population {population!r}.")
        size = max(r.population_size for r in by_population[population])
        budget = self.budget(population, size)
        check_delta(budget.delta, size)
        groups = {(population,)}
        own = self.registry.members(population)
        if own is not None:
            others = [p for p in by_population if p != population]
            members = {p: self.registry.members(p) for p in others}
            others = [p for p in others if members[p] is not None and not members[p].isdisjoint(own)]
            groups = {(population, *(p for p in others if tag in members[p])) for tag in own}
        totals = []
        for group in sorted(groups):
            records = [r for p in group for r in by_population[p]]
            totals.append(PopulationTotal(population, size, tuple(records), composed_guarantee(records, budget.delta),
                                          budget, group[1:]))
        return max(totals, key=lambda t: (t.guarantee.epsilon, len(t.releases)))

    def totals(self) -> list[PopulationTotal]:
        return [self.total(p) for p in self.populations()]

    # ---- writing ---------------------------------------------------------------------------------

    def spend(self, records) -> dict[str, PopulationTotal]:
        """Charges `records` (one or several releases) to their populations, all or nothing, or raises
        PrivacyBudgetExceeded. Call it before releasing. Checks the budget of every population whose
        users the records touch (overlapping ones too). Returns each record population's new total."""
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
            charged = list(dict.fromkeys(r.population for r in records))
            touched, known_populations = list(charged), sorted({r.population for r in known.values()})
            for population in charged:
                members = self.registry.members(population)
                if members is not None:
                    touched += [p for p in self.registry.overlapping(members, known_populations) if p not in touched]
            totals = {}
            for population in touched:
                extra = [r for r in new if r.population == population]
                total = self.total(population, *new)
                charging = extra or [r for r in new if r.population in total.overlaps][:1] or records[:1]
                self._check_budget(total, charging, resumed=not new)
                totals[population] = total
            for record in new:
                self._append({"kind": "release", "record": record.to_json()})
            return {p: totals[p] for p in charged}

    @staticmethod
    def _check_budget(total: PopulationTotal, charging: list[PrivacyRecord], resumed: bool) -> None:
        """Raises unless `total` (with the releases `charging` now) is within its budget; the message names them
        all: a run charges its training with its DP counts at once, and the first of them alone is not the cost."""
        if not total.guarantee.epsilon <= total.budget.epsilon:
            names = [r.label or r.release_id for r in charging]
            record_names = names[0] if len(names) == 1 else \
                f"{', '.join(names[:3])}{f' and {len(names) - 3} more' if len(names) > 3 else ''} (charged together)"
            where = "the default budget" if total.budget.source == "default" else \
                f"the budget set for {total.budget.source!r}"
            action = "This release's record is in the ledger, but the budget no longer covers" if resumed else \
                "Refusing"
            raise PrivacyBudgetExceeded(
                f"population {total.population!r}: {record_names} would bring the total to "
                f"ε = {format_epsilon(total.guarantee.epsilon)} at δ = {total.budget.delta:.3g}, over {where} "
                f"(ε = {format_epsilon(total.budget.epsilon)}) over {len(total.releases)} release(s) in all. {action} it. Deleting runs refunds nothing; raise the budget with "
                f"`fedgen-debug ledger budget` if the data owner agrees.")

    def set_budget(self, population: str, epsilon: float, delta: float | None = None, reason: str = "") -> None:
        """Sets the (ε, δ) budget of `population` ("*": every population without its own)."""
        check_positive("budget epsilon", epsilon, allow_inf=True, note="inf: no limit")
        if delta is not None:
            check_delta(delta)
        with self._locked():
            self._append({"kind": "budget", "population": population, "epsilon": epsilon, "delta": delta,
                          "reason": reason})

    def declare_public(self, population: str, reason: str) -> None:
        """Records that the data owner declared users the ledger knows as private to be public."""
        if not reason.strip():
            raise ValueError("declaring known users public needs a reason.")
        with self._locked():
            self._append({"kind": "declared-public", "population": population, "reason": reason})


def population_key(spec, client_ids=None, ledger: Ledger | None = None) -> str:
    """The ledger key of the users of data `spec` (`Ledger.population_key`), in the default ledger."""
    return (ledger or Ledger()).population_key(spec, client_ids)
