"""GAN sample quality of a training configuration, before/after a preset change, over seeds: Fréchet
distance and classifier score in the primary CNN's feature space, the share of samples the CNN
classifies confidently (top-class probability > 0.9), the near-duplicate (mode collapse) share, and
the blank / noise shares of the analysis. Prints one JSON row per (data, config, seed), writes each
run's 64-sample grid, and a summary table at the end.

  .venv/bin/python evaluation/gan_quality.py --configs before,demo --seeds 0,1,2,3,4 \\
      --data npz:../shared/data/femnist_real_184_writers.npz \\
      --primary runs/eval-monitor/primary-femnist-seed0.npz --out runs/eval-gan-quality/femnist

What runs: the project's own DP-FedAvg-GAN round functions (`client_discriminator_update`,
`server_generator_update`), its seeded DP query (`training.dp_query`, noise from a run secret) and
the server's D optimizer, in a plain TF loop rather than on TFF's runtime (the same arithmetic; the
TFF layer is tested against it in tests/test_gan_core.py). Selection emulates T4 "low" under strict
selection: the `--qualify` share of writers with the lowest primary-model accuracy train, every other
sampled writer sends a zero update that still counts in the fixed qN. Exact quantiles stand in for
the DP ones, so nothing here is charged to the ledger: an evaluation of training settings, not a
release. "before" is the demo preset as it was until issue 15 (client D learning rate 0.0005, D dense
64, generator Adam 0.001, clip 0.1); "clip0.1" the preset until its clip went to 0.5; "no-noise" the
preset without DP noise; "demo" is the current preset (one pass over a client's images: on FEMNIST's
low-accuracy writers, 30 images each, one D step a round); "cycle" the preset with clients short of
n·B images cycling through them to take all n steps (`--cycle-client-data`; docs/gan.md). Configs
combine left to right with "+" (`cycle+no-noise`: cycling without DP noise). `--gen-ema 0.9` also
measures an exponential moving average of the generator's weights over G phases (a second row,
`CONFIG@ema0.9`: server-side post-processing, no privacy cost; it starts from the first G phase's
weights at a flat decay, where `train-gan --gen-ema` starts from G's initial weights with TF's warm-up
decay: after 300 rounds the two differ by less than 0.9^70 of the early weights). `--vectorized` runs each
round through the `tf` backend's `GANRounds` (all clients in one call, as `make demo` runs them)
instead of client by client:

  .venv/bin/python evaluation/gan_quality.py --vectorized --configs clip0.1,demo,no-noise --seeds 0,1,2 \
      --data synthetic-images:writers=100,seed=0 --primary runs/demo/gan/primary_cnn.npz --out runs/eval-gan-clip
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Before TensorFlow: the package turns oneDNN on, without which a CPU lacking AVX-512 cannot run the
# vectorized GAN round (`--vectorized` then fell back to clients one by one, unlike `make demo`).
import fedgen_debug  # noqa: E402,F401
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_federated as tff  # noqa: E402
from tensorflow_privacy.privacy.dp_query import test_utils  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import client_data as cd, spec as data_spec  # noqa: E402
from fedgen_debug.models import cnn, gan as gan_models  # noqa: E402
from fedgen_debug.models.gan import to_unit  # noqa: E402
from fedgen_debug.runs.secret import RunSecret  # noqa: E402
from fedgen_debug.analysis import gan_analysis  # noqa: E402
from fedgen_debug.device import gan_data  # noqa: E402
from fedgen_debug.training import presets, primary_cnn  # noqa: E402
from fedgen_debug.training import dp_fedavg_gan as dpgan, tf_backend  # noqa: E402
from fedgen_debug.training.config import ServerConfig  # noqa: E402
from fedgen_debug.training.dp_query import dp_query  # noqa: E402
from fedgen_debug.training.optimizers import server_optimizer  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402

# Overrides of the current demo preset: (GANConfig fields, GANTrainingConfig fields, client D learning
# rate, DPConfig fields[, the D's ServerConfig]). "before": the demo preset until issue 15's first change; "clip0.1": the preset
# until its clip went from 0.1 to 0.5; "no-noise": the preset without DP noise (what the noise costs).
CONFIGS = {"demo": ({}, {}, None, {}),
           "before": ({"disc_dense": 64}, {"gen_learning_rate": 0.001}, 0.0005, {"clip": 0.1}),
           "clip0.1": ({}, {}, None, {"clip": 0.1}),
           "no-noise": ({}, {}, None, {"noise_multiplier": 0.0}),
           "cycle": ({}, {"cycle_client_data": True}, None, {}),
           # Capacity: a critic with twice the channels and dense units, and a generator with twice the
           # channels (larger D moved the synthetic Fréchet from 163 to 118 at S = 0.1, docs/gan.md).
           "big-d": ({"disc_channels": (16, 32), "disc_dense": 32}, {}, None, {}),
           "big-dg": ({"disc_channels": (16, 32), "disc_dense": 32, "gen_channels": (64, 32, 16)}, {}, None, {}),
           # The critic's server step: the same DP mean of the clients' D deltas, applied with heavy-ball
           # momentum or Adam (FedAdam) instead of SGD at 1.0. Centrally, the demo G and D draw characters
           # on the same writers' images (Fréchet 35, docs/gan.md): the federated critic is what lags.
           "d-momentum": ({}, {}, None, {}, ServerConfig("momentum", 1.0, 0.9)),
           "d-adam": ({}, {}, None, {}, ServerConfig("adam", 0.003, 0.5)),
           # The critic's server step × 4 = qN / k̂ with a quarter of the writers qualifying: what
           # `train-gan --d-step selected` does (post-processing of the DP counts; the same ε).
           "d-step-x4": ({}, {}, None, {}, ServerConfig("sgd", 4.0)),
           # The critic's work against the generator's (without DP noise, cycling clients still draw
           # speckled strokes, 41 vs 48 on seed 0; the central critic, Adam at 3 steps a G step, does not):
           # a client learning rate 2.5× the preset's, 12 client steps instead of n = 6, or a G phase every
           # 4 D rounds instead of 2 (half the G steps).
           "d-lr-x2.5": ({}, {}, 0.05, {}),
           "d-steps-12": ({}, {"disc_steps": 12}, None, {}),
           "g-every-4": ({}, {"disc_rounds_per_gen_update": 4}, None, {}),
           # The generator's steps: centrally, the same G and D reach Fréchet 45 after 900 G steps (what
           # 300 demo rounds take) and 35 after 1,800; a G phase every D round gives 1,800 in 300 rounds.
           "g-every-1": ({}, {"disc_rounds_per_gen_update": 1}, None, {}),
           # G's upsampling: a bilinear resize then a 3×3 convolution instead of the transposed k4 s2
           # (centrally, 900 G steps: Fréchet 45.1 → 27.9, and the speckle around the strokes is gone; with
           # DP and cycling better on 4 of 5 seeds, but one diverged to a dark texture: docs/gan.md).
           "bilinear": ({"gen_upsample": "bilinear"}, {}, None, {}),
           # The generator's Adam step halved (0.0003 → 0.00015): a slower G against the same noisy critic.
           "g-lr-half": ({}, {"gen_learning_rate": 0.00015}, None, {})}
CONFIDENT_ABOVE = 0.9
SAMPLES = 1000


def overrides(name: str) -> tuple:
    """A config's overrides; "a+b" applies a's, then b's (`cycle+no-noise`: cycling without DP noise)."""
    model_fields, training_fields, disc_lr, dp_fields, server = {}, {}, None, {}, []
    for part in name.split("+"):
        if part not in CONFIGS:
            raise SystemExit(f"unknown config {part!r}; known: {', '.join(CONFIGS)} (combine with '+')")
        m, t, lr, dp, *srv = CONFIGS[part]
        model_fields, training_fields, dp_fields = {**model_fields, **m}, {**training_fields, **t}, {**dp_fields, **dp}
        disc_lr, server = lr if lr is not None else disc_lr, srv or server
    return model_fields, training_fields, disc_lr, dp_fields, *server


def configs(name: str, seed: int):
    model_fields, training_fields, disc_lr, dp_fields, *server = overrides(name)
    model = presets.gan_model_config("demo", **model_fields)
    training = presets.gan_training_config("demo", seed)
    if server:
        training = dataclasses.replace(training, training=dataclasses.replace(training.training, server=server[0]))
    training = dataclasses.replace(training, training=dataclasses.replace(
        training.training, dp=dataclasses.replace(training.training.dp, **dp_fields)))
    if disc_lr is not None:
        training = dataclasses.replace(training, training=dataclasses.replace(
            training.training, client=dataclasses.replace(training.training.client, learning_rate=disc_lr)))
    return model, dataclasses.replace(training, **training_fields)


def averaged(average, weights, decay: float):
    """The exponential moving average of the generator's trainable weights after a G phase (`--gen-ema`):
    server-side post-processing of the generator, so no privacy cost."""
    weights = [np.asarray(w, np.float32) for w in weights]
    return weights if average is None else [decay * a + (1.0 - decay) * w for a, w in zip(average, weights)]


def assign(gen, trainable, non_trainable) -> None:
    for variable, value in zip(gen.trainable_variables + gen.non_trainable_variables, [*trainable, *non_trainable]):
        variable.assign(value)


def train(images: dict, qualified: set, model_config, config, seed: int, rounds: int, ema: float = 0.0):
    """The generator after `rounds` DP-FedAvg-GAN rounds, the median norm of the real client updates, and
    with `ema` > 0 the moving average of its trainable weights over G phases (else None)."""
    gen, disc = gan_models.build_generator(model_config, seed), gan_models.build_discriminator(model_config, seed)
    secret = RunSecret(seed + 7)
    client = config.training.client
    client_fn = tf.function(lambda ds, dw, gw: dpgan.client_discriminator_update(
        disc, gen, ds, dw, gw, client.learning_rate, config.disc_steps, config.gradient_penalty))
    gen_opt = dpgan.build_gen_optimizer(config)
    gen_fn = tf.function(lambda gw, dw, state, step_seed, steps: dpgan.server_generator_update(
        gen, disc, gw, dw, gen_opt, state, step_seed, steps, config.gen_batch_size))
    disc_opt = server_optimizer(config.training.server)
    query = dp_query(config.training.dp, secret.tf_seed("dp-noise"))
    disc_w = [tf.identity(v) for v in disc.trainable_variables]
    gen_w = tff.learning.models.ModelWeights([tf.identity(v) for v in gen.trainable_variables],
                                             [tf.identity(v) for v in gen.non_trainable_variables])
    disc_state = disc_opt.initialize([tf.TensorSpec(w.shape, w.dtype) for w in disc_w])
    gen_state = gen_opt.initialize([tf.TensorSpec(w.shape, w.dtype) for w in gen_w.trainable])
    server_seed, global_state = tf.constant(secret.tf_seed("gan-server"), tf.int64), None
    ids, norms, average = sorted(images), [], None

    def seeded(cid, round_num, index):
        seeds = dpgan.client_step_seeds(secret, round_num, index, config.disc_steps)
        order = np.random.default_rng([seed, round_num, index]).permutation(len(images[cid]))
        real = dpgan.client_batches(images[cid][order], client.batch_size, config.disc_steps, config.cycle_client_data)
        return tf.data.Dataset.zip((real, tf.data.Dataset.from_tensor_slices(seeds)))

    for round_num in range(rounds):
        sampled = sample_clients(ids, config.training.dp.clients_per_round, secret.rng("sampling", round_num))
        updates = []
        for index, cid in enumerate(sampled):
            if cid in qualified:
                updates.append(client_fn(seeded(cid, round_num, index), disc_w, gen_w.trainable).update)
                norms.append(float(tf.linalg.global_norm(updates[-1])))
            else:
                updates.append([tf.zeros_like(w) for w in disc_w])
        mean_update, global_state = test_utils.run_query(query, updates, global_state=global_state)
        disc_state, disc_w = disc_opt.next(disc_state, disc_w, mean_update)
        server_seed, step_seed = dpgan.split_server_seed(server_seed)
        steps = config.gen_steps if (round_num + 1) % config.disc_rounds_per_gen_update == 0 else 0
        out = gen_fn(gen_w, disc_w, gen_state, step_seed, steps)
        gen_w, gen_state = out.weights, out.optimizer_state
        if ema and steps:
            average = averaged(average, gen_w.trainable, ema)
    assign(gen, gen_w.trainable, gen_w.non_trainable)
    return gen, float(np.median(norms)) if norms else 0.0, average


def low_accuracy_writers(data, primary, share: float) -> set[str]:
    """T4 "low" with exact quantiles: the writers whose primary-model accuracy is at or below the
    `share` quantile (the evaluation's stand-in for the DP threshold)."""
    accuracy = gan_data.user_accuracies(data, primary)
    cut = float(np.quantile(list(accuracy.values()), share))
    return {c for c, a in accuracy.items() if a <= cut}


def train_vectorized(images: dict, qualified: set, model_config, config, seed: int, rounds: int, ema: float = 0.0,
                     measure_at: tuple = ()):
    """`train`'s experiment with each round run by the `tf` backend's `GANRounds` (all clients in one
    vectorized call, the DP sum and server step as `make demo` runs them). `measure_at`: earlier rounds
    whose generators are returned too, as a fourth value {round: generator}: a run of R rounds is the
    first R rounds of a longer one (nothing in a round depends on the total)."""
    secret = RunSecret(seed + 7)
    process = tf_backend.GANRounds(lambda: gan_models.build_generator(model_config, seed),
                                   lambda: gan_models.build_discriminator(model_config, seed), config, secret)
    state, ids, average, earlier = process.initialize(), sorted(images), None, {}
    steps = config.disc_steps

    def generator_of(state):
        gen = gan_models.build_generator(model_config, seed)
        weights = state["server"]["generator"]
        assign(gen, weights["trainable"], weights["non_trainable"])
        return gen

    for round_num in range(rounds):
        sampled = sample_clients(ids, config.training.dp.clients_per_round, secret.rng("sampling", round_num))
        data = [images[cid][np.random.default_rng([seed, round_num, index]).permutation(len(images[cid]))]
                if cid in qualified else np.zeros((0, *gan_models.IMAGE_SHAPE), np.float32)
                for index, cid in enumerate(sampled)]
        seeds = [dpgan.client_step_seeds(secret, round_num, index, steps) for index in range(len(sampled))]
        state, _ = process.next_with_seeds(state, data, seeds)
        if ema and (round_num + 1) % config.disc_rounds_per_gen_update == 0:
            average = averaged(average, state["server"]["generator"]["trainable"], ema)
        if round_num + 1 in measure_at:
            earlier[round_num + 1] = generator_of(state)
    return generator_of(state), None, average, earlier


def quality(generator, primary, primary_path: str) -> tuple[dict, np.ndarray]:
    noise = np.random.default_rng(0).standard_normal((SAMPLES, generator.input_shape[-1])).astype(np.float32)
    images = generator(noise, training=False).numpy()
    measured = gan_analysis.sample_quality(primary, images, primary_cnn.reference_statistics(primary_path),
                                           primary_cnn.reference_nearest(primary_path))
    logits = cnn.logits(primary, to_unit(images)).astype(np.float64)
    top = 1.0 / np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)
    return {"frechet": round(measured["frechet_distance"], 1),
            "classifier_score": round(measured["classifier_score"], 2),
            "confident": float(np.mean(top > CONFIDENT_ABOVE)),
            "near_duplicates": measured.get("near_duplicates", {}).get("share"),
            "blank": gan_analysis.blank_samples(images)["share"], "noise": gan_analysis.noise_samples(images)["share"],
            "dark": gan_analysis.dark_background(images)["share"]}, images


def _comparison(rows: list[dict], path: str) -> None:
    """The first seed's grids of each config side by side (left to right in --configs order)."""
    from PIL import Image

    first = {}
    for r in rows:
        first.setdefault(r["config"], r["grid"])
    if len(first) < 2:
        return
    grids = [Image.open(g) for g in first.values()]
    gap = 16
    out = Image.new("L", (sum(g.width for g in grids) + gap * (len(grids) - 1), grids[0].height), 255)
    for i, grid in enumerate(grids):
        out.paste(grid, (i * (grid.width + gap), 0))
    out.save(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="synthetic-images:writers=100,seed=100")
    parser.add_argument("--primary", required=True, help="primary CNN weights (its reference statistics beside it)")
    parser.add_argument("--configs", default="before,demo")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rounds", type=int, default=None, help="default: the preset's")
    parser.add_argument("--measure-at", default="",
                        help="comma-separated earlier rounds also measured on the way (with --vectorized), "
                             "each a row with its round count")
    parser.add_argument("--qualify", type=float, default=0.25, help="share of writers that train (T4 low)")
    parser.add_argument("--vectorized", action="store_true",
                        help="rounds through the tf backend's vectorized clients (median update norm not measured)")
    parser.add_argument("--gen-ema", type=float, default=0.0,
                        help="also measure a moving average of the generator's weights (this decay per G phase), "
                             "as a second row CONFIG@emaDECAY")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    os.makedirs(args.out, exist_ok=True)
    data = data_spec.load_client_data(args.data)
    images = {c: gan_data.to_gan_range(cd.client_numpy(data, c)["pixels"]) for c in data.client_ids}
    primary = primary_cnn.load_primary_cnn(args.primary)
    qualified = low_accuracy_writers(data, primary, args.qualify)
    rows = []
    if not 0.0 <= args.gen_ema < 1.0:
        raise SystemExit(f"--gen-ema must be in [0, 1). Found {args.gen_ema}.")
    measure_at = tuple(int(r) for r in args.measure_at.split(",") if r)
    if measure_at and not args.vectorized:
        raise SystemExit("--measure-at needs --vectorized.")
    for name in args.configs.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            model_config, config = configs(name, seed)
            rounds = args.rounds or config.training.rounds
            started = time.perf_counter()
            if args.vectorized:
                generator, norm, average, earlier = train_vectorized(
                    images, qualified, model_config, config, seed, rounds, args.gen_ema, measure_at)
            else:
                (generator, norm, average), earlier = train(
                    images, qualified, model_config, config, seed, rounds, args.gen_ema), {}
            seconds = round(time.perf_counter() - started)
            measured_as = [(name, generator, rounds)] + [(name, gen, r) for r, gen in sorted(earlier.items())]
            if average is not None:
                ema_generator = gan_models.build_generator(model_config, seed)
                assign(ema_generator, average, generator.non_trainable_variables)
                measured_as.append((f"{name}@ema{args.gen_ema:g}", ema_generator, rounds))
            for label, gen, at in measured_as:
                measured, samples = quality(gen, primary, args.primary)
                grid = os.path.join(args.out, f"{label}-seed{seed}{'' if at == rounds else f'-round{at}'}.png")
                gan_analysis.sample_grid_png(samples[:64], grid)
                np.savez(grid.replace(".png", ".weights.npz"),   # to look again without retraining
                         *[v.numpy() for v in gen.trainable_variables + gen.non_trainable_variables])
                row = {"data": args.data, "config": label, "seed": seed, "rounds": at,
                       "qualified": len(qualified), "writers": len(images),
                       "median_update_norm": None if norm is None else round(norm, 4),
                       "seconds": seconds, **measured, "grid": grid}
                print(json.dumps(row), flush=True)
                rows.append(row)
                with open(os.path.join(args.out, "rows.jsonl"), "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
    _comparison(rows, os.path.join(args.out, "comparison.png"))
    print(f"\n{'config':<8}{'seed':>5}{'rounds':>7}{'Fréchet':>9}{'cls score':>10}{'confident':>10}{'near dup':>9}{'noise':>7}"
          f"{'blank':>7}")
    for r in rows:
        print(f"{r['config']:<8}{r['seed']:>5}{r['rounds']:>7}{r['frechet']:>9.1f}{r['classifier_score']:>10.2f}{r['confident']:>10.1%}"
              f"{r['near_duplicates'] or 0:>9.1%}{r['noise']:>7.0%}{r['blank']:>7.0%}")


if __name__ == "__main__":
    main()
