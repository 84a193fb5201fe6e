"""Benchmark: seconds to draw an LM analysis' Monte-Carlo samples, the sampler as it ran before (each step
called eagerly: Keras drives the recurrent loop from Python, then a float64 softmax and one cumulative sum
over every symbol in NumPy) against the traced draw (one graph a step, the inverse CDF by blocks), both
through the analysis' own `sample_words` / `sample_sentences`, with the ratio and whether both drew the
same samples. Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/lm_sampling.py [--run RUN_DIR | --kind char|word] [--samples 5000]

`--run` samples a trained model (e.g. `runs/demo/lm/word-lm-after`); without it, an untrained model of
the demo preset (its samples run to the length limit more often than a trained model's).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: E402,F401
import tensorflow as tf  # noqa: E402

from fedgen_debug.data.text import Vocabulary  # noqa: E402
from fedgen_debug.models import sampling  # noqa: E402
from fedgen_debug.models.char_lm import sample_words  # noqa: E402
from fedgen_debug.models.lm import build_lm  # noqa: E402
from fedgen_debug.models.word_lm import sample_sentences  # noqa: E402
from fedgen_debug.training.lm_run import LMRun, load_lm  # noqa: E402


def eager_draw_next(model, banned_ids):
    """The draw before the traced graphs: each step called eagerly (the last-position path, then a float64
    softmax and one cumulative sum over every symbol in NumPy); `sampling._draw_next`'s stand-in, so the
    same loop and random stream run around it."""
    def draw(prefix, uniforms):
        x = prefix
        for i, layer in enumerate(model.layers):  # the output layer on the last step only
            x = layer(x, training=False)
            if i == len(model.layers) - 2:
                x = x[:, -1]
        logits = x.numpy().astype(np.float64)
        logits[:, list(banned_ids)] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        return tf.constant((probs.cumsum(axis=1) < uniforms[:, None]).sum(axis=1).clip(0, probs.shape[1] - 1))

    return draw


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", help="a trained LM run directory (default: an untrained demo-preset model)")
    parser.add_argument("--kind", default="word", choices=("char", "word"))
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.run:
        model, vocab, run = load_lm(args.run)
    else:
        run = LMRun(args.kind, "synthetic-text:users=300,seed=0", 0.0, "demo")
        vocab = Vocabulary.from_token_counts(collections.Counter(f"w{i}" for i in range(run.vocab_size)),
                                             run.vocab_size)
        model = build_lm(run.model_config(vocab.num_ids), seed=0)
        model.build((None, None))
    if run.kind == "char":
        draw_samples = functools.partial(sample_words, model, args.samples, run.max_length, args.seed)
    else:
        draw_samples = functools.partial(sample_sentences, model, vocab, args.samples, run.max_length, args.seed)
    traced = sampling._draw_next
    timed = {}
    for name, draw_next in (("eager (before)", eager_draw_next), ("traced (now)", traced)):
        sampling._draw_next = draw_next
        started = time.perf_counter()
        samples = draw_samples()
        timed[name] = (time.perf_counter() - started, samples)
    sampling._draw_next = traced
    (before, old), (now, new) = timed.values()
    print(f"{run.kind}-LM, {args.samples} samples ({args.run or 'untrained demo preset'}), "
          f"mean length {np.mean([len(s) for s in new]):.1f}")
    print(f"{'sampler':<16}{'seconds':>9}")
    for name, (seconds, _) in timed.items():
        print(f"{name:<16}{seconds:>9.2f}")
    print(f"ratio {before / now:.2f}; same samples: {old == new}")


if __name__ == "__main__":
    main()
