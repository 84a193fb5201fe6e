"""Benchmark: wall time of the demo scenario (`fedgen-debug demo`, what `make demo` runs after the
install), stage by stage, each in a fresh process as a newcomer runs it, plus the training time of each
run directory (sum of metrics.csv's per-round seconds). Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/demo_wall_time.py [--stages gan] [--preset demo] [--out DIR]

Without --out it works in a temporary directory (nothing resumes, so every run trains from scratch).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time


def train_seconds(metrics_csv: str) -> tuple[int, float]:
    with open(metrics_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return len(rows), sum(float(r["seconds"]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stages", default="data,lm,gan")
    parser.add_argument("--preset", default="demo", choices=("demo", "test"))
    parser.add_argument("--out", help="run directory (default: a temporary one, deleted afterwards)")
    args = parser.parse_args()
    cli = os.path.join(os.path.dirname(sys.executable), "fedgen-debug")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "demo")
        walls = []
        for stage in args.stages.split(","):
            started = time.perf_counter()
            subprocess.run([cli, "demo", "--out", out, "--stages", stage, "--preset", args.preset], check=True,
                           stdout=subprocess.DEVNULL)
            walls.append((stage, time.perf_counter() - started))
        print(f"{'stage':<8}{'wall s':>9}")
        for stage, seconds in walls:
            print(f"{stage:<8}{seconds:>9.0f}")
        print(f"{'total':<8}{sum(s for _, s in walls):>9.0f}\n")
        print(f"{'run directory':<44}{'rounds':>7}{'train s':>9}")
        for root, _, files in sorted(os.walk(out)):
            if "metrics.csv" in files:
                rounds, seconds = train_seconds(os.path.join(root, "metrics.csv"))
                print(f"{os.path.relpath(root, out):<44}{rounds:>7}{seconds:>9.0f}")


if __name__ == "__main__":
    main()
