"""`fedgen-debug monitor`: auxiliaries retrained period after period, drift alerts, privacy over time."""

from __future__ import annotations


def register(sub) -> None:
    monitor = sub.add_parser("monitor", help="retrain the auxiliaries every period on a changing fleet and raise "
                                             "drift alerts (issue 14)")
    monitor.add_argument("--plan", required=True, help="a monitoring plan, .toml or .json (see "
                                                       "docs/monitoring.md)")
    monitor.add_argument("--out", required=True, help="the monitor's directory (re-run the same command to resume)")
    monitor.add_argument("--every", default=None, metavar="DURATION",
                         help="run periods on a wall clock, e.g. 24h, 30m, 90s (default: the plan's cadence; "
                              "without one, back to back)")
    monitor.add_argument("--on-alert", default=None, metavar="COMMAND",
                         help="a shell command run for every alert raised or cleared, with the alert as JSON on "
                              "its stdin and in $FEDGEN_DEBUG_ALERT")
    monitor.add_argument("--check", action="store_true",
                         help="only check the plan and its budget (how many periods it affords), run nothing")
    monitor.set_defaults(handler=run_monitor)


def run_monitor(args) -> int:
    import os

    from fedgen_debug.monitor.plan import cadence_seconds, load_plan
    from fedgen_debug.privacy.accounting import format_epsilon

    plan = load_plan(args.plan)
    every = cadence_seconds(args.every) if args.every else None
    if args.check:
        from fedgen_debug.data import spec as data_spec
        from fedgen_debug.monitor.budget import check_budget
        from fedgen_debug.monitor.inputs import check_inputs

        from fedgen_debug.runs import store

        check_inputs(plan, args.out)
        # A monitor that already ran: its periods' releases are in the ledger; the check starts after them.
        done = len(store.period_records(args.out))
        check = check_budget(plan, data_spec.load_client_data(plan.data).client_ids, done=done)
        print(f"{check.message}; the plan has {plan.periods}" + (f", {done} done in {args.out}." if done else "."))
        print(f"ε after each {'further ' if done else ''}period: "
              + (", ".join(format_epsilon(e) for e in check.epsilon_by_period) or "none (every period is done)"))
        return 0 if check.affordable_periods >= plan.periods else 1
    from fedgen_debug.monitor.runner import run_monitor as run

    # Each period's line as it ends (a monitor on a 24-hour cadence runs for days), flushed for a log file.
    records = run(plan, args.out, every=every, on_alert=args.on_alert,
                  on_period=lambda record: print(format_period(record), flush=True))
    print(f"monitor: {len(records)} period(s) in {os.path.abspath(args.out)}; alerts in "
          f"{os.path.join(args.out, 'released', 'alerts.jsonl')}")
    return 0


def format_period(record: dict) -> str:
    from fedgen_debug.privacy.accounting import EPSILON_WARNING, format_epsilon, weak_privacy

    values, weak = [], f" ({weak_privacy()})"
    for name, measured in record["auxiliaries"].items():
        # Each auxiliary's ε, marked: the report is where it is said (the ledger charge only logs it).
        values.append(f"{name} ε {format_epsilon(measured['epsilon'])}{weak if measured['epsilon'] > EPSILON_WARNING else ''}")
        values += [f"{name}/{k} {v:.3g}" for k, v in measured["signals"].items()]
    rollout = record["rollout"]
    bug = f"{rollout['bug']} {rollout['fraction']:.0%}" if rollout["bug"] else "no rollout"
    alerts = ", ".join(a["signal"] for a in record.get("alerts", [])) or "none"
    total = record["population_epsilon"]
    return (f"period {record['period']:3d} ({bug}; population ε {format_epsilon(total)}{weak if total > EPSILON_WARNING else ''}): "
            f"{'; '.join(values)}; alerts: {alerts}")
