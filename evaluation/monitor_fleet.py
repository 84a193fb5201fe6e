"""Continuous monitoring at evaluation size (issue 14): a bug rolls out on a fleet, is fixed later, and
the monitor must alert within 2 periods of the rollout reaching 10% of devices and clear within 2
periods of the fix; on clean fleets it must not alert at all.

  .venv/bin/python evaluation/monitor_fleet.py --scenario images --out runs/eval-monitor
  .venv/bin/python evaluation/monitor_fleet.py --scenario femnist --out runs/eval-monitor      # ../shared data
  .venv/bin/python evaluation/monitor_fleet.py --scenario text --concat 0.01 --first-rounds 120 --samples 40000 --out runs/eval-monitor
  .venv/bin/python evaluation/monitor_fleet.py --scenario images --clean --seeds 0,1,2 --out runs/eval-monitor
  .venv/bin/python evaluation/monitor_fleet.py --scenario text --kind word-lm --first-rounds 120 --samples 5000 --out runs/eval-monitor
  .venv/bin/python evaluation/split_play.py ../shared/data/tinyshakespeare.txt --out runs/shakespeare-split
  .venv/bin/python evaluation/monitor_fleet.py --scenario shakespeare --data play:runs/shakespeare-split/private.txt \
      --vocab file:runs/shakespeare-split/vocab.txt --first-rounds 240 --samples 40000 --out runs/eval-monitor
  .venv/bin/python evaluation/monitor_fleet.py --scenario femnist --primary users_model.keras --out runs/eval-monitor

Each scenario writes a plan (JSON, beside its monitor directory) and runs `fedgen-debug monitor`'s
runner on it; monitors resume, so an interrupted evaluation continues. Every period is charged to the
privacy ledger ($FEDGEN_DEBUG_LEDGER; an evaluation needs a budget that covers it, e.g.
`fedgen-debug ledger budget '*' --epsilon inf --reason evaluation`). Prints one JSON row per monitor: the
rollout, when it reached 10%, when it was fixed, the first alert at or after it, the alert delay, when the alerts
cleared, and every alert raised in a clean period (false alarms).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.device.rollout import first_period_at_least, parse_rollout  # noqa: E402
from fedgen_debug.monitor.plan import plan_from_dict  # noqa: E402
from fedgen_debug.monitor.runner import run_monitor  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402

FEMNIST = "npz:../shared/data/femnist_real_184_writers.npz"
SHAKESPEARE = "play:../shared/data/tinyshakespeare.txt"   # speakers as users


def scenario_plan(args, seed: int) -> dict:
    images = args.scenario in ("images", "femnist")
    bug = "invert" if images else "concat"
    fraction = args.concat if not images else 0.5
    rollout = None if args.clean else f"{bug}:{args.rollout_start}=0.05,{args.rollout_start + 1}=0.2," \
                                      f"{args.rollout_start + 2}={fraction},{args.fix}=0"
    if not images and not args.clean:   # concat: the share of sentences glued, from the rollout's period
        rollout = f"concat:{args.rollout_start}={args.concat},{args.fix}=0"
    data = {"images": f"synthetic-images:writers={args.devices},seed={100 + seed}", "femnist": FEMNIST,
            "text": f"synthetic-text:users={args.devices},seed={100 + seed}", "shakespeare": SHAKESPEARE}[args.scenario]
    data = args.data or data
    auxiliary = ({"kind": "gan", "select": args.select, "preset": args.preset} if images
                 else {"kind": args.kind, "preset": args.preset})
    if args.warm_start:
        auxiliary["warm_start"] = args.warm_start
    if args.vocab and not images:   # the modeler's own vocabulary (file:PATH, public:SPEC or dp)
        auxiliary["vocab"] = args.vocab
    primary = {}
    if images and args.primary:     # the users' own model, as `train-gan --primary` takes it
        primary = {"primary": os.path.abspath(args.primary), "primary_background": args.primary_background,
                   "primary_output": args.primary_output}
    elif images and args.primary_from_data:   # the modeler's pre-update model, as gan_pixel_inversion.py trains it
        path = os.path.join(args.out, f"primary-{args.scenario}-seed{seed}.npz")
        if not os.path.exists(path):
            from fedgen_debug.data import spec as data_spec
            from fedgen_debug.training import presets, primary_cnn

            primary_cnn.train_primary_cnn(data_spec.load_client_data(data), presets.primary_cnn_config("demo"), seed, 3,
                                          path)
        primary = {"primary": os.path.abspath(path)}
    return {"data": data, "periods": args.periods, **primary, "rounds_per_period": args.rounds,
            "first_period_rounds": args.first_rounds, "seed": seed, "samples": args.samples,
            **({"rollout": rollout} if rollout else {}),
            "fleet": {"initial": 0.8, "join_rate": 0.1, "leave_rate": 0.05, "window": args.window},
            "privacy": {"noise_multiplier": args.noise_multiplier if args.noise_multiplier is not None else
                        (0.3 if images else 0.1), "clients_per_round": args.clients_per_round,
                        "clip": 0.1 if images else 1.0},
            "budget": {"epsilon": 1e15}, "alerts": {"calibration_periods": args.calibration, "persistence": 2,
                                                     "window": 3},
            "auxiliaries": [auxiliary]}


def summarize(plan, records: list[dict], seconds: float) -> dict:
    raised = {}   # period -> signals alerting
    for r in records:
        raised[r["period"]] = sorted(a["signal"] for a in r.get("alerts", []))
    row = {"data": plan.data, "seed": plan.seed, "rollout": plan.rollout, "periods": len(records),
           "seconds": round(seconds), "alerts_by_period": {p: s for p, s in raised.items() if s},
           "epsilon_after_last_period": records[-1]["population_epsilon"] if records else None,
           "signals": {r["period"]: {f"{a}/{k}": round(v, 4) for a, m in r["auxiliaries"].items()
                                     for k, v in m["signals"].items()} for r in records}}
    if plan.rollout is None:
        clean = [p for p in raised if p > plan.alerts.calibration_periods]
        row.update(clean_periods=len(clean), false_alarm_periods=[p for p in clean if raised[p]])
        return row
    rollout = parse_rollout(plan.rollout, plan.seed)
    reach = first_period_at_least(rollout, min(0.1, max(f for _, f in rollout.steps)), plan.periods)
    fixed = next((p for p, f in rollout.steps if f == 0 and reach and p > reach), None)
    first = next((p for p in sorted(raised) if raised[p] and reach and p >= reach and (not fixed or p < fixed)), None)
    cleared = next((p for p in sorted(raised) if fixed and p >= fixed and not raised[p]), None)
    before = [p for p in raised if raised[p] and p < rollout.steps[0][0]]
    after = [p for p in raised if raised[p] and cleared and p > cleared]   # raised again after the fix cleared
    row.update(reaches_10_percent=reach, first_alert=first, alert_delay=None if first is None else first - reach,
               fixed=fixed, cleared=cleared, clear_delay=None if cleared is None or fixed is None else cleared - fixed,
               false_alarm_periods=before, alarms_after_clearing=after)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("images", "femnist", "text", "shakespeare"), required=True)
    parser.add_argument("--clean", action="store_true", help="no rollout: count false alarms")
    parser.add_argument("--concat", type=float, default=0.1, help="text: the share of sentences glued")
    parser.add_argument("--kind", choices=("char-lm", "word-lm"), default="char-lm", help="text: the auxiliary")
    parser.add_argument("--warm-start", choices=("previous", "last-clean"), help="default: the kind's")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--periods", type=int, default=12)
    parser.add_argument("--rollout-start", type=int, default=5)
    parser.add_argument("--fix", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--first-rounds", type=int, default=100)
    parser.add_argument("--calibration", type=int, default=3)
    parser.add_argument("--window", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--select", default="by-user-accuracy:low")
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--noise-multiplier", type=float, help="default: the demo's, 0.3 (GAN) or 0.1 (char-LM)")
    parser.add_argument("--clients-per-round", type=int, default=20)
    parser.add_argument("--primary-from-data", action="store_true",
                        help="images: train the primary CNN centrally on the data (as gan_pixel_inversion.py)")
    parser.add_argument("--data", help="the fleet's data spec instead of the scenario's (e.g. play:OUT/private.txt "
                                       "from split_play.py, whose OUT/vocab.txt is then --vocab file:OUT/vocab.txt)")
    parser.add_argument("--vocab", help="text: the LM auxiliary's vocabulary (file:PATH, public:SPEC or dp)")
    parser.add_argument("--primary", help="images: the users' primary model (.keras, .h5, SavedModel dir or .npz)")
    parser.add_argument("--primary-background", choices=("white", "black"), default="white")
    parser.add_argument("--primary-output", choices=("auto", "logits", "probabilities"), default="auto")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    for seed in (int(s) for s in args.seeds.split(",")):
        name = (f"{args.scenario}{'-clean' if args.clean else ''}"
                f"{'' if args.scenario not in ('text', 'shakespeare') or args.clean else f'-concat{args.concat:g}'}"
                f"{'-word' if args.scenario in ('text', 'shakespeare') and args.kind == 'word-lm' else ''}"
                f"-seed{seed}{args.tag}")
        out = os.path.join(args.out, name)
        os.makedirs(args.out, exist_ok=True)
        raw = scenario_plan(args, seed)
        with open(out + ".plan.json", "w") as f:
            json.dump(raw, f, indent=2)
        plan = plan_from_dict(raw)
        started = time.time()
        records = run_monitor(plan, out)
        row = summarize(plan, records, time.time() - started)
        store.write_json(out + ".summary.json", row)
        print(json.dumps({k: v for k, v in row.items() if k != "signals"}), flush=True)


if __name__ == "__main__":
    main()
