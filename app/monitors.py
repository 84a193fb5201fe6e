"""Monitors as the app sees them (`fedgen-debug monitor` directories): the plan, the period records,
thresholds and alerts, from `released/` files only. TF-free and data-reader-free, like `catalog`; a
monitor whose files cannot be read comes back with `broken` set."""

from __future__ import annotations

import dataclasses
import json
import os

from fedgen_debug.app.catalog import find_marked
from fedgen_debug.runs import store

MAX_DEPTH = 3


@dataclasses.dataclass(frozen=True)
class MonitorView:
    path: str                                  # relative to the root
    meta: dict = dataclasses.field(default_factory=dict)   # monitor.json
    periods: tuple = ()                        # the period records, in order
    events: tuple = ()                         # alerts.jsonl: raised / cleared
    broken: str = ""

    @property
    def planned(self) -> int:
        return int(self.meta.get("plan", {}).get("periods", 0))

    @property
    def thresholds(self) -> dict:
        return self.meta.get("thresholds", {})

    @property
    def active_alerts(self) -> list[dict]:
        return list(self.periods[-1].get("alerts", [])) if self.periods else []

    def signal_series(self, signal: str) -> dict:
        """{"period": [...], "value": [...]} of one "AUXILIARY/SIGNAL" (periods without it left out)."""
        auxiliary, name = signal.split("/", 1)
        points = [(r["period"], r["auxiliaries"].get(auxiliary, {}).get("signals", {}).get(name)) for r in self.periods]
        points = [(p, v) for p, v in points if v is not None]
        return {"period": [p for p, _ in points], "value": [float(v) for _, v in points]}

    def run_path(self, period: int, auxiliary: str) -> str | None:
        """The period run of `auxiliary`, relative to the store root (for Compare links)."""
        for record in self.periods:
            if record["period"] == period and auxiliary in record["auxiliaries"]:
                return os.path.join(self.path, record["auxiliaries"][auxiliary]["run"])
        return None


def find_monitors(root: str) -> list[str]:
    """Monitor directories under `root` (those with `released/monitor.json`), relative to it."""
    return find_marked(root, store.MONITOR, MAX_DEPTH)


def read_monitor(root: str, relative: str) -> MonitorView:
    directory = os.path.join(root, relative)
    try:
        meta = store.read_json(store.released(directory, store.MONITOR))
        return MonitorView(relative, meta, tuple(store.period_records(directory)),
                           tuple(store.read_jsonl(store.released(directory, store.ALERTS))))
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as error:
        return MonitorView(relative, broken=f"{type(error).__name__}: {error}")


def monitors(root: str) -> list[MonitorView]:
    return [read_monitor(root, relative) for relative in find_monitors(root)]
