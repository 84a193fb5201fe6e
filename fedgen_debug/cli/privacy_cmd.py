"""`fedgen-debug privacy`: (ε, δ) of a DP-FedAvg configuration, what its noise is worth at a deployment
(`privacy.deployment`), a deployment's ε and the simulation noise matching it, the paper's realistic scenario;
`fedgen-debug ledger`: the privacy ledger, and budgets."""

from __future__ import annotations

import json
import math

from fedgen_debug.privacy import accounting, deployment


def register(sub) -> None:
    p = sub.add_parser("privacy", help="(ε, δ) of a DP-FedAvg configuration, and what its noise is worth at a "
                                       "deployment")
    p.add_argument("--clients-per-round", type=int, metavar="Q", help="qN, users sampled per round")
    p.add_argument("--population", type=int, metavar="N", help="N, users in the population")
    p.add_argument("--noise-multiplier", type=float, metavar="Z", help="z (noise std zS on the sum)")
    p.add_argument("--rounds", type=int, metavar="T")
    p.add_argument("--deployment", metavar="SPEC",
                   help="a deployment: N=USERS,rounds=T,qN=PER_ROUND,z=Z, or N=USERS,rounds=T,epsilon=E[,qN=PER_ROUND] "
                        "(the smallest z reaching ε; qN default 1000): its ε at δ = 0.01/N, its noise on the mean "
                        "update and, with --clients-per-round, the z of a simulation with the same noise on the mean")
    p.add_argument("--max-clients-per-round", type=int, default=1000, metavar="Q",
                   help="the largest round a deployment runs, for the smallest deployments a configuration's noise "
                        "is ε ≤ 1 and ≤ 10 at (default 1000)")
    p.add_argument("--delta", type=float, metavar="D", help="δ, < 1/N (default 0.01/N)")
    p.add_argument("--sampling", choices=accounting.SAMPLINGS, default=accounting.WITHOUT_REPLACEMENT)
    p.add_argument("--accounting", choices=accounting.ACCOUNTINGS,
                   help="replace-one (default for fixed-size rounds: sensitivity 2S), add-remove (Poisson), or "
                        "paper: augenstein2020/ramaswamy2020's convention (sensitivity S under replace-one), "
                        "which under-reports ε; to reproduce the papers' tables")
    p.add_argument("--conversion", choices=accounting.CONVERSIONS,
                   help="RDP to (ε, δ): tight (dp_accounting's; default) or paper (Mironov Prop. 3 over the "
                        "paper's orders; default with --accounting paper)")
    p.add_argument("--realistic", action="store_true",
                   help="also report the scaled scenario where z reaches --target-noise-multiplier")
    p.add_argument("--target-noise-multiplier", type=float, default=1.0)
    p.add_argument("--overall-populations", type=int, nargs=2, metavar=("SIMULATED", "REALISTIC"),
                   help="with --realistic: scale N by the overall populations (paper: 3400 2000000)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run)

    ledger = sub.add_parser("ledger", help="the privacy ledger: every DP release per population, and budgets")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", metavar="ACTION")
    show = ledger_sub.add_parser("show", help="totals per population (the default action)")
    for parser in (ledger, show):
        parser.add_argument("--json", action="store_true")
    budget = ledger_sub.add_parser("budget", help="set a population's (ε, δ) budget (recorded in the ledger)")
    budget.add_argument("population", help="a data spec (e.g. synthetic-text:users=300), or '*' for every "
                                           "population without its own budget")
    budget.add_argument("--epsilon", type=float, required=True, help="ε budget ('inf': no limit)")
    budget.add_argument("--delta", type=float, help="δ budget (default 0.01/N)")
    budget.add_argument("--reason", required=True, help="why, for the record (the data owner's decision stays in the "
                                                          "ledger with it)")
    ledger.set_defaults(handler=run_ledger)


def run(args) -> int:
    if args.deployment is not None:
        return run_deployment(args)
    missing = [flag for flag, value in (("--clients-per-round", args.clients_per_round), ("--population", args.population),
                                        ("--noise-multiplier", args.noise_multiplier), ("--rounds", args.rounds))
               if value is None]
    if missing:
        raise ValueError(f"privacy: give {', '.join(missing)} (or --deployment SPEC).")
    accounting_name = args.accounting or accounting.default_accounting(args.sampling)
    params = accounting.DPFedAvgPrivacy(args.clients_per_round, args.population, args.noise_multiplier,
                                        args.rounds, args.sampling, accounting_name)
    delta = args.delta if args.delta is not None else accounting.default_delta(args.population)
    # The papers report δ ≈ 1/N (2.92e-6 for N = 342,477, rounded up); their convention may reproduce it.
    paper_delta = accounting_name == accounting.PAPER_CONVENTION and 0 < delta <= 1.01 / args.population
    accounting.check_delta(delta, None if paper_delta else args.population)
    conversion = args.conversion or accounting.default_conversion(accounting_name)
    guarantee = accounting.dp_fedavg_epsilon(params, delta, conversion)
    result = {**guarantee.as_dict(), "clients_per_round": params.clients_per_round, "population": params.population,
              "noise_multiplier": params.noise_multiplier, "rounds": params.rounds, "sampling": params.sampling}
    if accounting_name == accounting.PAPER_CONVENTION:
        correct = accounting.dp_fedavg_epsilon(
            accounting.DPFedAvgPrivacy(*[getattr(params, f) for f in ("clients_per_round", "population",
                                                                      "noise_multiplier", "rounds", "sampling")]),
            delta, conversion)
        result["correct_replace_one_epsilon"] = correct.epsilon
    if args.realistic:
        from fedgen_debug.privacy.realistic import realistic_scenario

        scaled = realistic_scenario(
            params, args.target_noise_multiplier, conversion, simulation_delta=delta,
            overall_populations=tuple(args.overall_populations) if args.overall_populations else None,
        )
        result["realistic"] = {"scale": scaled.scale, **scaled.realistic.as_dict()}
    if params.noise_multiplier > 0:
        result["deployment_equivalent"] = deployment.equivalents(params.noise_multiplier, params.clients_per_round,
                                                                 params.rounds,
                                                                 max_clients_per_round=args.max_clients_per_round)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{accounting.format_guarantee(guarantee)}  (qN={params.clients_per_round}, N={params.population}, "
          f"z={params.noise_multiplier:g}, T={params.rounds}, {params.sampling} sampling, {accounting_name} "
          f"accounting, {conversion} conversion, optimal RDP order {guarantee.optimal_order:g})")
    if delta >= 1.0 / args.population:
        print(f"note: δ = {delta:g} ≥ 1/N, as the paper reports; no meaningful guarantee (a release needs δ < 1/N)")
    if "correct_replace_one_epsilon" in result:
        print(f"the paper's convention: with the replace-one sensitivity 2S of fixed-size rounds the same "
              f"training has ε = {accounting.format_epsilon(result['correct_replace_one_epsilon'])}")
    if args.realistic:
        r = result["realistic"]
        print(f"realistic scenario (×{r['scale']:g}): ε = {accounting.format_epsilon(r['epsilon'])} at δ = {r['delta']:g}  "
              f"(qN={r['clients_per_round']}, N={r['population']}, z={r['noise_multiplier']:g})")
    if "deployment_equivalent" in result:
        print("\n".join(deployment.summary_lines(result["deployment_equivalent"])))
    return 0


def run_deployment(args) -> int:
    """--deployment: the deployment's ε and noise on the mean; with --clients-per-round, the matching z."""
    found = deployment.deployment_from_spec(args.deployment, rounds=args.rounds)
    result = {"deployment": found.as_dict()}
    if args.clients_per_round is not None:
        result["simulation"] = {"clients_per_round": args.clients_per_round, "rounds": found.rounds,
                                "noise_multiplier": deployment.matched_noise_multiplier(found, args.clients_per_round)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    d = result["deployment"]
    print(f"deployment: qN = {d['clients_per_round']:,} of N = {d['population']:,} with z = {d['noise_multiplier']:.4g} "
          f"over T = {d['rounds']} rounds: ε = {accounting.format_epsilon(d['epsilon'])} at δ = {d['delta']:.3g} "
          f"({d['accounting']} accounting); noise on the mean update σ/S = z/qN = {d['mean_noise']:.4g}")
    if "simulation" in result:
        sim = result["simulation"]
        print(f"the same noise on the mean in a simulation with qN = {sim['clients_per_round']}: z = "
              f"{sim['noise_multiplier']:.6g} (train with --match-deployment {found.spec})")
    print(f"  (assumes {deployment.ASSUMPTIONS})")
    return 0


def run_ledger(args) -> int:
    from fedgen_debug.privacy.ledger import ALL_POPULATIONS, Ledger

    ledger = Ledger()
    if args.ledger_command == "budget":
        population = args.population
        if population != ALL_POPULATIONS:
            from fedgen_debug.privacy.ledger import population_key

            population = population_key(population, ledger=ledger)
        if not args.reason.strip():
            raise ValueError("ledger budget: --reason must say why (it stays in the ledger with the budget).")
        ledger.set_budget(population, args.epsilon, args.delta, args.reason)
        print(f"{ledger.path}: budget of {population}: ε = {accounting.format_epsilon(args.epsilon)}"
              + (f" at δ = {args.delta:g}" if args.delta is not None else " at δ = 0.01/N")
              + (" (no limit)" if math.isinf(args.epsilon) else ""))
        return 0
    totals = [t.as_dict() for t in ledger.totals()]
    if args.json:
        print(json.dumps({"ledger": ledger.path, "populations": totals}, indent=2))
        return 0
    print(f"ledger: {ledger.path}")
    if not totals:
        print("no DP releases yet.")
    for t in totals:
        mark = f"  WARNING: ε > {accounting.format_epsilon(accounting.EPSILON_WARNING)}" if t["above_warning"] else ""
        print(f"{t['population']} (N={t['population_size']}): ε = {accounting.format_epsilon(t['epsilon'])} at δ = {t['delta']:.3g} over "
              f"{len(t['releases'])} release(s); budget ε = {accounting.format_epsilon(t['budget']['epsilon'])} ({t['budget']['source']}){mark}")
        if t["overlaps"]:
            print(f"    its worst-off users are also in {', '.join(t['overlaps'])}: their releases count too")
        for r in t["releases"]:
            print(f"    ε = {accounting.format_epsilon(r['epsilon_alone'])}  {r['label']}  {r['source']}")
    return 0
