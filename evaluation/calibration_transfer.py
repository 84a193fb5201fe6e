"""Does a calibration measured on one source of data hold on another? Clean replicate runs of two or more
sources (e.g. synthetic writers and real FEMNIST at the same settings), and for each source:

- its clean pairs diagnosed against a calibration of every *other* source's runs (transfer), applied as
  `diagnose` applies a calibration to data none of its sources is (widened to the pair's own spread,
  `calibration.training_noise_for`; the unwidened count in brackets): the false alarms a modeler whose data
  is new to the calibration would see;
- its clean pairs left out of a calibration of its own source (what `diagnose` uses for runs on a source
  the calibration measured);
- each property's training noise τ by source, and its ratio to the first source's;
- each `--pair A:B` (a fault run B against a clean run A of one source) diagnosed against the calibration
  of its own source, of the other sources, and of all (the envelope), each without run A: what the
  envelope costs in detection.

  .venv/bin/python evaluation/calibration_transfer.py --kind gan \\
      --source 'runs/t1/images-clean-seed*' --source 'runs/femnist*/images-clean-seed*' --out transfer.json

Property values are cached beside the runs as `any_bug_table` caches them (1,000 samples, seed 0).
Reads released artefacts only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from any_bug_table import values_of  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import calibration_store, diagnose  # noqa: E402


def _runs(pattern: str) -> list[str]:
    runs = sorted(d for d in glob.glob(pattern) if os.path.isdir(os.path.join(d, "released")))
    if not runs:
        raise SystemExit(f"no runs match {pattern!r}")
    return runs


def _alarms(rows_by_pair: dict, calibration: C.Calibration) -> dict:
    tops = [C.apply(rows, calibration)[0] for rows in rows_by_pair.values()]
    worst = sorted(tops, key=lambda t: -abs(t["calibrated_z"] or 0.0))[:3]
    return {"pairs": len(tops), "alarms": sum(t["significant"] for t in tops),
            "largest": [(t["property"], round(t["calibrated_z"], 2)) for t in worst]}


def _fault_pair(args, pair: str, run_dirs: list[str], values: list, data: list, rows: dict) -> dict:
    """One fault pair A:B against its own source's, the other sources' and all sources' calibration, each
    estimated without the clean run A."""
    clean, fault = pair.split(":")
    fault_values, unhealthy = values_of(args.kind, fault, args.samples)
    clean_values, _ = values_of(args.kind, clean, args.samples)
    source = calibration_store.run_data(clean)
    excluded = {run_dirs.index(clean)} if clean in run_dirs else set()
    compared = diagnose.compare_values(args.kind, clean_values, fault_values)
    out = {"pair": pair, "data": source, "unhealthy": unhealthy}
    print(f"\n{pair} ({source}){' UNHEALTHY: ' + unhealthy if unhealthy else ''}")
    for name, keep in (("own source", lambda s: s == source), ("other sources", lambda s: s != source),
                       ("all sources", lambda s: True)):
        kept = {p: r for p, r in rows.items() if keep(data[p[0]]) and not set(p) & excluded}
        noise, dof, _ = C.estimate_by_source(kept, "replicate", data)
        calibration = C.Calibration(name, args.kind, "-", "replicate", noise, dof, C.threshold_for(len(compared)), {})
        calibration = calibration.widened() if name == "other sources" else calibration
        ranked = C.apply(compared, calibration)
        top = [(c["property"], c["family"], round(c["calibrated_z"], 2)) for c in ranked[:3]]
        out[name] = {"differ": any(c["significant"] for c in ranked), "top": top}
        print(f"  {name:14s} differ {'YES' if out[name]['differ'] else 'no ':3s}  {top}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", required=True, choices=("gan", "char", "word"))
    parser.add_argument("--source", action="append", required=True, help="a glob of one source's clean runs")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--pair", action="append", default=[], help="A:B, a fault run B against a clean run A")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    if len(args.source) < 2:
        parser.error("give two or more --source globs")
    run_dirs, values, data = [], [], []
    for pattern in args.source:
        for run in _runs(pattern):
            run_values, unhealthy = values_of(args.kind, run, args.samples)
            if unhealthy:
                print(f"left out (unhealthy: {unhealthy}): {run}")
                continue
            run_dirs.append(run)
            values.append(run_values)
            data.append(calibration_store.run_data(run) or pattern)
    sources = list(dict.fromkeys(data))
    if len(sources) < 2:
        raise SystemExit(f"the runs train on one source of data only ({sources[0]})")
    pairs = C.all_pairs(len(run_dirs), data)
    rows = {p: diagnose.compare_values(args.kind, values[p[0]], values[p[1]]) for p in pairs}
    properties = len(next(iter(rows.values())))
    own = {s: C.estimate_by_source({p: r for p, r in rows.items() if data[p[0]] == s}, "replicate", data)
           for s in sources}   # (noise, degrees of freedom, listed)
    left_out = C.false_alarms_left_out(rows, "replicate", args.kind, data)
    result = {"kind": args.kind, "samples": args.samples, "sources": {}}
    for s in sources:
        mine = {p: r for p, r in rows.items() if data[p[0]] == s}
        others = {p: r for p, r in rows.items() if data[p[0]] != s}
        noise, dof, _ = C.estimate_by_source(others, "replicate", data)
        unwidened = C.Calibration("others", args.kind, "-", "replicate", noise, dof, C.threshold_for(properties), {})
        transfer = unwidened.widened()   # as diagnose applies it to data none of its sources is
        mine_left_out = [d for d in left_out["details"] if d["data"] == s]
        result["sources"][s] = {
            "runs": sum(d == s for d in data), "pairs": len(mine),
            "against_the_other_sources": _alarms(mine, transfer),
            "against_the_other_sources_unwidened": _alarms(mine, unwidened),
            "left_out_of_its_own_source": {"pairs": len(mine_left_out),
                                           "alarms": sum(d["alarm"] for d in mine_left_out)},
            "training_noise": {k: v.training_noise for k, v in sorted(own[s][0].items())}}
    first = sources[0]
    print(f"{'source':60s} runs pairs  vs others (unwidened)  left out of own")
    for s, r in result["sources"].items():
        t, lo = r["against_the_other_sources"], r["left_out_of_its_own_source"]
        raw = r["against_the_other_sources_unwidened"]
        print(f"{s[:60]:60s} {r['runs']:4d} {r['pairs']:5d} {t['alarms']:4d}/{t['pairs']:<4d} "
              f"({raw['alarms']:3d})      "
              f"{lo['alarms']:4d}/{lo['pairs']:<4d}"
              f"  largest vs others: {t['largest']}")
    print(f"\ntraining noise τ by source, and its ratio to {first}'s")
    for name in result["sources"][first]["training_noise"]:
        base = result["sources"][first]["training_noise"][name]
        cells = [f"{result['sources'][s]['training_noise'].get(name, float('nan')):9.4f}" for s in sources]
        ratios = [f"{result['sources'][s]['training_noise'].get(name, 0.0) / base:5.2f}" if base else "    -"
                  for s in sources[1:]]
        print(f"  {name:22s} {' '.join(cells)}  {' '.join(ratios)}")
    result["pairs"] = [_fault_pair(args, pair, run_dirs, values, data, rows) for pair in args.pair]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
