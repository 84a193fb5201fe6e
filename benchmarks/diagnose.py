"""Benchmark: seconds `diagnose` takes on a GAN pair and on a char-LM pair of demo size (issue 55 target:
≤ 30 s each on 2 cores), against the named check alone (`analyze_gan` / `analyze_lm`, which diagnose runs
first) measured in the same run, with their ratio. Prints numbers, then whether the target is met:

  .venv/bin/python benchmarks/diagnose.py [--store runs/demo] [--samples 1000] [--repeats 3]

The pairs are the demo's: its with-bug GANs (A = high accuracy, B = low) and its char-LMs (A = before,
B = after). Their `released/` sides (all diagnose reads) are copied from --store into a temporary
directory, since diagnose writes into B; if the store has none, `fedgen-debug demo --stages lm,gan` trains
them there first (~6 minutes; the demo settles their privacy budget, use --train-seed for other simulated
users if the ledger refuses). Three times per pair:

- first: the process's first `diagnose` of the pair (the samplers' and the primary CNN's graphs traced);
- named check / diagnose: the median over --repeats of each alone, once the graphs are traced;
- CLI: `fedgen-debug diagnose A B` as a user runs it, a fresh process (Python, TensorFlow imported).

The target is judged on the slowest of first and CLI. The machine's load average is printed: other
processes on the 2 cores make every number larger.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: E402,F401

TARGET_SECONDS = 30.0
# (name, A, B, the named check's own kind) relative to a demo store.
PAIRS = (("GAN with bug, low vs high accuracy", "gan/with_bug-high-accuracy", "gan/with_bug-low-accuracy", "gan"),
         ("char-LM after vs before", "lm/char-lm-before", "lm/char-lm-after", "lm"))


def _cli() -> str:
    return os.path.join(os.path.dirname(sys.executable), "fedgen-debug")


def copy_pairs(store_dir: str, target: str) -> None:
    """The released side of each pair's runs, copied from `store_dir` into `target` (same relative paths)."""
    for _, *runs, _ in PAIRS:
        for relative in runs:
            shutil.copytree(os.path.join(store_dir, relative, "released"), os.path.join(target, relative, "released"))


def train_pairs(target: str, seed: int) -> None:
    print(f"no demo runs in the store: training them with `fedgen-debug demo --stages lm,gan --seed {seed}` "
          f"into {target} (~6 minutes)", flush=True)
    subprocess.run([_cli(), "demo", "--out", target, "--stages", "lm,gan", "--seed", str(seed)], check=True,
                   stdout=subprocess.DEVNULL)


def named_check(kind: str, run_a: str, run_b: str, samples: int) -> None:
    if kind == "gan":
        from fedgen_debug.analysis.gan_report import analyze_gan

        analyze_gan(run_b, run_a, samples=samples)
    else:
        from fedgen_debug.analysis.lm_analysis import analyze_lm

        analyze_lm(run_b, run_a, samples=samples)


def seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    from fedgen_debug.analysis.diagnose import diagnose

    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default="runs/demo", help="a demo's --out (made by `make demo`)")
    parser.add_argument("--samples", type=int, default=1000, help="samples per model (diagnose's default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-seed", type=int, default=0, help="--seed of the demo trained if the store has none")
    args = parser.parse_args()
    present = all(os.path.isdir(os.path.join(args.store, r, "released")) for _, *runs, _ in PAIRS for r in runs)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.samples} samples per model; "
          f"runs {'copied from ' + args.store if present else 'trained here'}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-diagnose-") as root:
        if present:
            copy_pairs(args.store, root)
        else:
            train_pairs(root, args.train_seed)
        for name, a, b, kind in PAIRS:
            run_a, run_b = os.path.join(root, a), os.path.join(root, b)
            first = seconds(lambda: diagnose(run_a, run_b, samples=args.samples))
            alone, full = [], []
            for _ in range(args.repeats):
                alone.append(seconds(lambda: named_check(kind, run_a, run_b, args.samples)))
                full.append(seconds(lambda: diagnose(run_a, run_b, samples=args.samples)))
            cli = seconds(lambda: subprocess.run([_cli(), "diagnose", run_a, run_b, "--samples", str(args.samples)],
                                                 check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            rows.append((name, statistics.median(alone), statistics.median(full), first, cli))
    print(f"{'pair':<36}{'named check':>12}{'diagnose':>10}{'ratio':>7}{'first':>8}{'CLI':>8}   seconds")
    for name, alone, full, first, cli in rows:
        print(f"{name:<36}{alone:>12.2f}{full:>10.2f}{full / alone:>7.2f}{first:>8.2f}{cli:>8.2f}")
    slowest = max(max(first, cli) for *_, first, cli in rows)
    print(f"target ≤ {TARGET_SECONDS:g} s per pair (slowest of first call and CLI): "
          f"{'met' if slowest <= TARGET_SECONDS else 'NOT met'} ({slowest:.1f} s)")


if __name__ == "__main__":
    main()
