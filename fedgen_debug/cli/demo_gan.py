"""The demo's GAN stage (paper §6): pixel inversion on a fraction of devices → GANs on low- and
high-accuracy users (T4, strict selection) → grids, each GAN's ε and the verdict; then the fixed
pipeline → the verdict clears."""

from __future__ import annotations

import contextlib
import os

PHASES = ("with_bug", "after_fix")


def stage_runs(data: str, invert_fraction: float, out: str, seed: int, preset: str) -> dict:
    """{(phase, "low"|"high"): (GANRun, run_dir)}; every run copies the one public primary CNN."""
    from fedgen_debug.runs import store
    from fedgen_debug.scenarios.gan import GANRun

    primary = os.path.join(out, store.PRIMARY)
    runs = {}
    for phase, fraction in zip(PHASES, (invert_fraction, 0.0)):
        for side in ("low", "high"):
            runs[phase, side] = (GANRun(data, f"by-user-accuracy:{side}", fraction, preset, seed=seed, primary=primary),
                                 os.path.join(out, f"{phase}-{side}-accuracy"))
    return runs


def _train(run, run_dir: str) -> None:
    from fedgen_debug.scenarios.gan import train_gan

    train_gan(run, run_dir)


def run_gan_stage(data: str, invert_fraction: float, out: str, seed: int, preset: str = "demo",
                  samples: int = 1000, workers=None) -> dict:
    """`workers` (`runs.side_by_side.SideBySide`; default: one, this process): the four GANs train on
    them in the order with the bug low, high, then after the fix low, high, so with two workers a
    phase's pair trains side by side and the next phase starts as soon as a worker is free; this
    process analyses each phase's pair once both are trained."""
    from fedgen_debug.cli.gan_cmd import format_report
    from fedgen_debug.cli.privacy_flags import privacy_lines
    from fedgen_debug.runs import store
    from fedgen_debug.runs.side_by_side import SideBySide
    from fedgen_debug.scenarios.gan import train_public_primary
    from fedgen_debug.scenarios.gan_report import analyze_gan

    summary = {}
    primary = os.path.join(out, store.PRIMARY)
    if not os.path.exists(primary):
        print("\n[images] training the primary CNN on clean public stand-in handwriting", flush=True)
        train_public_primary(primary, preset, seed)
    runs = stage_runs(data, invert_fraction, out, seed, preset)
    order = [(phase, side) for phase in PHASES for side in ("low", "high")]
    with SideBySide(1) if workers is None else contextlib.nullcontext(workers) as pool:
        trained = {}
        for phase in PHASES:
            print(f"\n[images] {phase.replace('_', ' ')}: DP-FedAvg-GANs on low- and high-accuracy users "
                  "(T4, DP 25th/75th percentile thresholds, strict selection); re-running resumes", flush=True)
            # On workers every run is queued at once (a free worker takes the next); here, a phase's pair.
            for key in [(phase, side) for side in ("low", "high")] if pool.in_process else order:
                if key not in trained:
                    trained[key] = pool.submit(_train, *runs[key])
            for side in ("low", "high"):
                trained[phase, side].result()
                print(f"         {side}-accuracy GAN:")
                print("\n".join("       " + line for line in privacy_lines(runs[phase, side][1])))
            dirs = {side: runs[phase, side][1] for side in ("low", "high")}
            report = analyze_gan(dirs["low"], dirs["high"], samples=samples)
            for line in format_report(report):
                print("         " + line)
            summary[phase] = {"run_dirs": dirs, "pixel_inversion_suspected": report["pixel_inversion_suspected"],
                              "epsilon": {"low": report["current"]["privacy"]["run"]["epsilon"],
                                          "high": report["compare"]["privacy"]["run"]["epsilon"]},
                              "inconclusive": report["inconclusive"], "evidence": report["evidence"],
                              "primary_fit": report["primary_fit"]}
    return summary
