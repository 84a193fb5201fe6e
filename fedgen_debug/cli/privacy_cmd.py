"""`fedgen-debug privacy`: (ε, δ) of a DP-FedAvg configuration, its realistic-scale scenario, or the
per-population ledger of a runs directory."""

from __future__ import annotations

import json

from fedgen_debug.privacy import accounting


def register(sub) -> None:
    p = sub.add_parser("privacy", help="(ε, δ) of DP-FedAvg training, or the privacy ledger of a runs dir")
    p.add_argument("--clients-per-round", type=int, metavar="Q", help="qN, users sampled per round")
    p.add_argument("--population", type=int, metavar="N", help="N, users in the population")
    p.add_argument("--noise-multiplier", type=float, metavar="Z", help="z (σ = zS/qN)")
    p.add_argument("--rounds", type=int, metavar="T")
    p.add_argument("--delta", type=float, metavar="D", help="δ (ledger default: the budget's, else 1/N)")
    p.add_argument("--sampling", choices=accounting.SAMPLINGS, default=accounting.WITHOUT_REPLACEMENT)
    p.add_argument("--conversion", choices=accounting.CONVERSIONS, default=accounting.PAPER,
                   help="paper: Mironov Prop. 3 as in the paper; tight: dp_accounting's conversion")
    p.add_argument("--realistic", action="store_true",
                   help="also report the scaled scenario where z reaches --target-noise-multiplier")
    p.add_argument("--target-noise-multiplier", type=float, default=1.0)
    p.add_argument("--overall-populations", type=int, nargs=2, metavar=("SIMULATED", "REALISTIC"),
                   help="with --realistic: scale N by the overall populations (paper: 3400 2000000)")
    p.add_argument("--ledger", metavar="RUNS_DIR", help="compose every run's privacy record per population")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run)


def _required(args):
    missing = [f"--{n.replace('_', '-')}" for n in ("clients_per_round", "population", "noise_multiplier",
                                                    "rounds", "delta") if getattr(args, n) is None]
    if missing:
        raise ValueError(f"missing {' '.join(missing)} (or use --ledger RUNS_DIR).")


def run(args) -> int:
    if args.ledger:
        return _run_ledger(args)
    _required(args)
    params = accounting.DPFedAvgPrivacy(args.clients_per_round, args.population, args.noise_multiplier,
                                        args.rounds, args.sampling)
    guarantee = accounting.dp_fedavg_epsilon(params, args.delta, args.conversion)
    result = {**guarantee.as_dict(), "clients_per_round": params.clients_per_round,
              "population": params.population, "noise_multiplier": params.noise_multiplier,
              "rounds": params.rounds}
    if args.realistic:
        from fedgen_debug.privacy.realistic import realistic_scenario

        scaled = realistic_scenario(
            params, args.target_noise_multiplier, args.conversion, simulation_delta=args.delta,
            overall_populations=tuple(args.overall_populations) if args.overall_populations else None,
        )
        result["realistic"] = {"scale": scaled.scale, **scaled.realistic.as_dict()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"ε = {guarantee.epsilon:.4g} at δ = {guarantee.delta:g}  (qN={params.clients_per_round}, "
          f"N={params.population}, z={params.noise_multiplier:g}, T={params.rounds}, {params.sampling} "
          f"sampling, {args.conversion} conversion, optimal RDP order {guarantee.optimal_order:g})")
    if args.realistic:
        r = result["realistic"]
        print(f"realistic scenario (×{r['scale']:g}): ε = {r['epsilon']:.4g} at δ = {r['delta']:g}  "
              f"(qN={r['clients_per_round']}, N={r['population']}, z={r['noise_multiplier']:g})")
    return 0


def _run_ledger(args) -> int:
    from fedgen_debug.privacy.ledger import PrivacyLedger

    ledger = PrivacyLedger(args.ledger)
    totals = [t.as_dict() for t in ledger.totals(args.delta, args.conversion)]
    if args.json:
        print(json.dumps({"runs_dir": args.ledger, "populations": totals}, indent=2))
        return 0
    if not totals:
        print(f"{args.ledger}: no privacy records.")
    for t in totals:
        budget = f", budget ε = {t['budget']['epsilon']:g}" if t["budget"] else ""
        print(f"{t['population']} (N={t['population_size']}): ε = {t['epsilon']:.4g} at δ = {t['delta']:g} "
              f"over {len(t['runs'])} run(s){budget}")
        for run_name in t["runs"]:
            print(f"    {run_name}")
    return 0
