"""Benchmark: seconds to draw an LM analysis' Monte-Carlo samples, the sampler as it ran before (each step
called eagerly: Keras drives the recurrent loop from Python, then a float64 softmax and one cumulative sum
over every symbol in NumPy) against `models.sampling.sample_until` (one traced graph a step, the inverse
CDF by blocks), with the ratio and whether both drew the same samples. Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/lm_sampling.py [--run RUN_DIR | --kind char|word] [--samples 5000]

`--run` samples a trained model (e.g. `runs/demo/lm/word-lm-after`); without it, an untrained model of
the demo preset (its samples run to the length limit more often than a trained model's).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedgen_debug.models.lm import BOW, EOW, build_lm, char_lm_config, word_lm_config  # noqa: E402
from fedgen_debug.models import sampling  # noqa: E402
from fedgen_debug.models.sampling import SAMPLING_BATCH, sample_until  # noqa: E402
from fedgen_debug.scenarios.lm import load_lm  # noqa: E402

WORD_IDS = 10_004  # the demo's 10K words + pad, oov, bos, eos


def eager_samples(model, start_id, stop_id, banned_ids, count, max_steps, seed) -> list[list[int]]:
    """The sampler before the traced graphs: the same loop and random stream, each step's draw eager."""
    def draw(prefix, uniforms):
        x = prefix
        for i, layer in enumerate(model.layers):  # the last-position path: output layer on the last step
            x = layer(x, training=False)
            if i == len(model.layers) - 2:
                x = x[:, -1]
        logits = x.numpy().astype(np.float64)
        logits[:, list(banned_ids)] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        return tf.constant((probs.cumsum(axis=1) < uniforms[:, None]).sum(axis=1).clip(0, probs.shape[1] - 1))

    rng, out = np.random.default_rng(seed), []
    for first in range(0, count, SAMPLING_BATCH):
        out.extend(sampling._sample_batch(draw, start_id, stop_id, min(SAMPLING_BATCH, count - first), max_steps, rng))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", help="a trained LM run directory (default: an untrained demo-preset model)")
    parser.add_argument("--kind", default="word", choices=("char", "word"))
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.run:
        model, vocab, run = load_lm(args.run)
        kind, max_length = run.kind, run.max_length
        ids = (BOW, EOW, [BOW]) if kind == "char" else (vocab.bos_id, vocab.eos_id, [vocab.pad_id, vocab.bos_id])
    else:
        kind = args.kind
        model = build_lm(char_lm_config("demo") if kind == "char" else word_lm_config("demo", WORD_IDS), seed=0)
        model.build((None, None))
        max_length = 16 if kind == "char" else 20
        ids = (BOW, EOW, [BOW]) if kind == "char" else (2, 3, [0, 2])
    steps = max_length + 1 if kind == "char" else max_length  # as sample_words / sample_sentences draw
    timed = {}
    for name, sampler in (("eager (before)", eager_samples), ("traced (now)", sample_until)):
        started = time.perf_counter()
        samples = sampler(model, *ids, args.samples, steps, args.seed)
        timed[name] = (time.perf_counter() - started, samples)
    (before, old), (now, new) = timed.values()
    print(f"{kind}-LM, {args.samples} samples ({args.run or 'untrained demo preset'}), "
          f"mean length {np.mean([len(s) for s in new]):.1f}")
    print(f"{'sampler':<16}{'seconds':>9}")
    for name, (seconds, _) in timed.items():
        print(f"{name:<16}{seconds:>9.2f}")
    print(f"ratio {before / now:.2f}; same samples: {old == new}")


if __name__ == "__main__":
    main()
