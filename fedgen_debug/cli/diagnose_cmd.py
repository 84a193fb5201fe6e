"""`fedgen-debug diagnose RUN_A RUN_B`: how the samples of two comparable auxiliaries differ (`analysis.diagnose`)."""

from __future__ import annotations

import json

from fedgen_debug.cli import preflight
from fedgen_debug.analysis.diagnosis_summary import ANSWER_WORDS, answer_of, found_its_bug, suspect_words
from fedgen_debug.analysis.visible_text import report_script, visible


def register(sub) -> None:
    diagnose = sub.add_parser("diagnose", help="how two auxiliaries' samples differ, ranked by property with its "
                                               "family, effect and direction; the samples to look at")
    diagnose.add_argument("run_a", help="the reference run (before the update, high-accuracy or correct users; a "
                                        "T4 or T2 pair may come in either order: its low-accuracy or misclassified "
                                        "side is the suspect)")
    diagnose.add_argument("run_b", help="the run under suspicion, of the same kind (GAN, char-LM or word-LM)")
    diagnose.add_argument("--samples", type=int, default=1000, help="samples drawn from each (no privacy cost)")
    diagnose.add_argument("--seed", type=int, default=0, help="the samples' public seed")
    diagnose.add_argument("--top", type=int, default=8, help="differences listed")
    diagnose.add_argument("--json", action="store_true", help="the whole report as JSON")
    diagnose.add_argument("--calibration", help="a calibration file from `fedgen-debug calibrate`, or 'none' for the "
                                                "samples' noise only (default: the one shipped for the runs' settings)")
    diagnose.set_defaults(handler=run)

    calibrate = sub.add_parser("calibrate", help="how far clean replicate runs differ (training noise), so that "
                                                 "diagnose calls only larger differences; with its false alarms")
    calibrate.add_argument("runs", nargs="+", help="3 or more clean replicate runs (same kind and settings, no bug), "
                                                   "or with --pairs, clean pairs A:B of two selections")
    calibrate.add_argument("--pairs", action="store_true", help="the runs are A:B selection pairs (e.g. high:low); "
                           "a run may be in several (every A run against every B run)")
    calibrate.add_argument("--out", required=True, help="the calibration file to write (JSON)")
    calibrate.add_argument("--name", help="its name in reports (default: the file name)")
    calibrate.add_argument("--samples", type=int, default=1000, help="samples drawn from each run")
    calibrate.add_argument("--seed", type=int, default=0, help="the samples' public seed")
    calibrate.add_argument("--supplement", metavar="CALIBRATION",
                           help="add to this calibration (a file, or a shipped one's name) the properties it does not "
                                "hold, measured on these runs (trained at its settings, on each of its sources)")
    calibrate.set_defaults(handler=run_calibrate)


def format_report(report: dict, top: int = 8) -> list[str]:
    lines = [f"diagnosis of {report['runs']['b']} against {report['runs']['a']} ({report['kind']}, "
             f"{report['samples']} samples each)"]
    if "unhealthy" in report:
        for side, reason in report["unhealthy"].items():
            lines.append(f"  UNHEALTHY auxiliary {side.upper()}: {reason}; its differences say little about the data")
    calibration = report["calibration"]
    threshold = "-" if calibration["z_threshold"] is None else f"{calibration['z_threshold']:.2f}"
    lines.append(f"  differ: {ANSWER_WORDS[answer_of(report)]} (a property beyond |z| = {threshold}; calibrated "
                 f"against {calibration['against']}{'' if calibration['calibrated'] else ', not training noise'})")
    if report.get("answer_reason"):
        lines.append(f"  because: {report['answer_reason']}")
    alarms = calibration.get("false_alarms")
    if alarms:
        lines.append(f"  calibration: {alarms['alarms']} false alarms in {alarms['pairs']} clean pairs left out")
    if calibration.get("note"):
        lines.append(f"  note: {calibration['note']}")
    if report["families"]:
        candidates = "" if answer_of(report) != "cannot tell" else (
            " (candidates: an auxiliary is unhealthy)" if "unhealthy" in report
            else " (candidates: beyond replicate pairs' training noise only)" if calibration["calibrated"]
            else " (candidates: beyond the samples' noise only)")
        lines.append(f"  families, most significant first{candidates}: {', '.join(report['families'])}")
    z_name = "calib. z" if calibration["calibrated"] else "z"
    lines.append(f"  {'property':<20} {'family':<12} {'A':>9} {'B':>9} {'effect':>14}  {z_name:>8}  B is ...")
    for c in report["differences"][:top]:
        a, b = _summary(c["a"]), _summary(c["b"])
        mark = "*" if c["significant"] else " "
        z = c.get("calibrated_z", c["z"]) if calibration["calibrated"] else c["z"]
        z_text = "-" if z is None else f"{z:.1f}"
        lines.append(f"{mark} {c['property']:<20} {c['family']:<12} {a:>9} {b:>9} "
                     f"{c['effect']:>+6.2f} ± {1.96 * c['standard_error']:.2f}  {z_text:>8}  {c['direction']}")
    for check in report["checks"]:
        verdict = "YES" if check["suspected"] else "no"
        extra = " (INCONCLUSIVE)" if check.get("inconclusive") else ""
        lines.append(f"  check {check['name']}{suspect_words(check)}: {verdict}{extra} (z = {check['z']:.1f}, "
                     f"threshold {check['z_threshold']:g})")
    terms = report.get("distinctive_terms")
    script = report_script(report)   # text is written out in the script of everything the report shows
    if terms:
        for side in ("a", "b"):
            words = ", ".join(repr(visible(t["term"], context=script)) for t in terms["tokens"][side][:6])
            lines.append(f"  most distinctive of {side.upper()}: {words or '-'}")
    evidence = report["evidence"]
    if "a_png" in evidence:
        lines.append(f"  evidence: {evidence['a_png']} (A's samples most unlike B), {evidence['b_png']} (B's most "
                     f"unlike A), {evidence['chart_png']}")
    else:
        for side, other in (("b", "A"), ("a", "B")):
            shown = ", ".join(repr(visible(s, context=script)) for s in evidence[side][:8])
            lines.append(f"  {side.upper()}'s samples most unlike {other}: {shown}")
        lines.append(f"  chart: {evidence['chart_png']}")
    return lines


def _shown_z(difference: dict, calibration: dict) -> tuple[str, float | None]:
    """(its name, the z to show) of one difference: its calibrated z when the diagnosis is calibrated."""
    if calibration["calibrated"] and difference.get("calibrated_z") is not None:
        return "calibrated z", difference["calibrated_z"]
    return "z", difference["z"]


def brief(report: dict) -> dict:
    """A diagnosis in a few fields (the demo's summary.json): whether A and B differ and against which noise,
    the families, the first difference, an unhealthy side, where the whole report is."""
    from fedgen_debug.runs import store

    calibration = report["calibration"]
    first = None
    if report["differences"]:
        c = report["differences"][0]
        first = {"property": c["property"], "family": c["family"], "direction": c["direction"], "effect": c["effect"],
                 "z": c["z"], "calibrated_z": c.get("calibrated_z"), "significant": c["significant"]}
    # A named check that found its bug decides with its own statistic; the largest property may be small then.
    found_by = [{"name": c["name"], "family": c["family"], "z": c.get("z")} for c in report.get("checks", [])
                if found_its_bug(c)]
    return {"differ": report["differ"], "answer": answer_of(report), "calibrated": calibration["calibrated"],
            "against": calibration["against"],
            "z_threshold": calibration["z_threshold"], "families": report["families"], "first": first,
            "found_by": found_by,
            "unhealthy": report.get("unhealthy", {}), "report": store.released(report["runs"]["b"], store.DIAGNOSIS)}


def brief_lines(summary: dict, pair: str) -> list[str]:
    """`brief`'s summary in 2-3 lines: differ YES/no/CANNOT TELL and against which noise, where the report is; the
    families, the named check that found its bug, and the first difference (property, family, direction, z);
    an unhealthy side. `pair`: which B against which A, in words."""
    against = summary["against"] + ("" if summary["calibrated"] else ", not training noise")
    lines = [f"diagnosis, {pair}: differ {ANSWER_WORDS[answer_of(summary)]} (calibrated against {against}); "
             f"{summary['report']}"]
    families = ", ".join(summary["families"][:4]) + (", ..." if len(summary["families"]) > 4 else "")
    first = summary["first"]
    if first is None:
        lines.append("  no property to compare")
    else:
        lines.append("; ".join([f"  families: {families or 'none significant'}", *_found_by(summary),
                                f"{_first_difference(summary)}, B vs A: {first['direction']}"]))
    if summary["unhealthy"]:
        sides = ", ".join(f"{side.upper()} ({reason})" for side, reason in summary["unhealthy"].items())
        lines.append(f"  UNHEALTHY auxiliary {sides}: its differences say little about the data")
    return lines


def brief_line(summary: dict) -> str:
    """`brief`'s summary in one line: differ YES/no/CANNOT TELL, against which noise, the named check that found
    its bug, the first difference."""
    noise = "" if summary["calibrated"] else " (sampling noise only)"
    unhealthy = "".join(f", {side.upper()} UNHEALTHY" for side in summary["unhealthy"])
    first = [] if summary["first"] is None else [_first_difference(summary)]
    return "; ".join([f"differ {ANSWER_WORDS[answer_of(summary)]}{noise}{unhealthy}", *_found_by(summary), *first])


def _found_by(summary: dict) -> list[str]:
    """"found by the named check NAME (family), z = Z" for each check that found its bug. It decides with its own
    statistic, so the largest property may then be small (the word-LM's UNK share drifts between trainings)."""
    return [f"found by the named check {c['name']} ({c['family']}), z = {'-' if c['z'] is None else format(c['z'], '.1f')}"
            for c in summary.get("found_by", [])]


def _first_difference(summary: dict) -> str:
    """"first: PROPERTY (family), z = Z", or "largest property: ..." after a named check that found its bug."""
    first = summary["first"]
    z_name, z = _shown_z(first, summary)
    label = "largest property" if summary.get("found_by") else "first"
    return f"{label}: {first['property']} ({first['family']}), {z_name} = {'-' if z is None else f'{z:.1f}'}"


def _summary(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):   # a class mix: the class whose share changed most
        return next((f"{k}:{v:.0%}" for k, v in value.items()), "-")
    return f"{value:.3g}"


def run(args) -> int:
    preflight.check_runs(args.run_a, args.run_b)
    from fedgen_debug.analysis.diagnose import diagnose

    report = diagnose(args.run_a, args.run_b, samples=args.samples, seed=args.seed, calibration=args.calibration)
    print(json.dumps(report, indent=1) if args.json else "\n".join(format_report(report, args.top)))
    return 0


def _parse_pairs(specs: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """(the runs, each once, and the pairs as indices into them). A run may be in several pairs (every A run
    against every B run): it is one run, sampled once, and a pair left out takes its runs' other pairs with it
    (`calibration.left_out`); listed twice as two runs, its other pairs would calibrate it."""
    import os

    runs, index, pairs = [], {}, []
    for spec in specs:
        a, sep, b = spec.partition(":")
        if not sep or not a or not b:
            raise ValueError(f"--pairs takes runs as A:B. Found {spec!r}.")
        pair = []
        for run in (a, b):
            key = os.path.realpath(run)
            if key not in index:
                index[key] = len(runs)
                runs.append(run)
            pair.append(index[key])
        if pair[0] == pair[1] or tuple(pair) in pairs:
            raise ValueError(f"--pairs: {spec!r} " + ("pairs a run with itself." if pair[0] == pair[1]
                                                        else "is given twice."))
        pairs.append(tuple(pair))
    return runs, pairs


def _alarm_count(alarms: dict) -> str:
    """"k of n (95% upper bound r)" of a calibration's left-out false alarms."""
    return f"{alarms['alarms']} of {alarms['pairs']}" + (
        f" (95% upper bound {alarms['rate_upper_95']:.3f})" if alarms["pairs"] else "")


def run_calibrate(args) -> int:
    import os

    if args.pairs:
        runs, pairs = _parse_pairs(args.runs)
        pair_type = "selection"
    else:
        runs, pairs, pair_type = args.runs, None, "replicate"
    preflight.check_runs(*runs)
    from fedgen_debug.analysis import calibrate, calibration_store
    from fedgen_debug.analysis import calibration as calibration_module

    name = args.name or os.path.splitext(os.path.basename(args.out))[0]
    base = None if args.supplement is None else calibration_store.named(args.supplement)
    calibration = calibrate.build(runs, pairs, pair_type, name, samples=args.samples, seed=args.seed,
                                  description=f"fedgen-debug calibrate {' '.join(args.runs)}", supplement_to=base)
    calibration_store.save(calibration, args.out)
    if base is not None:
        added = calibration.source["supplements"][-1]
        alarms = added["false_alarms"]
        print(f"calibration {base.name} supplemented with {', '.join(added['properties'])} from {added['runs']} runs "
              f"({added['degrees_of_freedom']} degrees of freedom); threshold |calibrated z| > "
              f"{calibration.z_threshold:.2f} over {len(calibration.properties)} properties")
        print(f"  false alarms of these runs' clean pairs, each left out for the added properties: {_alarm_count(alarms)}")
        print(f"wrote {args.out}")
        return 0
    alarms = calibration.false_alarms
    print(f"calibration {name}: {calibration.kind} {pair_type} pairs at {calibration.source['settings']}, "
          f"{calibration.degrees_of_freedom} degrees of freedom, threshold |calibrated z| > {calibration.z_threshold:.2f}")
    print(f"  false alarms with each clean pair left out: {_alarm_count(alarms)}")
    bonferroni = calibration_module.threshold_for(len(calibration.properties))
    if calibration.z_threshold > bonferroni:   # heavier tails than normal: the clean pairs' own threshold
        print(f"  the clean pairs' largest |calibrated z| have heavier tails than normal: the threshold is their own "
              f"95% bound, not Bonferroni's {bonferroni:.2f} (beyond which {alarms['alarms_at_bonferroni']} of "
              f"{alarms['pairs']} alarmed)")
    elif alarms.get("clean_pairs_threshold") is None:
        print(f"  {alarms['pairs']} clean pairs: 19 or more also bound the threshold by the clean pairs' own "
              f"largest |calibrated z|, whatever their tails")
    dof = calibration.degrees_of_freedom
    print(f"  each property's training noise is taken at its 95% upper bound, {calibration_module.upper_bound_factor(dof):.2f}x "
          f"its estimate at {dof} degrees of freedom (twice the runs: "
          f"{calibration_module.upper_bound_factor(2 * dof + 1):.2f}x); more clean runs find smaller differences")
    for source in calibration.source.get("sources", []):   # several sources of data, each calibrated apart
        print(f"    {source['data']}: {source['runs']} runs, {source['degrees_of_freedom']} degrees of freedom, "
              f"{source['false_alarms']} of {source['tested']} left-out pairs alarmed")
    print(f"  written to {args.out}; use it with `fedgen-debug diagnose A B --calibration {args.out}`")
    return 0
