"""`fedgen-debug train-lm` and `analyze-lm`: the tokenization-bug scenario (paper §5)."""

from __future__ import annotations

import json

from fedgen_debug.cli import preflight
from fedgen_debug.cli.privacy_flags import add_privacy_flags
from fedgen_debug.training.presets import DEFAULT_PRESET, LM_KINDS, PRESET_NAMES


def register(sub) -> None:
    train = sub.add_parser("train-lm", help="train a DP-FedAvg word- or char-LM on text data")
    train.add_argument("--kind", choices=LM_KINDS, required=True)
    train.add_argument("--data", required=True, help="text data spec, e.g. synthetic-text:users=300")
    train.add_argument("--bug", default=None, metavar="FAULT:FRACTION",
                       help="a text fault of the catalog on the devices (docs/data.md), e.g. concat:0.1 (the "
                            "tokenization bug: the first two tokens of FRACTION of sentences glued), entities:0.5, "
                            "truncate:0.5,length=4")
    train.add_argument("--preset", choices=PRESET_NAMES, default=DEFAULT_PRESET,
                       help="model and training sizes (training.presets.LM_PRESETS); the privacy flags override them")
    train.add_argument("--vocab-size", type=int, default=10_000)
    train.add_argument("--vocab", metavar="dp|file:PATH|public:SPEC",
                       help="the vocabulary: DP heavy hitters of the users' text, your production vocabulary (a "
                            "file, one word a line, most frequent first; the first --vocab-size are used), or the "
                            "top words of public text (default: public:synthetic-text:users=1000,seed=S+1000 for "
                            "synthetic text, else dp)")
    train.add_argument("--init", metavar="public:SPEC",
                       help="start DP-FedAvg from a model trained centrally on public text (e.g. "
                            "public:synthetic-text:users=1000,seed=1000); costs no ε. It can hide a bug: a "
                            "pretrained word-LM sampled too few OOV words to check at ε = 0.5. Default: a fresh "
                            "model (docs/privacy.md)")
    train.add_argument("--seed", type=int, default=0, help="public randomness only: model init, simulated bug")
    train.add_argument("--canaries", nargs="?", const="default", default=None, metavar="SPEC",
                       help="insert canaries for check-memorization: thakkar[:p_u=P,p_e=Q] (user-level insertion), "
                            "ramaswamy[:n_u=N,n_e=E] (synthetic secret-sharing devices), each with [,count=C] "
                            "canaries per config (3), joined with '+'; without the settings, the published 3x3 "
                            "grid; the bare flag: both grids")
    train.add_argument("--update-canaries", type=int, default=0, metavar="K",
                       help="add K clients that send random directions (scaled to the clip) instead of training: "
                            "check-memorization turns them into an empirical ε (Andrew et al. 2023)")
    train.add_argument("--out", required=True, help="run directory (re-run the same command to resume)")
    add_privacy_flags(train)
    train.set_defaults(handler=run_train)

    analyze = sub.add_parser("analyze-lm", help="tables and the tokenization-bug verdict of an LM run")
    analyze.add_argument("run_dir")
    analyze.add_argument("--baseline", help="run directory of the same kind trained before the change")
    analyze.add_argument("--samples", type=int, default=2000)
    analyze.add_argument("--top-k", type=int, default=20)
    analyze.add_argument("--json", action="store_true")
    analyze.set_defaults(handler=run_analyze)


def run_train(args) -> int:
    preflight.check_data(args.data, "text", "train-lm")
    preflight.check_bug(args.bug, "text")
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.cli.privacy_flags import privacy_lines, privacy_settings
    from fedgen_debug.training.lm_run import LMRun
    from fedgen_debug.experiments.sweep import train_run

    run = LMRun(kind=args.kind, data=args.data, preset=args.preset, seed=args.seed, vocab_size=args.vocab_size,
                vocab=args.vocab, canaries=args.canaries, update_canaries=args.update_canaries, init=args.init,
                **bug_settings(args.bug, "text"), **privacy_settings(args))
    result = train_run(run, args.out)
    print(f"{args.kind}-LM trained for {result.rounds_completed} round{'' if result.rounds_completed == 1 else 's'}"
          + (f" (resumed at round {result.resumed_from})" if result.resumed_from else "") + f": {args.out}")
    print("\n".join(privacy_lines(args.out)))
    return 0


def run_analyze(args) -> int:
    preflight.check_runs(args.run_dir, args.baseline)
    from fedgen_debug.analysis.lm_analysis import analyze_lm

    report = analyze_lm(args.run_dir, args.baseline, samples=args.samples, top_k=args.top_k)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for line in format_report(report, args.run_dir, args.top_k):
        print(line)
    return 0


def format_report(report: dict, run_dir: str, top_k: int) -> list[str]:
    """The analysis as text: top-k tables side by side (char) or OOV rate by position (word), and the verdict."""
    from fedgen_debug.analysis.visible_text import dominant_script, visible, visible_all
    from fedgen_debug.privacy.accounting import format_epsilon, weak_privacy
    from fedgen_debug.stats import Z_THRESHOLD

    current = report["current"]
    lines = [f"{current['kind']}-LM {run_dir}: mean device OOV rate (DP) {current['device_reported_oov_rate']:.2%} "
             f"± {current['device_reported_oov_rate_stddev']:.2%}; this model ε = "
             f"{format_epsilon(current['privacy']['run']['epsilon'])}"
             + (f" [{weak_privacy()}]" if current['privacy']['run']['above_warning'] else "")]
    if current["kind"] == "char":
        columns = [("current", current)] + ([("baseline", report["baseline"])] if "baseline" in report else [])
        script = dominant_script([t["word"] for _, r in columns for t in r["top_k"] + r.get("space_top_k", [])])
        words = [[repr(visible(t["word"], context=script)) for t in r["top_k"][:top_k]] for _, r in columns]
        widths = [max([24] + [len(w) + 1 for w in column]) for column in words]   # a written-out word is longer
        lines.append("  ".join(f"{name + ' top ' + str(top_k):<{width + 11}}"
                               for (name, _), width in zip(columns, widths)).rstrip())
        for i in range(top_k):
            cells = []
            for (_, r), column, width in zip(columns, words, widths):
                cells.append(f"{column[i]:<{width}}{r['top_k'][i]['probability'] * 1e3:8.2f}e-3" if i < len(column)
                             else " " * (width + 11))
            lines.append("  ".join(cells).rstrip())
        spaced = [(name, r["space_top_k"][:5]) for name, r in columns if r.get("space_top_k")]
        for name, rows in spaced:  # analyses from before the glued-candidates table have none
            lines.append(f"{name}: most probable sampled words with a space: "
                         + ", ".join(f"{visible(t['word'], context=script)!r} {t['probability'] * 1e3:.2f}e-3"
                                     for t in rows))
        for name, r in columns:
            in_vocabulary = (f"{r['in_vocabulary_mass']:.2%} are vocabulary words (not OOV, not listed); "
                             if "in_vocabulary_mass" in r else "")  # analyses from before the table's filter
            lines.append(f"{name}: {r['space_mass']:.2%} of sampled words contain a space; {in_vocabulary}"
                         f"{r['top_k_with_space']} of the top {top_k}")
    else:
        for name in ("current", "baseline"):
            if name in report:
                rates = [f"{p['oov'] / max(p['tokens'], 1):.1%}" for p in report[name]["oov_by_position"]]
                lines.append(f"{name} OOV rate by position 1-8: {' '.join(rates)}")
        if current["phrases_with_unk"]:
            lines.append("sampled phrases with UNK (paper Table 7):")
            lines.extend(f"  {p}" for p in visible_all(current["phrases_with_unk"][:5]))
    e = report["evidence"]
    lines.append(f"tokenization bug suspected: {'YES' if report['tokenization_bug_suspected'] else 'no'}"
                 f"{' (INCONCLUSIVE: ' + e['why'] + ')' if report.get('inconclusive') else ''} "
                 f"({e['test']}: z = {e['z']:.1f}, threshold {Z_THRESHOLD:g})")
    return lines
