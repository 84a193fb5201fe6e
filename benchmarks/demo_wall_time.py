"""Benchmark: wall time of the demo scenario (`fedgen-debug demo`, what `make demo` runs after the
install), stage by stage, each in a fresh process as a newcomer runs it, plus the training time of each
run directory (sum of the per-round seconds in its server/timing.csv). Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/demo_wall_time.py [--stages gan] [--preset demo] [--out DIR] [--code DIR]

Without --out it works in a temporary directory (nothing resumes, so every run trains from scratch).
The demo charges a private ledger inside that directory, never the user's. `--code DIR` runs another
copy of the package (e.g. the code before a change, `pip install --no-deps --target DIR .` at that
commit) with this venv's stack, so before and after are measured on the same machine in one session.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time


def train_seconds(timing_csv: str) -> tuple[int, float]:
    with open(timing_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return len(rows), sum(float(r["seconds"]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stages", default="data,lm,gan")
    parser.add_argument("--preset", default="demo", choices=("demo", "test"))
    parser.add_argument("--out", help="run directory (default: a temporary one, deleted afterwards)")
    parser.add_argument("--code", help="a directory holding another fedgen_debug package to run instead")
    args = parser.parse_args()
    cli = [sys.executable, "-c", "import sys; from fedgen_debug.cli.main import main; sys.exit(main())"]
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = os.path.abspath(args.code)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.abspath(args.out or os.path.join(tmp, "demo"))
        env["FEDGEN_DEBUG_LEDGER"] = os.path.join(os.path.dirname(os.path.abspath(out)), "demo-wall-time-ledger")
        # Stages run one process each, but the demo settles a population's budget from the stages it is
        # asked for: the benchmark's own ledger has no limit instead.
        subprocess.run([*cli, "ledger", "budget", "*", "--epsilon", "inf", "--reason", "demo_wall_time benchmark"],
                       check=True, stdout=subprocess.DEVNULL, env=env, cwd=tmp)
        walls = []
        for stage in args.stages.split(","):
            started = time.perf_counter()
            subprocess.run([*cli, "demo", "--out", out, "--stages", stage, "--preset", args.preset], check=True,
                           stdout=subprocess.DEVNULL, env=env, cwd=tmp)  # not the checkout: `-c` puts the cwd first
            walls.append((stage, time.perf_counter() - started))
        print(f"{'stage':<8}{'wall s':>9}")
        for stage, seconds in walls:
            print(f"{stage:<8}{seconds:>9.0f}")
        print(f"{'total':<8}{sum(s for _, s in walls):>9.0f}\n")
        print(f"{'run directory':<44}{'rounds':>7}{'train s':>9}")
        for root, _, files in sorted(os.walk(out)):
            if "timing.csv" in files:
                rounds, seconds = train_seconds(os.path.join(root, "timing.csv"))
                print(f"{os.path.relpath(os.path.dirname(root), out):<44}{rounds:>7}{seconds:>9.0f}")


if __name__ == "__main__":
    main()
