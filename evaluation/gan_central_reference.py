"""What the GAN architecture can draw without federation or DP: the demo generator and critic trained
centrally (WGAN-GP, Adam for both) on the pooled images of the T4 "low" writers, the same writers
`gan_quality.py` trains on. A yardstick for the federated GAN's samples, not a release: it reads every
writer's images in one place, so it runs on evaluation data only and charges nothing.

  .venv/bin/python evaluation/gan_central_reference.py --data npz:../shared/data/femnist_real_184_writers.npz \\
      --primary runs/eval-gan-quality/primary-femnist.npz --gen-steps 1800 --out runs/eval-gan-central

`--gen-steps 1800` is as many generator steps as 600 demo rounds take (6 steps every second round).
Prints one JSON row with `gan_quality.py`'s measures and writes the 64-sample grid.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
# The package first: it sets TensorFlow's oneDNN option (as `make demo` runs), read when TF is imported.
import fedgen_debug  # noqa: E402,F401
import tensorflow as tf  # noqa: E402

from fedgen_debug.data import client_data as cd, spec as data_spec  # noqa: E402
from fedgen_debug.models import gan as gan_models  # noqa: E402
from fedgen_debug.analysis import gan_analysis  # noqa: E402
from fedgen_debug.device import gan_data  # noqa: E402
from fedgen_debug.training import primary_cnn  # noqa: E402
from fedgen_debug.training import dp_fedavg_gan as dpgan  # noqa: E402

# `gan_quality.py`'s configs of these names; only their networks apply here (no federation, no DP).
MODELS = ("demo", "big-dg", "bilinear")


def train_central(images: np.ndarray, model_config, gen_steps: int, disc_per_gen: int, learning_rate: float,
                  seed: int, batch: int = 32, disc_optimizer: str = "adam", disc_learning_rate: float | None = None):
    """The generator after `gen_steps` WGAN-GP generator steps, each after `disc_per_gen` critic steps on
    minibatches drawn from `images` (one seeded stream for batches, latents and interpolation points)."""
    gen, disc = gan_models.build_generator(model_config, seed), gan_models.build_discriminator(model_config, seed)
    gen_opt = tf.keras.optimizers.Adam(learning_rate, beta_1=0.5)
    disc_lr = learning_rate if disc_learning_rate is None else disc_learning_rate
    # "sgd": the federated critic's client optimizer (the demo preset's η_D = 0.02), to tell the critic's
    # optimizer apart from federation as what the federated GAN lacks.
    disc_opt = (tf.keras.optimizers.Adam(disc_lr, beta_1=0.5) if disc_optimizer == "adam"
                else tf.keras.optimizers.SGD(disc_lr))
    rng = np.random.default_rng(seed)

    @tf.function
    def disc_step(real, latent, alpha):
        with tf.GradientTape() as tape:
            loss = dpgan.wgan_gp_losses(disc, real, gen(latent, training=True), alpha).disc_loss
        disc_opt.apply_gradients(zip(tape.gradient(loss, disc.trainable_variables), disc.trainable_variables))

    @tf.function
    def gen_step(latent):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(disc(gen(latent, training=True), training=True))
        gen_opt.apply_gradients(zip(tape.gradient(loss, gen.trainable_variables), gen.trainable_variables))

    def latent():
        return tf.constant(rng.standard_normal((batch, model_config.noise_dim)), tf.float32)

    for _ in range(gen_steps):
        for _ in range(disc_per_gen):
            disc_step(tf.constant(images[rng.integers(0, len(images), batch)]), latent(),
                      tf.constant(rng.random(batch), tf.float32))
        gen_step(latent())
    return gen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--primary", required=True, help="primary CNN weights (its reference statistics beside it)")
    parser.add_argument("--model", choices=MODELS, default="demo")
    parser.add_argument("--gen-steps", type=int, default=1800)
    parser.add_argument("--disc-per-gen", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--disc-optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--disc-learning-rate", type=float, help="default: --learning-rate")
    parser.add_argument("--qualify", type=float, default=0.25, help="share of writers that train (T4 low)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "gan_quality", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gan_quality.py"))
    gan_quality = importlib.util.module_from_spec(spec)
    sys.modules["gan_quality"] = gan_quality   # its dataclasses look their module up there
    spec.loader.exec_module(gan_quality)
    data = data_spec.load_client_data(args.data)
    primary = primary_cnn.load_primary_cnn(args.primary)
    writers = sorted(gan_quality.low_accuracy_writers(data, primary, args.qualify))
    images = np.concatenate([gan_data.to_gan_range(cd.client_numpy(data, c)["pixels"]) for c in writers])
    model_config = gan_quality.configs(args.model, args.seed)[0]
    started = time.perf_counter()
    disc_lr = args.learning_rate if args.disc_learning_rate is None else args.disc_learning_rate
    generator = train_central(images, model_config, args.gen_steps, args.disc_per_gen, args.learning_rate, args.seed,
                              disc_optimizer=args.disc_optimizer, disc_learning_rate=disc_lr)
    measured, samples = gan_quality.quality(generator, primary, args.primary)
    os.makedirs(args.out, exist_ok=True)
    label = "" if args.disc_optimizer == "adam" and args.disc_learning_rate is None else \
        f"-d{args.disc_optimizer}{disc_lr:g}"
    grid = os.path.join(args.out, f"central-{args.model}{label}-{args.gen_steps}x{args.disc_per_gen}-seed{args.seed}.png")
    gan_analysis.sample_grid_png(samples[:64], grid)
    print(json.dumps({"data": args.data, "model": args.model, "seed": args.seed, "gen_steps": args.gen_steps,
                      "disc_per_gen": args.disc_per_gen, "disc_optimizer": args.disc_optimizer,
                      "disc_learning_rate": disc_lr, "writers": len(writers), "images": len(images),
                      "seconds": round(time.perf_counter() - started), **measured, "grid": grid}), flush=True)


if __name__ == "__main__":
    main()
