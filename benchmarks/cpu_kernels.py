"""Benchmark: the two computations replaced where a CPU lacks AVX-512, before and after in one run, with
the ratio. Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/cpu_kernels.py [--repeats 10]

- The vectorized critic's first layer (`training.vectorized_gan`): 32 clients × 32 images of 28×28, the
  patches of its 4×4 stride-2 convolution and each client's kernel, differentiated as a D step does
  (the loss, the gradient penalty's input gradient, and the penalty's gradient). Before: the patches'
  input gradient by TF (oneDNN's strided `Conv2DBackpropInput`); after: `subpixel_conv.patches`.
- A demo word-LM client step (16 sentences × 20 tokens, 10,004 ids; `dp_fedavg`'s forward, loss and
  gradient). Before: Keras' `SparseCategoricalCrossentropy(from_logits=True)`; after:
  `models.lm.TokenCrossentropy`.

Run it with `TF_NUM_INTRAOP_THREADS=1` for what a demo worker gets on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import fedgen_debug  # noqa: E402,F401  (oneDNN on, as the package sets it)
import tensorflow as tf  # noqa: E402

from fedgen_debug.models.lm import TokenCrossentropy, build_lm  # noqa: E402
from fedgen_debug.training import subpixel_conv  # noqa: E402
from fedgen_debug.training.presets import lm_model_config  # noqa: E402


def milliseconds(fn, repeats: int) -> float:
    fn()  # traced
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1000


def critic_first_layer(repeats: int) -> tuple[float, float]:
    clients, batch, size, filters = 32, 32, 28, 8
    rng = np.random.default_rng(0)
    images = tf.constant(rng.normal(size=(clients * batch, size, size, 1)), tf.float32)
    kernels = tf.constant(rng.normal(size=(clients, 16, filters)), tf.float32)
    one_hot = subpixel_conv.one_hot_patch_filter((4, 4))

    def step(take):
        @tf.function(autograph=False)
        def run():
            with tf.GradientTape() as outer:
                outer.watch(kernels)
                with tf.GradientTape() as inner:
                    inner.watch(images)
                    patches = tf.reshape(take(images), [clients, batch, 14, 14, 16])
                    out = tf.reduce_sum(tf.nn.leaky_relu(tf.einsum("cbhwp,cpo->cbhwo", patches, kernels)) ** 2)
                penalty = tf.reduce_sum(inner.gradient(out, images) ** 2) + out
            return outer.gradient(penalty, kernels)
        return run

    before = step(lambda x: tf.nn.conv2d(x, one_hot, 2, "SAME"))
    after = step(subpixel_conv.patches((4, 4), 2, (size, size)))
    return milliseconds(before, repeats), milliseconds(after, repeats)


def word_lm_step(repeats: int) -> tuple[float, float]:
    model = build_lm(lm_model_config("demo", "word", 10_004), seed=0)
    model.build((None, 20))
    tokens = tf.constant(np.random.default_rng(0).integers(0, 10_004, (16, 20)), tf.int32)

    def step(loss_fn):
        @tf.function
        def run():
            with tf.GradientTape() as tape:
                loss = loss_fn(tokens, model(tokens, training=True))
            return tape.gradient(loss, model.trainable_variables)
        return run

    return (milliseconds(step(tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)), repeats),
            milliseconds(step(TokenCrossentropy()), repeats))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    print(f"{'computation':<52}{'before ms':>10}{'after ms':>10}{'ratio':>7}")
    for name, (before, after) in (("critic's first layer, a D step of 32 clients", critic_first_layer(args.repeats)),
                                  ("word-LM demo client step", word_lm_step(args.repeats))):
        print(f"{name:<52}{before:>10.1f}{after:>10.1f}{before / after:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
