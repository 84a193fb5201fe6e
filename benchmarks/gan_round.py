"""Benchmark: seconds per DP-FedAvg-GAN round (Algorithm 1) at demo and paper model sizes, on TFF and on
the in-process `tf` backend (the same client discriminator updates, DP query and server D step +
generator steps, run by TF itself), with the ratio. Prints numbers, not pass/fail:
`.venv/bin/python benchmarks/gan_round.py [--rounds 3] [--no-tff] [--demo-only] [--clients-with-images K]
[--gen-upsample transpose|bilinear|both]`
(run two at once to time them side by side, as the demo trains each GAN pair; `TF_NUM_INTRAOP_THREADS=1`
is what the demo's workers get on 2 cores).

Workload: each preset's round (demo: qN = 50 clients × n = 6 discriminator steps of B = 32 real images;
paper: Table 9's qN = 10; then the server's generator steps) on 100 synthetic writers, each client's
examples handed over as an array (as the GAN scenario does). `--clients-with-images K`: only the first K
sampled clients hand over images, the rest none, as under strict selection (the demo's with-bug
low-accuracy GAN: about 32 of 50; its high-accuracy one about 6). `--gen-upsample both` times each
preset with both generator upsamplings (`GANConfig.gen_upsample`) and prints bilinear's ratio to transpose.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import client_data as cd, synthetic_images  # noqa: E402
from fedgen_debug.models.gan import build_discriminator, build_generator  # noqa: E402
from fedgen_debug.runs.secret import RunSecret  # noqa: E402
from fedgen_debug.device.gan_data import to_gan_range  # noqa: E402
from fedgen_debug.training import dp_fedavg_gan as dpgan  # noqa: E402
from fedgen_debug.training.loop import round_datasets  # noqa: E402
from fedgen_debug.training.presets import gan_model_config, gan_training_config  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up round)")
    parser.add_argument("--no-tff", action="store_true", help="time the tf backend only")
    parser.add_argument("--demo-only", action="store_true", help="the demo preset only")
    parser.add_argument("--clients-with-images", type=int, default=None,
                        help="how many of a round's sampled clients hand over images (default: all)")
    parser.add_argument("--gen-upsample", choices=("transpose", "bilinear", "both"), default="transpose")
    args = parser.parse_args()
    if args.rounds < 1 or (args.clients_with_images is not None and args.clients_with_images < 0):
        parser.error("--rounds must be >= 1 and --clients-with-images >= 0")
    runtime.install_shutdown_hooks()
    data = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=100, seed=0))
    images = {c: to_gan_range(cd.client_numpy(data, c)["pixels"]) for c in data.client_ids}

    none = np.zeros((0, *next(iter(images.values())).shape[1:]), np.float32)

    def datasets(process, sampled):  # a writer hands over the same images every round, or none
        with_images = set(sampled if args.clients_with_images is None else sampled[:args.clients_with_images])
        return round_datasets(process, sampled, lambda cid, _: images[cid] if cid in with_images else none, 0)

    print(f"{'preset':<20}{'G params':>10}{'D params':>10}{'TFF s/round':>13}{'tf s/round':>12}{'ratio':>7}")
    tf_by_upsample = {}
    upsamplings = ("transpose", "bilinear") if args.gen_upsample == "both" else (args.gen_upsample,)
    for preset, upsample in [(p, u) for p in (("demo",) if args.demo_only else ("demo", "paper")) for u in upsamplings]:
        config = gan_training_config(preset)
        gan = gan_model_config(preset, gen_upsample=upsample)
        gen_fn, disc_fn = (lambda: build_generator(gan, 0)), (lambda: build_discriminator(gan, 0))
        qn = config.training.dp.clients_per_round
        rounds = [sample_clients(sorted(images), qn, np.random.default_rng(r)) for r in range(args.rounds + 1)]

        seconds = {"tff": float("nan")}
        for backend in ("tf",) if args.no_tff else ("tff", "tf"):
            process = dpgan.build_gan_process(gen_fn, disc_fn, config, RunSecret(0), backend=backend)
            state = process.initialize()
            state = process.next(state, datasets(process, rounds[0])).state  # warm-up
            start = time.perf_counter()
            for sampled in rounds[1:]:
                state = process.next(state, datasets(process, sampled)).state
            seconds[backend] = (time.perf_counter() - start) / args.rounds
        tff_seconds, tf_seconds = seconds["tff"], seconds["tf"]
        g, d = gen_fn(), disc_fn()
        count = lambda m: int(sum(np.prod(v.shape) for v in m.trainable_variables))  # noqa: E731
        print(f"{preset + '/' + upsample:<20}{count(g):>10,}{count(d):>10,}{tff_seconds:>13.2f}{tf_seconds:>12.2f}"
              f"{tff_seconds / tf_seconds:>7.2f}", flush=True)
        tf_by_upsample[preset, upsample] = tf_seconds
        if upsample == "bilinear" and (preset, "transpose") in tf_by_upsample:
            print(f"{preset}: bilinear / transpose, tf s/round: "
                  f"{tf_seconds / tf_by_upsample[preset, 'transpose']:.2f}", flush=True)


if __name__ == "__main__":
    main()
