"""The demo's LM stage (paper §5): char- and word-LM before (0%) and after (10%) the tokenization
bug, the after-run analyzed against the before-run, tables side by side, each model's ε and the verdict,
and the diagnosis of the pair (`analysis.diagnose`: how the after-run's samples differ, by family)."""

from __future__ import annotations

import os


def stage_runs(data: str, concat_fraction: float, out: str, seed: int, preset: str, vocab_size: int) -> dict:
    """{(kind, "before"|"after"): (LMRun, run_dir)}. Different seeds: the before-run is an independent
    replicate (its own model initialisation and bug draw); DP noise differs anyway (each run's secret)."""
    from fedgen_debug import rng_streams
    from fedgen_debug.training.lm_run import LMRun

    runs = {}
    for kind in ("char", "word"):
        for name, fraction, run_seed in (("before", 0.0, seed), ("after", concat_fraction, seed + rng_streams.AFTER_RUN_SEED_OFFSET)):
            runs[kind, name] = (LMRun(kind, data, fraction, preset, seed=run_seed, vocab_size=vocab_size),
                                os.path.join(out, f"{kind}-lm-{name}"))
    return runs


def stage_comparisons(runs: dict) -> list:
    """One comparison a kind: its after-run (the bug) against its before-run."""
    from fedgen_debug.experiments.sweep import Arm, Comparison

    return [Comparison(kind, tuple(Arm(name, runs[kind, name][1], runs[kind, name][0]) for name in ("before", "after")),
                       {"kind": kind}) for kind in ("char", "word")]


def queue_lm_stage(data: str, concat_fraction: float, out: str, seed: int, preset: str, vocab_size: int,
                   workers):
    """Prints the stage's header and queues its four runs on `workers` (`runs.side_by_side.SideBySide`;
    in one process they train here, now): char before, char after, word before, word after. With two
    workers each kind's pair trains side by side. Returns what `finish_lm_stage` takes (an
    `experiments.sweep.Sweep`)."""
    from fedgen_debug.experiments.sweep import Sweep

    runs = stage_runs(data, concat_fraction, out, seed, preset, vocab_size)
    together = "" if workers.in_process else " side by side"
    print(f"\n[text]   training the DP-FedAvg char- and word-LM before the bug (0%) and after it "
          f"({concat_fraction:.0%}){together}; re-running resumes", flush=True)
    return Sweep(stage_comparisons(runs), workers).queue()


def finish_lm_stage(queued, samples: int = 5000) -> dict:
    """Waits for each kind's pair and analyses it (the char pair while the word pair trains), prints the
    tables, each model's ε and the verdict; returns the stage's summary. `samples` per model:
    post-processing (no ε); more samples, a sharper z (the verdicts' statistics are sampled shares)."""
    from fedgen_debug.analysis.diagnose import diagnose
    from fedgen_debug.cli.diagnose_cmd import brief, brief_lines
    from fedgen_debug.cli.lm_cmd import format_report
    from fedgen_debug.cli.privacy_flags import privacy_lines
    from fedgen_debug.analysis.lm_analysis import analyze_lm

    def analyze(comparison) -> dict:
        kind, dirs = comparison.name, comparison.run_dirs
        for name in ("before", "after"):
            print(f"         {kind}-LM {name}:")
            print("\n".join("       " + line for line in privacy_lines(dirs[name])))
        before, after = dirs["before"], dirs["after"]
        report = analyze_lm(after, before, samples=samples)
        for line in format_report(report, after, 20):
            print("         " + line.replace("current", "after (bug)").replace("baseline", "before"))
        summary = {"run_dirs": {"before": before, "after": after},
                   "epsilon": {"before": report["baseline"]["privacy"]["run"]["epsilon"],
                               "after": report["current"]["privacy"]["run"]["epsilon"]},
                   "tokenization_bug_suspected": report["tokenization_bug_suspected"],
                   "evidence": report["evidence"]}
        if kind == "char":
            summary["top20_with_space"] = {"before": report["baseline"]["top_k_with_space"],
                                           "after": report["current"]["top_k_with_space"]}
        # How the pair's samples differ beyond the named check (`fedgen-debug diagnose BEFORE AFTER`), on the
        # samples the check has just drawn and released, with its verdict: nothing drawn or analysed twice.
        summary["diagnosis"] = brief(diagnose(before, after, samples=samples, named_report=report))
        for line in brief_lines(summary["diagnosis"], f"B = {kind}-LM after, A = before"):
            print("         " + line)
        return summary

    rows = queued.collect(analyze)
    return {comparison.name: row for comparison, row in zip(queued.comparisons, rows)}
