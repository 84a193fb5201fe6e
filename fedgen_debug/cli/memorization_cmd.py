"""`fedgen-debug check-memorization RUN_DIR`: what an auxiliary memorized of the canaries put in with
`train-lm --canaries`. Exit status 0 = pass, 1 = an inserted canary's exposure is above the threshold."""

from __future__ import annotations

import json


def register(sub) -> None:
    from fedgen_debug.memorization.check import DEFAULT_MAX_EXPOSURE_BITS, DEFAULT_REFERENCES

    check = sub.add_parser("check-memorization",
                           help="canary exposure, random-sampling rank and beam-search extraction of an LM run")
    check.add_argument("run_dir", help="a finished run trained with --canaries")
    check.add_argument("--references", type=int, default=DEFAULT_REFERENCES,
                       help="random suffixes each canary is ranked against (default: %(default)s, as the papers)")
    check.add_argument("--beam-width", type=int, default=5)
    check.add_argument("--max-exposure", type=float, default=DEFAULT_MAX_EXPOSURE_BITS, metavar="BITS",
                       help="fail when an inserted canary's exposure is above this (default: %(default)s bits; an "
                            "unseen canary exceeds t bits with probability 2^-t)")
    check.add_argument("--seed", type=int, default=0, help="the checker's public randomness (reference suffixes)")
    check.add_argument("--cross-client", action="store_true",
                       help="word-LM: also the intra-/inter-client memorization ratios (Udsa et al.) on the simulated "
                            "devices, released as DP means over users (charged to the ledger)")
    check.add_argument("--prefix-tokens", type=int, default=3, help="--cross-client: tokens of each prefix")
    check.add_argument("--ngram", type=int, default=4, help="--cross-client: verbatim match length")
    check.add_argument("--prefixes-per-client", type=int, default=10, help="--cross-client: prefixes sampled per user")
    check.add_argument("--json", action="store_true", help="the report as JSON (one object per canary under 'canaries')")
    check.set_defaults(handler=run_check)


def run_check(args) -> int:
    from fedgen_debug.memorization.check import CheckConfig, check_lm_run
    from fedgen_debug.memorization.report import plot_exposure

    cross_client = None
    if args.cross_client:
        from fedgen_debug.memorization.cross_client_lm import CrossClientConfig

        cross_client = CrossClientConfig(args.prefix_tokens, args.ngram, args.prefixes_per_client, seed=args.seed)
    report = check_lm_run(args.run_dir, CheckConfig(args.references, args.beam_width, args.max_exposure, args.seed),
                          cross_client)
    plot = plot_exposure(report, args.run_dir)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_report(report)))
        print(f"exposure plot: {plot}")
    return 0 if report["verdict"]["passed"] else 1


def _fraction(k: int, n: int) -> str:
    return f"{k}/{n}"


def format_report(report: dict) -> list[str]:
    rows = report["canaries"]
    inserted = sum(r["inserted"] for r in rows)
    training = [r for key, r in report["privacy"]["releases"].items() if key.endswith("/training")]
    lines = [f"{report['kind']}-LM {report['run_dir']}: {inserted} inserted canaries, {len(rows) - inserted} controls; "
             f"each ranked against {report['references']:,} random suffixes (log2 |R| = {report['log2_space']:.1f} "
             f"bits), beam width {report['beam_width']}"]
    lines.extend(f"model ε = {r['epsilon']:.4g} at δ = {r['delta']:.3g}" for r in training)
    if report["thakkar"]:
        lines += ["", "Thakkar et al. (Tables 1/2): canaries memorized, random sampling (rank 1) / beam search",
                  f"  {'p_u':>6} {'p_e':>6} {'RS':>6} {'BS':>6} {'max exposure':>13}"]
        lines += [f"  {t['p_u']:>6g} {t['p_e']:>6g} {_fraction(t['rs_memorized'], t['canaries']):>6} "
                  f"{_fraction(t['bs_found'], t['canaries']):>6} {t['max_exposure']:>10.1f} b" for t in report["thakkar"]]
    if report["ramaswamy"]:
        lines += ["", f"Ramaswamy et al. (Table 4): random-sampling rank out of {report['references']:,}, "
                      "beam search found",
                  f"  {'n_u':>4} {'n_e':>4}  {'RS ranks':<30} {'BS':>5} {'max exposure':>13}"]
        lines += [f"  {t['n_u']:>4} {t['n_e']:>4}  {', '.join(f'{r:,}' for r in t['rs_ranks']):<30} "
                  f"{_fraction(t['bs_found'], t['canaries']):>5} {t['max_exposure']:>10.1f} b" for t in report["ramaswamy"]]
    if "cross_client" in report:
        c = report["cross_client"]
        lines += ["", f"cross-client memorization (Udsa et al.; {c['detector']}), {c['prefixes_per_client']} prefixes "
                      f"of {c['prefix_tokens']} tokens per user, {c['ngram']}-gram matches, DP means over {c['users']} "
                      f"users (ε = {c['epsilon']:.3g}):",
                  f"  MR_intra {c['mr_intra']:.2%} ± {c['stddev']:.2%}   MR_inter {c['mr_inter']:.2%} ± {c['stddev']:.2%}"
                  "   (MR_total is not released: one user's text can change every other user's matches)"]
    v = report["verdict"]
    if v["control_exposure_mean"] is not None:
        lines += ["", f"controls (never inserted): exposure mean {v['control_exposure_mean']:.1f}, "
                      f"max {v['control_exposure_max']:.1f} bits"]
    if v["passed"]:
        lines.append(f"PASS: no inserted canary's exposure is above {v['max_exposure_bits']:g} bits")
    else:
        lines.append(f"FAIL: {len(v['over_threshold'])} inserted canaries above {v['max_exposure_bits']:g} bits: "
                     + ", ".join(v["over_threshold"]))
    return lines
