"""Benchmark: seconds per DP-FedAvg-GAN round (Algorithm 1) at demo and paper model sizes, on TFF and in
plain TF (the same client discriminator updates compiled with tf.function, the same DP query and the
same server D step + generator steps, no TFF), with the ratio. Prints numbers, not pass/fail:
`.venv/bin/python benchmarks/gan_round.py [--rounds 3]`.

Workload: Table 9's round (qN = 10 clients × n = 6 discriminator steps of B = 32 real images, then 6
generator steps of 32) on synthetic handwriting.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_federated as tff  # noqa: E402
from tensorflow_privacy.privacy.dp_query import test_utils  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import client_data as cd, synthetic_images  # noqa: E402
from fedgen_debug.models.gan import build_discriminator, build_generator, gan_config  # noqa: E402
from fedgen_debug.runs.secret import RunSecret  # noqa: E402
from fedgen_debug.scenarios.gan_data import to_gan_range  # noqa: E402
from fedgen_debug.training import dp_fedavg_gan as dpgan  # noqa: E402
from fedgen_debug.training.dp_query import dp_query  # noqa: E402
from fedgen_debug.training.optimizers import server_optimizer  # noqa: E402
from fedgen_debug.training.sampling import sample_clients  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up round)")
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    data = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=30, seed=0))
    images = {c: to_gan_range(cd.client_numpy(data, c)["pixels"]) for c in data.client_ids}
    print(f"{'preset':<8}{'G params':>10}{'D params':>10}{'TFF s/round':>13}{'plain TF s/round':>18}{'ratio':>7}")
    for preset in ("demo", "paper"):
        config = dpgan.gan_training_config(preset)
        gan = gan_config(preset)
        gen_fn, disc_fn = (lambda: build_generator(gan, 0)), (lambda: build_discriminator(gan, 0))
        qn, batch = config.training.dp.clients_per_round, config.training.client.batch_size
        rounds = [sample_clients(sorted(images), qn, np.random.default_rng(r)) for r in range(args.rounds + 1)]

        def real(cid):
            return tf.data.Dataset.from_tensor_slices(images[cid]).batch(batch)

        process = dpgan.build_gan_process(gen_fn, disc_fn, config, RunSecret(0))
        state = process.initialize()
        state = process.next(state, [real(c) for c in rounds[0]]).state  # warm-up
        start = time.perf_counter()
        for sampled in rounds[1:]:
            state = process.next(state, [real(c) for c in sampled]).state
        tff_seconds = (time.perf_counter() - start) / args.rounds

        g, d = gen_fn(), disc_fn()
        client_fn = tf.function(lambda ds, dw, gw: dpgan.client_discriminator_update(
            d, g, ds, dw, gw, config.training.client.learning_rate, config.disc_steps, config.gradient_penalty))
        gen_opt = dpgan.build_gen_optimizer(config)
        server_gen_fn = tf.function(lambda gw, dw, s, seed: dpgan.server_generator_update(
            g, d, gw, dw, gen_opt, s, seed, config.gen_steps, config.gen_batch_size))
        disc_opt = server_optimizer(config.training.server)
        query = dp_query(config.training.dp, (0, 0))
        disc_w = [tf.identity(v) for v in d.trainable_variables]
        gen_w = tff.learning.models.ModelWeights([tf.identity(v) for v in g.trainable_variables],
                                                 [tf.identity(v) for v in g.non_trainable_variables])
        disc_state = disc_opt.initialize([tf.TensorSpec(w.shape, w.dtype) for w in disc_w])
        gen_state = gen_opt.initialize([tf.TensorSpec(w.shape, w.dtype) for w in gen_w.trainable])
        seed, global_state = tf.constant([0, 1], tf.int64), None

        def plain_round(round_num, sampled, disc_w, gen_w, disc_state, gen_state, seed, global_state):
            updates = [client_fn(process.seeded_dataset(real(c), round_num, i), disc_w, gen_w.trainable).update
                       for i, c in enumerate(sampled)]
            mean_update, global_state = test_utils.run_query(query, updates, global_state=global_state)
            disc_state, disc_w = disc_opt.next(disc_state, disc_w, mean_update)
            seed, gen_seed = dpgan.split_server_seed(seed)
            out = server_gen_fn(gen_w, disc_w, gen_state, gen_seed)
            return disc_w, out.weights, disc_state, out.optimizer_state, seed, global_state

        carry = plain_round(0, rounds[0], disc_w, gen_w, disc_state, gen_state, seed, global_state)
        start = time.perf_counter()
        for r, sampled in enumerate(rounds[1:], start=1):
            carry = plain_round(r, sampled, *carry)
        tf_seconds = (time.perf_counter() - start) / args.rounds
        count = lambda m: int(sum(np.prod(v.shape) for v in m.trainable_variables))  # noqa: E731
        print(f"{preset:<8}{count(g):>10,}{count(d):>10,}{tff_seconds:>13.2f}{tf_seconds:>18.2f}"
              f"{tff_seconds / tf_seconds:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
