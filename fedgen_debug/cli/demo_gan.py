"""The demo's GAN stage (paper §6): pixel inversion on a fraction of devices → GANs on low- and
high-accuracy users (T4, strict selection) → grids, each GAN's ε and the verdict, and the diagnosis of
the pair (`analysis.diagnose`: how the low-accuracy GAN's samples differ, by family); then the fixed
pipeline → the verdict clears."""

from __future__ import annotations

import os

PHASES = ("with_bug", "after_fix")


def primary_path(out: str) -> str:
    """The stage's one public primary CNN, which every run copies."""
    from fedgen_debug.runs import store

    return os.path.join(out, store.PRIMARY)


# `make demo`'s GANs train 150 rounds, not the demo preset's 200 (`train-gan`'s default): the last 50
# rounds were minutes of the demo and changed no verdict, at a cost in sample quality
# (docs/performance.md, "Fewer demo GAN rounds": in 3 demo runs every GAN's dark-background share is the same
# from round 10 to 200; `evaluation/gan_quality.py --measure-at 150` over 5 seeds: Fréchet 120 against
# 89 at 200, blanks 9% and 20% in 2 seeds against at most 2%). `demo --gan-rounds 200` trains the preset's.
DEMO_GAN_ROUNDS = 150


def stage_runs(data: str, invert_fraction: float, out: str, seed: int, preset: str, rounds: int | None = None) -> dict:
    """{(phase, "low"|"high"): (GANRun, run_dir)}; every run copies the one public primary CNN.
    `rounds`: each GAN's (None: the preset's)."""
    from fedgen_debug.training.gan_run import GANRun

    primary = primary_path(out)
    runs = {}
    for phase, fraction in zip(PHASES, (invert_fraction, 0.0)):
        for side in ("low", "high"):
            runs[phase, side] = (GANRun(data, f"by-user-accuracy:{side}", fraction, preset, seed=seed, primary=primary,
                                        rounds=rounds),
                                 os.path.join(out, f"{phase}-{side}-accuracy"))
    return runs


def stage_comparisons(runs: dict) -> list:
    """One comparison a phase: its low-accuracy GAN against its high-accuracy one."""
    from fedgen_debug.experiments.sweep import Arm, Comparison

    return [Comparison(phase, tuple(Arm(side, runs[phase, side][1], runs[phase, side][0]) for side in ("low", "high")),
                       {"phase": phase}) for phase in PHASES]


def _train_primary(path: str, preset: str, seed: int) -> None:
    from fedgen_debug.experiments.gan import train_public_primary

    train_public_primary(path, preset, seed)


def queue_primary(out: str, preset: str, seed: int, workers):
    """On worker processes: queues the primary CNN's training (returns its future; None if it exists), so
    that a worker trains it as soon as the calls queued before it leave one free (the demo queues it behind
    the LM runs: it trains while this process analyses the word-LMs). In one process: None (the stage
    trains it when it starts)."""
    path = primary_path(out)
    if workers.in_process or os.path.exists(path):
        return None
    os.makedirs(out, exist_ok=True)
    return workers.submit(_train_primary, path, preset, seed)


def run_gan_stage(data: str, invert_fraction: float, out: str, seed: int, preset: str, workers,
                  primary=None, samples: int = 1000, rounds: int | None = None) -> dict:
    """`workers` (`runs.side_by_side.SideBySide`): a phase's pair trains, on two workers side by side or
    here one after the other; then this process analyses it, while the workers train the next phase's
    pair. Why a pair at a time on workers: with every GAN queued at once, a free worker took the
    after-fix GANs beside the with-bug low GAN (the longest run), which then trained slower than alone,
    and the with-bug verdict came later. A pair at a time, both verdicts come sooner; the stage takes a
    little longer, the other worker idle while the with-bug low GAN finishes alone. Earlier, queued
    largest first (the with-bug low GAN beside the after-fix pair, the with-bug high one last) the stage
    took as long as phase by phase and printed the with-bug verdict last (timings: docs/performance.md).
    `primary`: the future of
    `queue_primary`, if it queued the primary CNN's training; else the stage trains it if it is missing.
    `rounds`: each GAN's (None: the preset's)."""
    from fedgen_debug.analysis.diagnose import diagnose
    from fedgen_debug.cli.diagnose_cmd import brief, brief_lines
    from fedgen_debug.cli.gan_cmd import format_report
    from fedgen_debug.cli.privacy_flags import privacy_lines
    from fedgen_debug.analysis.gan_report import analyze_gan
    from fedgen_debug.experiments.sweep import run_sweep
    from fedgen_debug.training.presets import gan_training_config

    if primary is not None or not os.path.exists(primary_path(out)):
        print("\n[images] training the primary CNN on clean public stand-in handwriting", flush=True)
        (primary or workers.submit(_train_primary, primary_path(out), preset, seed)).result()
    runs = stage_runs(data, invert_fraction, out, seed, preset, rounds)
    preset_rounds = gan_training_config(preset).training.rounds
    rounds = preset_rounds if rounds is None else rounds
    told = "" if rounds == preset_rounds else f" (the {preset} preset's, train-gan's default: {preset_rounds})"

    def announce(comparison) -> None:
        print(f"\n[images] {comparison.name.replace('_', ' ')}: DP-FedAvg-GANs on low- and high-accuracy users "
              f"(T4, DP 25th/75th percentile thresholds, strict selection), {rounds} rounds each{told}; "
              "re-running resumes", flush=True)

    def analyze(comparison) -> dict:
        dirs = comparison.run_dirs
        for side in ("low", "high"):
            print(f"         {side}-accuracy GAN:")
            print("\n".join("       " + line for line in privacy_lines(dirs[side])))
        report = analyze_gan(dirs["low"], dirs["high"], samples=samples)
        for line in format_report(report):
            print("         " + line)
        # How the pair differs beyond the named check (`fedgen-debug diagnose HIGH LOW`), on the samples
        # the check has just drawn and with its verdict: nothing drawn or analysed twice.
        diagnosis = brief(diagnose(dirs["high"], dirs["low"], samples=samples, named_report=report))
        for line in brief_lines(diagnosis, "B = low, A = high accuracy"):
            print("         " + line)
        return {"run_dirs": dirs, "pixel_inversion_suspected": report["pixel_inversion_suspected"],
                "epsilon": {"low": report["current"]["privacy"]["run"]["epsilon"],
                            "high": report["compare"]["privacy"]["run"]["epsilon"]},
                "inconclusive": report["inconclusive"], "evidence": report["evidence"],
                "primary_fit": report["primary_fit"], "diagnosis": diagnosis}

    # The next phase's pair is queued once this one has trained, to train while this one is analysed.
    comparisons = stage_comparisons(runs)
    rows = run_sweep(comparisons, analyze, workers=workers, ahead=1, announce=announce)
    return {comparison.name: row for comparison, row in zip(comparisons, rows)}
