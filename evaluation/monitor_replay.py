"""Replays finished monitors' decisions under this version's rules: the drift signals against their
reference (`monitor.signals.drift_reference`), the thresholds and the alerts, on the period runs each
monitor released. No training and no ε: the drift inputs are the periods' released samples (a GAN's, in
the primary model's features); the verdict statistics are the records' own. A signal this version no
longer computes (the char-LM's JS drift) is left out.

For a monitor whose warm starts do not depend on its alerts (a GAN's `warm_start = "previous"`) the replay
is exactly what a monitor with these rules computes. A "last-clean" monitor (the LMs' default) chose its
warm starts from its own alerts, so its replayed drift is what these rules say about *those* period models.

  .venv/bin/python evaluation/monitor_replay.py runs/eval-monitor/femnist-seed0 runs/eval-monitor/femnist-clean-seed0

Prints one JSON row per monitor (`monitor_fleet.summarize`, with the recorded and the replayed alerts) and
writes them to `--out`. Run it where the monitors' data specs resolve (the directory `monitor_fleet.py`
ran in), with the ledger they were charged to ($FEDGEN_DEBUG_LEDGER): the monitor reopens its population key.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from monitor_fleet import summarize  # noqa: E402

from fedgen_debug.monitor import alerts as alerts_lib  # noqa: E402
from fedgen_debug.monitor import runner  # noqa: E402
from fedgen_debug.monitor.plan import plan_from_dict  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402


def replayed(monitor_dir: str) -> dict:
    plan = plan_from_dict(store.read_json(monitor_dir.rstrip("/") + ".plan.json"))   # monitor_fleet.py's plan file
    records = store.period_records(monitor_dir)
    monitor = runner.Monitor(plan, monitor_dir)
    monitor.history = runner._History()
    for record in records:
        monitor._remember(record["period"], record)
    for values in monitor.history.values.values():   # signals this version does not compute
        for name in set(values) - set(monitor.names):
            values.pop(name)
    for period in (r["period"] for r in records):   # in order: a period's reference is decided before it
        monitor._measure_drift(period)   # as the runner does after measuring the period
    thresholds = monitor._thresholds()
    active = alerts_lib.active_alerts(monitor.history.values, thresholds, plan.alerts.persistence, plan.alerts.window)
    shaped = [{**r, "alerts": [{"signal": a.signal} for a in active[r["period"]]],
               "auxiliaries": {name: {"signals": {s.split("/", 1)[1]: v for s, v in monitor.history.values[r["period"]].items()
                                                  if s.startswith(name + "/")}}
                               for name in r["auxiliaries"]}} for r in records]
    row = summarize(plan, shaped, 0.0)
    row.pop("seconds")
    recorded = summarize(plan, records, 0.0)
    row.update(monitor=os.path.basename(monitor_dir.rstrip("/")),
               thresholds={n: {"value": t.value, "source": t.source} for n, t in thresholds.items()},
               recorded={k: recorded.get(k) for k in ("alerts_by_period", "first_alert", "cleared",
                                                       "false_alarm_periods", "alarms_after_clearing")})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("monitors", nargs="+", help="finished monitor directories (monitor_fleet.py's)")
    parser.add_argument("--out", default="runs/eval-monitor/replayed.json")
    args = parser.parse_args()
    rows = []
    for monitor_dir in args.monitors:
        row = replayed(monitor_dir)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "signals"}), flush=True)
    store.write_json(args.out, rows)


if __name__ == "__main__":
    main()
