"""The demo's GAN stage (paper §6): pixel inversion on a fraction of devices → GANs on low- and
high-accuracy users (T4) → grids and the verdict; then the fixed pipeline → the verdict clears."""

from __future__ import annotations

import os


def run_gan_stage(data: str, invert_fraction: float, out: str, seed: int, preset: str = "demo",
                  samples: int = 1000) -> dict:
    from fedgen_debug.cli.gan_cmd import format_report
    from fedgen_debug.scenarios.gan import PRIMARY_FILE, GANRun, train_gan, train_public_primary
    from fedgen_debug.scenarios.gan_report import analyze_gan

    summary = {}
    primary = os.path.join(out, PRIMARY_FILE)
    if not os.path.exists(primary):
        print("\n[images] training the primary CNN on clean public stand-in handwriting", flush=True)
        train_public_primary(primary, preset, seed)
    for phase, fraction in (("with_bug", invert_fraction), ("after_fix", 0.0)):
        dirs = {side: os.path.join(out, f"{phase}-{side}-accuracy") for side in ("low", "high")}
        print(f"\n[images] {phase.replace('_', ' ')}: DP-FedAvg-GANs on low- and high-accuracy users "
              "(T4, DP 25th/75th percentile thresholds); re-running resumes", flush=True)
        for side, run_dir in dirs.items():
            train_gan(GANRun(data, f"by-user-accuracy:{side}", fraction, preset, seed=seed, primary=primary), run_dir)
        report = analyze_gan(dirs["low"], dirs["high"], samples=samples)
        for line in format_report(report):
            print("         " + line)
        summary[phase] = {"run_dirs": dirs, "pixel_inversion_suspected": report["pixel_inversion_suspected"],
                          "inconclusive": report["inconclusive"],
                          "evidence": report["evidence"]}
    return summary
