"""Benchmark: seconds to compute a canary's random-sampling rank among --references random 3-word
suffixes after a 2-word prefix (`memorization.extraction.random_sampling_rank`), for the untrained
demo- and paper-size word-LMs (10K words), against a naive loop with one full model call per suffix
(timed on --naive-sample suffixes and extrapolated), with the ratio. Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/rs_rank.py [--references 2000000] [--naive-sample 200] [--batch-size N]

The papers rank each canary among 2×10⁶ references (ramaswamy2020 Sec. IV-A); the goal is at most a
minute per canary for the paper-size model on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: E402,F401
import tensorflow as tf  # noqa: E402

from fedgen_debug.memorization import extraction  # noqa: E402
from fedgen_debug.models.lm import build_lm  # noqa: E402
from fedgen_debug.training.presets import lm_model_config  # noqa: E402

NUM_IDS = 10_004        # 10K words + pad/oov/bos/eos (data.text.Vocabulary)
WORDS = np.arange(1, 10_001)
BOS = 10_002


def batched_seconds(model, prefix, canary, references: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, the canary's rank). On a shared machine the CPU
    seconds over the wall seconds tell how many of the cores the run actually had."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = extraction.random_sampling_rank(model, prefix, canary, WORDS, references, np.random.default_rng(0))
    return time.perf_counter() - started, time.process_time() - cpu_started, result.rank


def naive_seconds_per_suffix(model, prefix, suffixes: np.ndarray) -> float:
    """One model call on prefix + suffix per suffix, as a straightforward implementation would do."""
    model(np.array([prefix + list(suffixes[0])], np.int32))  # builds and warms up outside the timing
    started = time.perf_counter()
    for suffix in suffixes:
        ids = np.array([prefix + list(suffix)], np.int32)
        log_probs = tf.nn.log_softmax(model(ids, training=False))[0].numpy()
        float(sum(log_probs[len(prefix) - 1 + t, s] for t, s in enumerate(suffix)))
    return (time.perf_counter() - started) / len(suffixes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--references", type=int, default=2_000_000)
    parser.add_argument("--naive-sample", type=int, default=200, help="suffixes timed in the naive loop")
    parser.add_argument("--batch-size", type=int, default=extraction.SCORING_BATCH)
    parser.add_argument("--presets", default="demo,paper")
    args = parser.parse_args()
    extraction.SCORING_BATCH = args.batch_size
    rng = np.random.default_rng(1)
    prefix = [BOS, *rng.choice(WORDS, 2).tolist()]
    canary = rng.choice(WORDS, 3).tolist()
    print(f"{args.references:,} references, batch {args.batch_size:,}, {os.cpu_count()} cores")
    print(f"{'model':<16}{'parameters':>12}{'batched s':>11}{'CPU s':>8}{'rank':>12}{'naive s/suffix':>16}"
          f"{'naive s (extrap.)':>19}{'ratio':>8}")
    for preset in args.presets.split(","):
        model = build_lm(lm_model_config(preset, "word", NUM_IDS), seed=0)
        extraction.random_sampling_rank(model, prefix, canary, WORDS, 1000, rng)  # traces outside the timing
        seconds, cpu_seconds, rank = batched_seconds(model, prefix, canary, args.references)
        naive = naive_seconds_per_suffix(model, prefix, rng.choice(WORDS, (args.naive_sample, 3)))
        print(f"{'word-LM ' + preset:<16}{model.count_params():>12,}{seconds:>11.1f}{cpu_seconds:>8.1f}{rank:>12,}"
              f"{naive:>16.5f}"
              f"{naive * args.references:>19.0f}{naive * args.references / seconds:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
