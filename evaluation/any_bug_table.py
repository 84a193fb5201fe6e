"""The detection table of issue 55 from the runs `evaluation/any_bug.py` trained: for every fault pair, is it
detected beyond training noise, and at which rank is the fault's family; for every clean pair, a false alarm?

  .venv/bin/python evaluation/any_bug_table.py --kind gan --clean 'runs/any-bug-images/images-clean-seed*' \\
      --faults 'runs/any-bug-images/images-*-0.*-seed*' --out docs/any_bug_images.json

Honest protocol: each pair is diagnosed with a calibration estimated from the clean runs *not in the pair*
(leave-pair-out), so a pair never calibrates itself. Replicate pairs (T1 before/after, LMs): the clean
runs are replicates, every pair among them is a clean pair; a fault run `...-FAULT-FRACTION-seedN` is
compared with the clean run `...-clean-seed(N-1)`. Selection pairs (`--pair-type selection`, T4): clean
pairs `...-clean-seed(2S)-high` / `...-clean-seed(2S+1)-low`, fault pairs likewise. Property values are
computed once per run (1,000 samples, seed 0, as `diagnose` draws them) and cached beside the runs with
the run's health, under a digest of the property code. As `fedgen-debug calibrate` and `diagnose` do, an
unhealthy clean run calibrates nothing, and a fault pair with an unhealthy side is not a detection
(diagnose answers "cannot tell"; the row says why).
Named checks are not recomputed here: `any_bug.py`'s own rows carry them.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import inspect
import itertools
import json
import os
import pickle
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from any_bug import expected_families  # noqa: E402
from fedgen_debug.analysis import calibration as C  # noqa: E402
from fedgen_debug.analysis import diagnose, image_properties, text_properties  # noqa: E402

_NAME = re.compile(r"-(?P<fault>[a-z_]+)-(?P<fraction>[0-9.]+)-seed(?P<seed>\d+)(?P<side>-low|-high)?$")
_CLEAN_HIGH = re.compile(r"-clean-seed(?P<seed>\d+)-high$")


def _finished(run_dir: str) -> bool:
    return os.path.exists(os.path.join(run_dir, "released", "model_weights.npz"))


def _properties_version(kind: str) -> str:
    """A digest of the property code, so that cached values of an older definition are not reused."""
    module = image_properties if kind == "gan" else text_properties
    return hashlib.sha256(inspect.getsource(module).encode()).hexdigest()[:12]


def values_of(kind: str, run_dir: str, samples: int) -> tuple[dict, str | None]:
    """(property values, why the run's auxiliary is unhealthy or None), computed once per property version."""
    cache = os.path.join(run_dir, f"diagnose_values_{samples}_{_properties_version(kind)}.pkl")
    if os.path.exists(cache):
        with open(cache, "rb") as f:
            return pickle.load(f)
    values, drawn = diagnose.run_values(kind, run_dir, samples, 0)
    health = diagnose.health(kind, drawn)
    out = (values, None if health["healthy"] else health["reason"])
    with open(cache, "wb") as f:
        pickle.dump(out, f)
    return out


def _outcome(kind, fault, ranked) -> dict:
    families = [f for f in dict.fromkeys(c["family"] for c in ranked if c["significant"])]
    expected = expected_families(fault, kind) if fault != "clean" else ()
    ranks = [families.index(f) + 1 for f in expected if f in families]
    top = ranked[0]
    return {"detected": bool(families), "families": families[:4], "expected": list(expected),
            "expected_rank": min(ranks) if ranks else 0, "top_property": top["property"], "top_family": top["family"],
            "top_calibrated_z": round(top["calibrated_z"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("gan", "char", "word"), required=True)
    parser.add_argument("--pair-type", choices=("replicate", "selection"), default="replicate")
    parser.add_argument("--clean", nargs="+", required=True, help="globs of the clean runs")
    parser.add_argument("--faults", nargs="+", default=[], help="globs of the fault runs (B sides)")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    clean = sorted({d for g in args.clean for d in glob.glob(g) if _finished(d)})
    by_name = {os.path.basename(d): d for d in clean}
    values, unhealthy = {}, {}
    for d in clean:
        values[d], reason = values_of(args.kind, d, args.samples)
        if reason:   # as `fedgen-debug calibrate` does: a diverged auxiliary is not training noise
            unhealthy[d] = reason
            print(f"{os.path.basename(d)}: left out of the calibrations, unhealthy ({reason})", flush=True)
    unhealthy_clean = sorted(os.path.basename(d) for d in unhealthy)
    clean = [d for d in clean if d not in unhealthy]

    def compare(a, b):
        return diagnose.compare_values(args.kind, values[a], values[b])

    if args.pair_type == "replicate":
        clean_pairs = list(itertools.combinations(clean, 2))
    else:
        clean_pairs = []
        for d in clean:
            m = _CLEAN_HIGH.search(d)
            low = m and re.sub(r"seed\d+-high$", f"seed{int(m.group('seed')) + 1}-low", d)
            if low in clean:
                clean_pairs.append((d, low))
    rows_by_pair = {p: compare(*p) for p in clean_pairs}

    def left_out(excluded: set) -> C.Calibration:
        return C.left_out(rows_by_pair, excluded, args.pair_type, args.kind)

    table = []
    for a, b in clean_pairs:
        try:
            calibration = left_out({a, b})
        except ValueError as e:   # too few clean pairs left without this one
            print(f"{os.path.basename(b)}: not tested ({e})", flush=True)
            continue
        row = _outcome(args.kind, "clean", C.apply(rows_by_pair[(a, b)], calibration))
        table.append({"fault": "clean", "fraction": 0.0, "a": os.path.basename(a), "b": os.path.basename(b),
                      "calibration_dof": calibration.degrees_of_freedom, **row})
        print(json.dumps(table[-1]), flush=True)
    for b in sorted({d for g in args.faults for d in glob.glob(g) if os.path.isdir(d)}):
        m = _NAME.search(b)
        if not m or m.group("fault") == "clean" or not _finished(b):
            continue
        seed = int(m.group("seed"))
        if args.pair_type == "replicate":
            a = by_name.get(re.sub(r"-[a-z_]+-[0-9.]+-seed\d+$", f"-clean-seed{seed - 1}", os.path.basename(b)))
        else:
            a = re.sub(r"seed\d+-low$", f"seed{seed - 1}-high", b)
            a = a if _finished(a) else None
        if a is None or m.group("side") == "-high":
            continue
        if a not in values:
            values[a], unhealthy[a] = values_of(args.kind, a, args.samples)
        values[b], unhealthy[b] = values_of(args.kind, b, args.samples)
        calibration = left_out({a})
        row = _outcome(args.kind, m.group("fault"), C.apply(compare(a, b), calibration))
        if unhealthy.get(a) or unhealthy.get(b):   # diagnose answers "cannot tell": nothing detected
            row = {**row, "detected": False, "expected_rank": 0, "unhealthy": unhealthy.get(b) or unhealthy.get(a)}
        table.append({"fault": m.group("fault"), "fraction": float(m.group("fraction")), "seed": seed,
                      "a": os.path.basename(a), "b": os.path.basename(b),
                      "calibration_dof": calibration.degrees_of_freedom, **row})
        print(json.dumps(table[-1]), flush=True)
    clean_rows = [r for r in table if r["fault"] == "clean"]
    summary = {"kind": args.kind, "pair_type": args.pair_type, "samples": args.samples,
               "unhealthy_clean_runs": unhealthy_clean,
               "clean_pairs": len(clean_rows), "false_alarms": sum(r["detected"] for r in clean_rows), "rows": table}
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"clean pairs {summary['clean_pairs']}, false alarms {summary['false_alarms']}; "
          f"fault pairs {len(table) - len(clean_rows)}, detected {sum(r['detected'] for r in table if r['fault'] != 'clean')}, "
          f"expected family first {sum(r['expected_rank'] == 1 for r in table if r['fault'] != 'clean')}")


if __name__ == "__main__":
    main()
