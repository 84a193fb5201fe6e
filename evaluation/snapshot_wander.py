"""Does a GAN's own snapshot wander say how noisy its training is on data no calibration measured? (Measured
2026-12-07, not built: docs/analysis.md, "a run's snapshot wander is no floor".)

A run's wander: each image property's mean over one released snapshot (64 samples of fixed public noise, so
consecutive snapshots differ only by training), its standard deviation over the last K snapshots; a pair's:
√2 × the smaller run's (a fault must not widen the noise it should stand out of). Per source of clean T1 runs:
each property's replicate training noise τ (its own clean pairs, 1,000 samples a run; and, where the shipped
`gan-demo-replicate` measured the source, its τ), the pairs' root-mean-square wander, and τ / wander. If that ratio
were about the same across sources, a pair on other data could take ratio × its own wander as a floor on its noise.

Then each `--pair A:B` (and, with --clean SOURCE, every clean pair of that source) against the shipped calibration
applied as to data it did not measure (widened), without and with that floor (τ_upper of a measured source ×
the pair's wander / that source's, the smallest over --floor-from sources).

  .venv/bin/python evaluation/snapshot_wander.py --source synthetic='runs/w/synthetic/images-clean-seed*' \\
      --source digits='runs/w/digits/images-clean-seed*' --floor-from synthetic --clean digits \\
      --pair runs/w/digits/images-clean-seed0:runs/w/digits/images-noise-0.5-seed1
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import itertools
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from any_bug_table import values_of  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import calibration_store, diagnose, gan_report, image_properties  # noqa: E402
from fedgen_debug.runs import store  # noqa: E402

_wanders: dict[str, dict[str, float]] = {}


def run_wander(run: str, last: int) -> dict[str, float]:
    if run not in _wanders:
        means = []
        for _, images in sorted(gan_report.snapshots(run, last=last).items()):
            values = image_properties.image_properties(image_properties.as_unit_images((images + 1.0) / 2.0))
            means.append({k: float(np.nanmean(v)) for k, v in values.items()})
        _wanders[run] = {k: float(np.std([m[k] for m in means], ddof=1)) for k in means[0]}
    return _wanders[run]


def pair_wander(a: str, b: str, last: int) -> dict[str, float]:
    wa, wb = run_wander(a, last), run_wander(b, last)
    return {k: math.sqrt(2.0) * min(wa[k], wb[k]) for k in wa}


def finished(pattern: str) -> list[str]:
    return sorted(d for d in glob.glob(pattern) if store.is_finished(d))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", required=True, metavar="NAME=GLOB")
    parser.add_argument("--floor-from", default="", help="comma-separated source names the floor's ratio is taken from")
    parser.add_argument("--clean", help="a source name: its clean pairs against the widened calibration")
    parser.add_argument("--pair", action="append", default=[], metavar="A:B")
    parser.add_argument("--snapshots", type=int, default=6)
    args = parser.parse_args()
    shipped = calibration_store.named("gan-demo-replicate")
    runs = {name: finished(pattern) for name, pattern in (s.split("=", 1) for s in args.source)}
    tau, wander, tau_upper = {}, {}, {}
    for name, rs in runs.items():
        pairs = list(itertools.combinations(rs, 2))
        values = {r: values_of("gan", r, 1000)[0] for r in rs}
        noise, _ = C.estimate_noise([diagnose.compare_values("gan", values[a], values[b]) for a, b in pairs],
                                    "replicate", len(rs) - 1)
        measured = C.matching_source(list(shipped.by_source), calibration_store.run_data(rs[0]))
        own = shipped.by_source[measured]["properties"] if measured else {}
        tau[name] = {p: own[p].training_noise if p in own else n.training_noise for p, n in noise.items()}
        tau_upper[name] = {p: own[p].training_noise_upper for p in own}
        each = [pair_wander(a, b, args.snapshots) for a, b in pairs]
        wander[name] = {p: math.sqrt(float(np.mean([w[p] ** 2 for w in each]))) for p in each[0]}
        print(f"{name}: {len(rs)} runs, τ from {'the shipped calibration' if measured else 'its own pairs'}")
    names = sorted(set.intersection(*(set(t) & set(wander[s]) for s, t in tau.items())))
    print(f"\n{'property':22s}" + "".join(f" | {s:>10s} τ   wander  ratio" for s in tau))
    for p in names:
        cells = "".join(f" | {tau[s][p]:12.4f} {wander[s][p]:.4f} {tau[s][p] / wander[s][p] if wander[s][p] else math.nan:6.2f}"
                        for s in tau)
        print(f"{p:22s}{cells}")
    floor_from = [s for s in args.floor_from.split(",") if s]
    widened = shipped.widened()

    def floored(a: str, b: str) -> C.Calibration:
        wp = pair_wander(a, b, args.snapshots)
        properties = {}
        for p, n in widened.properties.items():
            floors = [tau_upper[s][p] * wp[p] / wander[s][p] for s in floor_from
                      if p in wp and p in tau_upper[s] and wander[s].get(p)]
            floor = min(floors) if floors else 0.0
            properties[p] = dataclasses.replace(n, training_noise=max(n.training_noise, floor),
                                                training_noise_upper=max(n.training_noise_upper, floor))
        return dataclasses.replace(widened, properties=properties)

    def top(rows: list[dict]) -> str:
        r = rows[0]
        return f"{'YES' if r['significant'] else 'no '} {r['family']:12s} {r['property']:20s} {r['calibrated_z']:7.2f}"

    pairs = list(itertools.combinations(runs[args.clean], 2)) if args.clean else []
    pairs += [tuple(p.split(":")) for p in args.pair]
    if pairs:
        print(f"\n{'A':24s} {'B':28s} | widened (today)                          | with the wander floor")
    for a, b in pairs:
        compared = diagnose.compare_values("gan", values_of("gan", a, 1000)[0], values_of("gan", b, 1000)[0])
        print(f"{os.path.basename(a):24s} {os.path.basename(b):28s} | {top(C.apply(compared, widened))} | "
              f"{top(C.apply(compared, floored(a, b)))}")


if __name__ == "__main__":
    main()
