"""Benchmark: wall time of the demo scenario (`fedgen-debug demo`, what `make demo` runs after the
install), stage by stage, plus the training time of each run directory (sum of the per-round seconds
in its server/timing.csv). Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/demo_wall_time.py [--stages gan] [--preset demo] [--gan-rounds N] [--out DIR] [--code DIR]
      [--per-stage]

By default the stages run in one `fedgen-debug demo` process, as `make demo` runs them, and a stage's
time runs from its first line of output to the next stage's (the data stage from the process's start:
imports and the privacy budget included). `--per-stage` runs each stage in a fresh process instead (each
imports TensorFlow and renders the synthetic writers again: about 25 s more in all).
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


# How the first line of a stage starts (`cli.demo_lm`, `cli.demo_gan`: the primary CNN, unless it exists):
# where the stage before it ended. The data stage's lines start with "[text]" and "[images]" too.
STAGE_STARTS = {"lm": ("[text]   training",), "gan": ("[images] training the primary CNN", "[images] with bug")}


def one_process(demo: list[str], stages: list[str], env: dict, cwd: str) -> list[tuple[str, float]]:
    """[(stage, seconds)] of one `fedgen-debug demo --stages ...` process, from its output's timing."""
    started = time.perf_counter()
    marks = [(stages[0], started)]
    with subprocess.Popen([*demo, "--stages", ",".join(stages)], stdout=subprocess.PIPE, text=True,
                          env={**env, "PYTHONUNBUFFERED": "1"}, cwd=cwd) as process:  # cwd: as below
        for line in process.stdout:
            for stage in stages[1:]:
                if line.startswith(STAGE_STARTS[stage]) and stage not in dict(marks):
                    marks.append((stage, time.perf_counter()))
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, process.args)
    ends = [t for _, t in marks[1:]] + [time.perf_counter()]
    return [(stage, end - start) for (stage, start), end in zip(marks, ends)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stages", default="data,lm,gan")
    parser.add_argument("--preset", default="demo", choices=("demo", "test"))
    parser.add_argument("--gan-rounds", type=int, help="the demo's --gan-rounds (default: the demo's default)")
    parser.add_argument("--out", help="run directory (default: a temporary one, deleted afterwards)")
    parser.add_argument("--code", help="a directory holding another fedgen_debug package to run instead")
    parser.add_argument("--per-stage", action="store_true", help="each stage in a fresh process (the default: "
                        "one process for all, as `make demo`)")
    args = parser.parse_args()
    cli = [sys.executable, "-c", "import sys; from fedgen_debug.cli.main import main; sys.exit(main())"]
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = os.path.abspath(args.code)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.abspath(args.out or os.path.join(tmp, "demo"))
        env["FEDGEN_DEBUG_LEDGER"] = os.path.join(os.path.dirname(os.path.abspath(out)), "demo-wall-time-ledger")
        # The demo settles a population's budget from the stages it is asked for (with --per-stage, one
        # at a time) and refuses a second demo of the same users: the benchmark's own ledger has no limit.
        subprocess.run([*cli, "ledger", "budget", "*", "--epsilon", "inf", "--reason", "demo_wall_time benchmark"],
                       check=True, stdout=subprocess.DEVNULL, env=env, cwd=tmp)
        demo = [*cli, "demo", "--out", out, "--preset", args.preset]
        if args.gan_rounds is not None:
            demo += ["--gan-rounds", str(args.gan_rounds)]
        stages = args.stages.split(",")
        if args.per_stage:
            walls = []
            for stage in stages:
                started = time.perf_counter()
                subprocess.run([*demo, "--stages", stage], check=True, stdout=subprocess.DEVNULL, env=env,
                               cwd=tmp)  # not the checkout: `-c` puts the cwd first
                walls.append((stage, time.perf_counter() - started))
        else:
            walls = one_process(demo, stages, env, tmp)
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
