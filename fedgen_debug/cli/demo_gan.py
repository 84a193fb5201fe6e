"""The demo's GAN stage (paper §6): pixel inversion on a fraction of devices → GANs on low- and
high-accuracy users (T4, strict selection) → grids, each GAN's ε and the verdict; then the fixed
pipeline → the verdict clears."""

from __future__ import annotations

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


def run_gan_stage(data: str, invert_fraction: float, out: str, seed: int, preset: str = "demo",
                  samples: int = 1000) -> dict:
    from fedgen_debug.cli.gan_cmd import format_report
    from fedgen_debug.cli.privacy_flags import privacy_lines
    from fedgen_debug.runs import store
    from fedgen_debug.scenarios.gan import train_gan, train_public_primary
    from fedgen_debug.scenarios.gan_report import analyze_gan

    summary = {}
    primary = os.path.join(out, store.PRIMARY)
    if not os.path.exists(primary):
        print("\n[images] training the primary CNN on clean public stand-in handwriting", flush=True)
        train_public_primary(primary, preset, seed)
    runs = stage_runs(data, invert_fraction, out, seed, preset)
    for phase in PHASES:
        print(f"\n[images] {phase.replace('_', ' ')}: DP-FedAvg-GANs on low- and high-accuracy users "
              "(T4, DP 25th/75th percentile thresholds, strict selection); re-running resumes", flush=True)
        for side in ("low", "high"):
            run, run_dir = runs[phase, side]
            train_gan(run, run_dir)
            print(f"         {side}-accuracy GAN:")
            print("\n".join("       " + line for line in privacy_lines(run_dir)))
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
