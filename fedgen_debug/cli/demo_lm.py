"""The demo's LM stage (paper §5): char- and word-LM before (0%) and after (10%) the tokenization
bug, the after-run analyzed against the before-run, tables side by side and the verdict."""

from __future__ import annotations

import os


def run_lm_stage(data: str, concat_fraction: float, out: str, seed: int, preset: str = "demo",
                 vocab_size: int = 10_000, samples: int = 2000) -> dict:
    from fedgen_debug.cli.lm_cmd import format_report
    from fedgen_debug.scenarios.lm import LMRun, train_lm
    from fedgen_debug.scenarios.lm_analysis import analyze_lm

    summary = {}
    for kind in ("char", "word"):
        before, after = (os.path.join(out, f"{kind}-lm-{name}") for name in ("before", "after"))
        print(f"\n[text]   training the DP-FedAvg {kind}-LM before the bug (0%) and after it "
              f"({concat_fraction:.0%}); re-running resumes", flush=True)
        # Different seeds: the before-run is an independent replicate, not the same noise.
        train_lm(LMRun(kind, data, 0.0, preset, seed=seed, vocab_size=vocab_size), before)
        train_lm(LMRun(kind, data, concat_fraction, preset, seed=seed + 1, vocab_size=vocab_size), after)
        report = analyze_lm(after, before, samples=samples)
        for line in format_report(report, after, 20):
            print("         " + line.replace("current", "after (bug)").replace("baseline", "before"))
        summary[kind] = {"run_dirs": {"before": before, "after": after},
                         "tokenization_bug_suspected": report["tokenization_bug_suspected"],
                         "evidence": report["evidence"]}
        if kind == "char":
            summary[kind]["top20_with_space"] = {"before": report["baseline"]["top_k_with_space"],
                                                 "after": report["current"]["top_k_with_space"]}
    return summary
