"""`fedgen-debug check-memorization RUN_DIR`: what an auxiliary memorized of the canaries put in with
`train-lm --canaries`, and the empirical ε of its `--update-canaries`. Exit status 0 = pass, 1 = an
inserted canary's exposure is above the threshold or the empirical lower bound is above the
accountant's ε."""

from __future__ import annotations

import json

from fedgen_debug.cli import preflight


def register(sub) -> None:
    from fedgen_debug.memorization.check import DEFAULT_MAX_EXPOSURE_BITS, DEFAULT_REFERENCES
    from fedgen_debug.memorization.gan_check import DEFAULT_GAN_MAX_EXPOSURE_BITS, DEFAULT_GLYPH_REFERENCES

    check = sub.add_parser("check-memorization",
                           help="canary exposure, random-sampling rank and beam-search extraction (LM), nearest "
                                "generated image (GAN), empirical ε (update canaries)")
    check.add_argument("run_dir", help="a finished run trained with --canaries and/or --update-canaries")
    check.add_argument("--references", type=int,
                       help=f"random suffixes (LM; default {DEFAULT_REFERENCES:,}, as the papers) or random glyphs "
                            f"(GAN; default {DEFAULT_GLYPH_REFERENCES:,}) each canary is ranked against")
    check.add_argument("--beam-width", type=int, default=5)
    check.add_argument("--max-exposure", type=float, metavar="BITS",
                       help=f"fail when an inserted canary's exposure is above this (default: {DEFAULT_MAX_EXPOSURE_BITS:g} "
                            f"bits for LMs, {DEFAULT_GAN_MAX_EXPOSURE_BITS:g} for GANs; an unseen canary exceeds t bits "
                            "with probability 2^-t)")
    check.add_argument("--seed", type=int, default=0,
                       help="the checker's public randomness (reference suffixes; GAN: noise and reference glyphs); "
                            "--cross-client: which draw of the prefixes (drawn from the run secret)")
    check.add_argument("--samples", type=int, default=20_000, help="GAN: generated images searched for each glyph")
    check.add_argument("--cross-client", action="store_true",
                       help="word-LM: also the intra-/inter-client memorization ratios (Udsa et al.) on the simulated "
                            "devices, released as DP means over users (charged to the ledger)")
    check.add_argument("--prefix-tokens", type=int, default=3, help="--cross-client: tokens of each prefix")
    check.add_argument("--ngram", type=int, default=4, help="--cross-client: verbatim match length")
    check.add_argument("--prefixes-per-client", type=int, default=10, help="--cross-client: prefixes sampled per user")
    check.add_argument("--json", action="store_true", help="the report as JSON (one object per canary under 'canaries')")
    check.set_defaults(handler=run_check)


def run_check(args) -> int:
    preflight.check_runs(args.run_dir)
    from fedgen_debug.memorization.check import CheckConfig, check_lm_run
    from fedgen_debug.memorization.report import plot_exposure

    cross_client = None
    if args.cross_client:
        from fedgen_debug.memorization.cross_client_lm import CrossClientConfig

        cross_client = CrossClientConfig(args.prefix_tokens, args.ngram, args.prefixes_per_client, seed=args.seed)
    if _is_gan(args.run_dir):
        from fedgen_debug.memorization.gan_check import (DEFAULT_GAN_MAX_EXPOSURE_BITS, DEFAULT_GLYPH_REFERENCES,
                                                         GanCheckConfig, check_gan_run)

        report = check_gan_run(args.run_dir, GanCheckConfig(
            args.samples, args.references or DEFAULT_GLYPH_REFERENCES,
            args.max_exposure or DEFAULT_GAN_MAX_EXPOSURE_BITS, args.seed))
    else:
        from fedgen_debug.memorization.check import DEFAULT_MAX_EXPOSURE_BITS, DEFAULT_REFERENCES

        report = check_lm_run(args.run_dir, CheckConfig(args.references or DEFAULT_REFERENCES, args.beam_width,
                                                        args.max_exposure or DEFAULT_MAX_EXPOSURE_BITS, args.seed),
                              cross_client)
    plot = plot_exposure(report, args.run_dir)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_report(report)))
        print(f"exposure plot: {plot}")
    return 0 if report["verdict"]["passed"] else 1


def _is_gan(run_dir: str) -> bool:
    from fedgen_debug.runs import store

    return "gan" in (store.read_config(run_dir) or {})


def _fraction(k: int, n: int) -> str:
    return f"{k}/{n}"


def format_report(report: dict) -> list[str]:
    from fedgen_debug.cli.privacy_flags import weak_privacy_mark
    from fedgen_debug.privacy.accounting import format_epsilon
    from fedgen_debug.runs.store import training_release

    rows = report["canaries"]
    inserted = sum(r["inserted"] for r in rows)
    training = training_release(report["privacy"])
    if report["kind"] == "GAN":
        lines = [f"GAN {report['run_dir']}: {inserted} inserted glyph canaries, {len(rows) - inserted} controls; each "
                 f"glyph's nearest of {report['samples']:,} generated images, ranked against {report['references']:,} "
                 f"random glyphs (log2 |R| = {report['log2_space']:.0f} bits). RS = rank by nearest-sample distance, "
                 "BS = a sample decodes to the glyph"]
    else:
        lines = [f"{report['kind']}-LM {report['run_dir']}: " + (
            f"{inserted} inserted canaries, {len(rows) - inserted} controls; each ranked against "
            f"{report['references']:,} random suffixes (log2 |R| = {report['log2_space']:.1f} bits), beam width "
            f"{report['beam_width']}" if rows else "no text canaries")]
    if training is not None:
        lines.append(f"model ε = {format_epsilon(training['epsilon'])} at δ = {training['delta']:.3g}{weak_privacy_mark(training)}")
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
                      f"users (ε = {format_epsilon(c['epsilon'])}{weak_privacy_mark(c)}):",
                  f"  MR_intra {c['mr_intra']:.2%} ± {c['stddev']:.2%}   MR_inter {c['mr_inter']:.2%} ± {c['stddev']:.2%}"
                  "   (MR_total is not released: one user's text can change every other user's matches)"]
    if "empirical_privacy" in report:
        e = report["empirical_privacy"]
        lines += ["", f"empirical privacy (Andrew et al. 2023; {e['threat_model']}), {e['seen']} update canaries, "
                      f"d = {e['dimension']:,}:",
                  f"  cosines: inserted mean {e['seen_mean']:.3g} ± {e['seen_std']:.3g}; never inserted mean "
                  f"{e['unseen_mean']:.3g} ± {e['unseen_std']:.3g} (null ± {e['null_std']:.3g})",
                  f"  empirical ε ≈ {format_epsilon(e['estimate'])} (Gaussian fit), lower bound {format_epsilon(e['lower_bound'])} "
                  f"({1 - e['alpha']:.0%} confidence) at δ = {e['delta']:.3g}; accountant ε = "
                  f"{format_epsilon(e['accountant_epsilon'])}"]
        if e["lower_bound"] > e["accountant_epsilon"]:
            lines.append("  WARNING: the lower bound exceeds the accountant's ε: the accounting does not hold")
    v = report["verdict"]
    if rows and v["control_exposure_mean"] is not None:
        lines += ["", f"controls (never inserted): exposure mean {v['control_exposure_mean']:.1f}, "
                      f"max {v['control_exposure_max']:.1f} bits"]
    reasons = []
    if v["over_threshold"]:
        reasons.append(f"{len(v['over_threshold'])} inserted canaries above {v['max_exposure_bits']:g} bits: "
                       + ", ".join(v["over_threshold"]))
    if v.get("empirical_bound_exceeds_accountant"):
        reasons.append("the empirical ε lower bound is above the accountant's ε")
    if reasons:
        lines.append("FAIL: " + "; ".join(reasons))
    else:
        checked = ([f"no inserted canary's exposure is above {v['max_exposure_bits']:g} bits"] if rows else []) + (
            ["the empirical ε lower bound is within the accountant's ε"] if "empirical_privacy" in report else [])
        lines.append("PASS: " + "; ".join(checked))
    return lines
