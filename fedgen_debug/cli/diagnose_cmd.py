"""`fedgen-debug diagnose RUN_A RUN_B`: how the samples of two comparable auxiliaries differ (`analysis.diagnose`)."""

from __future__ import annotations

import json


def register(sub) -> None:
    diagnose = sub.add_parser("diagnose", help="how two auxiliaries' samples differ, ranked by property with its "
                                               "family, effect and direction; the samples to look at")
    diagnose.add_argument("run_a", help="the reference run (before the update, high-accuracy or correct users)")
    diagnose.add_argument("run_b", help="the run under suspicion, of the same kind (GAN, char-LM or word-LM)")
    diagnose.add_argument("--samples", type=int, default=1000, help="samples drawn from each (no privacy cost)")
    diagnose.add_argument("--seed", type=int, default=0, help="the samples' public seed")
    diagnose.add_argument("--top", type=int, default=8, help="differences listed")
    diagnose.add_argument("--json", action="store_true", help="the whole report as JSON")
    diagnose.set_defaults(handler=run)


def format_report(report: dict, top: int = 8) -> list[str]:
    lines = [f"diagnosis of {report['runs']['b']} against {report['runs']['a']} ({report['kind']}, "
             f"{report['samples']} samples each)"]
    if "unhealthy" in report:
        for side, reason in report["unhealthy"].items():
            lines.append(f"  UNHEALTHY auxiliary {side.upper()}: {reason}; its differences say little about the data")
    calibration = report["calibration"]
    answer = "YES" if report["differ"] else "no"
    lines.append(f"  differ: {answer} (a property beyond |z| = {calibration['z_threshold']:.2f}; calibrated against "
                 f"{calibration['against']}{'' if calibration['calibrated'] else ', not training noise'})")
    if report["families"]:
        lines.append(f"  families, most significant first: {', '.join(report['families'])}")
    lines.append(f"  {'property':<20} {'family':<12} {'A':>9} {'B':>9} {'effect':>14}  {'z':>7}  B is ...")
    for c in report["differences"][:top]:
        a = "-" if c["a"] is None else f"{c['a']:.3g}"
        b = "-" if c["b"] is None else f"{c['b']:.3g}"
        mark = "*" if c["significant"] else " "
        lines.append(f"{mark} {c['property']:<20} {c['family']:<12} {a:>9} {b:>9} "
                     f"{c['effect']:>+6.2f} ± {1.96 * c['standard_error']:.2f}  {c['z']:>7.1f}  {c['direction']}")
    for check in report["checks"]:
        verdict = "YES" if check["suspected"] else "no"
        extra = " (INCONCLUSIVE)" if check.get("inconclusive") else ""
        lines.append(f"  check {check['name']}: {verdict}{extra} (z = {check['z']:.1f}, threshold {check['z_threshold']:g})")
    terms = report.get("distinctive_terms")
    if terms:
        for side in ("a", "b"):
            words = ", ".join(repr(t["term"]) for t in terms["tokens"][side][:6])
            lines.append(f"  most distinctive of {side.upper()}: {words or '-'}")
    evidence = report["evidence"]
    if "a_png" in evidence:
        lines.append(f"  evidence: {evidence['a_png']} (A's samples most unlike B), {evidence['b_png']} (B's most "
                     f"unlike A), {evidence['chart_png']}")
    else:
        lines.append(f"  B's samples most unlike A: {', '.join(repr(s) for s in evidence['b'][:8])}")
        lines.append(f"  A's samples most unlike B: {', '.join(repr(s) for s in evidence['a'][:8])}")
        lines.append(f"  chart: {evidence['chart_png']}")
    return lines


def run(args) -> int:
    from fedgen_debug.analysis.diagnose import diagnose

    report = diagnose(args.run_a, args.run_b, samples=args.samples, seed=args.seed)
    print(json.dumps(report, indent=1) if args.json else "\n".join(format_report(report, args.top)))
    return 0
