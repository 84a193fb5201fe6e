"""The privacy ledger: every DP release computed on a population, composed (augenstein2020 App. A.2).

The modeler trains several auxiliaries (and DP quantiles for selectors) on the same users; the total
privacy loss is the composition of all of them. Each run directory holds a `privacy.json` record:

    {"population": "<canonical data spec>", "population_size": N, "sampling": "without-replacement",
     "events": [<dp_accounting DpEvent as JSON>, ...], "label": "..."}

`PrivacyLedger(runs_dir)` reads every record below `runs_dir`, groups them by population and composes
their events with one RDP accountant per population. An optional `runs_dir/privacy_budget.json`,
`{"<population>" or "*": {"epsilon": E, "delta": D}}`, sets budgets: `check_budget` refuses a new run
whose events would take a population past it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os

import dp_accounting

from fedgen_debug.data.atomic import write_json
from fedgen_debug.privacy.accounting import PAPER, PrivacyGuarantee, epsilon_of_events

RECORD_FILENAME = "privacy.json"
BUDGET_FILENAME = "privacy_budget.json"


class PrivacyBudgetExceeded(ValueError):
    pass


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
            module = importlib.import_module(value["module_name"])
            if not value["module_name"].startswith("dp_accounting"):
                raise ValueError(f"not a dp_accounting event: {value['module_name']}.{value['class_name']}")
            cls = getattr(module, value["class_name"])
            return cls(**{k: convert(v) for k, v in value.items() if k not in ("module_name", "class_name")})
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    return convert(data)


@dataclasses.dataclass(frozen=True)
class PrivacyRecord:
    population: str
    population_size: int
    sampling: str
    events: tuple
    label: str = ""

    def to_json(self) -> dict:
        return {"population": self.population, "population_size": self.population_size,
                "sampling": self.sampling, "label": self.label,
                "events": [event_to_json(e) for e in self.events]}

    @classmethod
    def from_json(cls, data: dict) -> "PrivacyRecord":
        return cls(data["population"], int(data["population_size"]), data["sampling"],
                   tuple(event_from_json(e) for e in data["events"]), data.get("label", ""))

    def write(self, run_dir: str) -> None:
        os.makedirs(run_dir, exist_ok=True)
        write_json(os.path.join(run_dir, RECORD_FILENAME), self.to_json())


@dataclasses.dataclass(frozen=True)
class PopulationTotal:
    population: str
    population_size: int
    runs: tuple[str, ...]
    guarantee: PrivacyGuarantee
    budget: dict | None

    def as_dict(self) -> dict:
        return {"population": self.population, "population_size": self.population_size,
                "runs": list(self.runs), **self.guarantee.as_dict(), "budget": self.budget}


class PrivacyLedger:
    def __init__(self, runs_dir: str):
        self.runs_dir = runs_dir
        self.records: dict[str, PrivacyRecord] = {}
        if not os.path.isdir(runs_dir):
            raise FileNotFoundError(f"{runs_dir}: not a directory of runs.")
        for root, _, files in sorted(os.walk(runs_dir)):
            if RECORD_FILENAME in files:
                path = os.path.join(root, RECORD_FILENAME)
                try:
                    with open(path) as f:
                        record = PrivacyRecord.from_json(json.load(f))
                except (OSError, ValueError, KeyError, TypeError) as e:
                    raise ValueError(f"{path}: unreadable privacy record ({e}).") from None
                self.records[os.path.relpath(root, runs_dir)] = record
        self.budgets = self._read_budgets()

    def _read_budgets(self) -> dict:
        path = os.path.join(self.runs_dir, BUDGET_FILENAME)
        if not os.path.exists(path):
            return {}
        try:
            with open(path) as f:
                budgets = json.load(f)
            for name, b in budgets.items():
                if not (b["epsilon"] > 0 and 0 < b["delta"] < 1):
                    raise ValueError(f"budget of {name!r} needs epsilon > 0 and delta in (0, 1)")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: invalid privacy budget ({e}).") from None
        return budgets

    def budget_for(self, population: str) -> dict | None:
        return self.budgets.get(population, self.budgets.get("*"))

    def populations(self) -> list[str]:
        return sorted({r.population for r in self.records.values()})

    def _compose(self, population: str, extra: PrivacyRecord | None, delta: float | None,
                 conversion: str) -> PopulationTotal:
        runs = {name: r for name, r in self.records.items() if r.population == population}
        if extra is not None:
            runs["<new run>"] = extra
        samplings = {r.sampling for r in runs.values()}
        if len(samplings) != 1:
            raise ValueError(f"population {population!r} mixes samplings {sorted(samplings)}; their "
                             "neighbouring relations cannot be composed in one accountant.")
        size = max(r.population_size for r in runs.values())
        budget = self.budget_for(population)
        if delta is None:
            delta = budget["delta"] if budget else 1.0 / size
        events = [e for r in runs.values() for e in r.events]
        guarantee = epsilon_of_events(events, delta, samplings.pop(), conversion)
        return PopulationTotal(population, size, tuple(sorted(runs)), guarantee, budget)

    def totals(self, delta: float | None = None, conversion: str = PAPER) -> list[PopulationTotal]:
        """Composed (ε, δ) per population; δ defaults to the budget's, else 1/N."""
        return [self._compose(p, None, delta, conversion) for p in self.populations()]

    def check_budget(self, record: PrivacyRecord, conversion: str = PAPER) -> PopulationTotal:
        """Raises PrivacyBudgetExceeded if adding `record` takes its population past its budget."""
        total = self._compose(record.population, record, None, conversion)
        budget = total.budget
        if budget is not None and total.guarantee.epsilon > budget["epsilon"]:
            raise PrivacyBudgetExceeded(
                f"population {record.population!r}: this run would bring the total to ε = "
                f"{total.guarantee.epsilon:.4g} at δ = {budget['delta']:g}, over the budget ε = "
                f"{budget['epsilon']:g} set in {os.path.join(self.runs_dir, BUDGET_FILENAME)} "
                f"({len(total.runs) - 1} earlier run(s)). Refusing to start."
            )
        return total
