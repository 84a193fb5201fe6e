"""Benchmark: how a round scales with the cohort (issue 16): seconds per round and peak RSS at
qN = 10, 100, 1,000 clients per round, for the demo char-LM and the demo GAN, on both backends, with
the ratio tf/tff per row and the slopes (seconds per added client; RSS at the largest cohort over RSS
at the middle one: clients should be streamed, not held). Prints numbers, not pass/fail:

  .venv/bin/python benchmarks/cohort_scaling.py [--cohorts 10,100,1000] [--rounds 1]

Each (workload, backend, qN) runs in a fresh process (`--child`); its peak RSS is the largest sum of
VmRSS over it and its descendants (TFF's worker_binary included), sampled every 0.1 s. A child warms up
(tracing, worker start: the LM on min(qN, 64) clients, the GAN on qN), then times `--rounds` rounds of qN.
Workloads (one population for every cohort, 1.2 × the largest by default, so the RSS column compares
rounds, not data sizes): char-LM demo preset on synthetic text (10% glued), every client training
(2 epochs, batch 16); GAN demo preset on synthetic handwriting, every client with its own real batches
(no selection), 6 critic steps of 32. The round's client data (LM: tf.data over each client's arrays;
GAN: each client's image array, as the GAN scenario hands it over) is what `training.loop` hands `next`
(`round_datasets`): a list on TFF, built when read on tf.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except (FileNotFoundError, ProcessLookupError):
        return 0


def _tree(root: int) -> list[int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def measure_child(workload: str, backend: str, cohort: int, rounds: int, population_size: int) -> dict:
    command = [sys.executable, __file__, "--child", workload, backend, str(cohort), "--rounds", str(rounds),
               "--population", str(population_size)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], sum(_rss_kib(p) for p in _tree(child.pid)))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = child.stdout.read()
    child.wait()
    done.set()
    sampler.join()
    if child.returncode != 0:
        raise RuntimeError(f"{workload} {backend} qN={cohort} failed ({child.returncode})")
    return {**json.loads(out.strip().splitlines()[-1]), "peak_rss_mib": peak[0] / 1024}


def _lm_round_fn(cohort: int, backend: str, population_size: int):
    import numpy as np
    import tensorflow as tf

    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.training.lm_run import LMRun, model_spec
    from fedgen_debug.experiments.lm import prepare_devices
    from fedgen_debug.device.lm_data import public_vocabulary
    from fedgen_debug.training import dp_fedavg
    from fedgen_debug.training.loop import round_datasets

    data = f"synthetic-text:users={population_size}"
    run = LMRun("char", data, 0.1, "demo")
    devices = prepare_devices(run, data_spec.load_client_data(data), public_vocabulary(run.vocab, run.vocab_size))
    population = sorted(c for c, (x, _) in devices.examples.items() if len(x))
    config = run.training_config(len(population))
    config = dataclasses.replace(config, dp=dataclasses.replace(config.dp, clients_per_round=cohort))
    process = dp_fedavg.build_process(model_spec(run, devices.num_ids), config, (0, 0), backend=backend)

    def client_ds(cid, round_num):
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices(devices.examples[cid]), config)

    def one_round(state, size, seed):
        sampled = np.random.default_rng(seed).choice(population, size, replace=False)
        return process.next(state, round_datasets(process, sampled, client_ds, 0)).state

    return process.initialize(), one_round


def _gan_round_fn(cohort: int, backend: str, population_size: int):
    import numpy as np

    from fedgen_debug.data import client_data as cd, synthetic_images
    from fedgen_debug.models.gan import build_discriminator, build_generator
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.device.gan_data import to_gan_range
    from fedgen_debug.training import dp_fedavg_gan as dpgan
    from fedgen_debug.training.loop import round_datasets
    from fedgen_debug.training.presets import gan_model_config, gan_training_config

    data = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=population_size, seed=0))
    images = {c: to_gan_range(cd.client_numpy(data, c)["pixels"]) for c in data.client_ids}
    config = gan_training_config("demo")
    training = dataclasses.replace(config.training, dp=dataclasses.replace(config.training.dp, clients_per_round=cohort))
    config = dataclasses.replace(config, training=training)
    gan = gan_model_config("demo")
    process = dpgan.build_gan_process(lambda: build_generator(gan, 0), lambda: build_discriminator(gan, 0), config,
                                      RunSecret(0), backend=backend)

    def one_round(state, size, seed):
        sampled = np.random.default_rng(seed).choice(sorted(images), size, replace=False)
        return process.next(state, round_datasets(process, sampled, lambda cid, _: images.get(cid), 0)).state

    return process.initialize(), one_round


def child(workload: str, backend: str, cohort: int, rounds: int, population_size: int) -> None:
    from fedgen_debug import runtime

    runtime.install_shutdown_hooks()
    state, one_round = {"lm": _lm_round_fn, "gan": _gan_round_fn}[workload](cohort, backend, population_size)
    # Warm-up (tracing, TFF's worker): an LM's traces do not depend on the cohort; the GAN's vectorized
    # chunks do (CLIENT_CHUNK clients, the last chunk rounded up to 8), so it warms up on a full cohort.
    state = one_round(state, cohort if workload == "gan" else min(cohort, 64), 10**6)
    start = time.perf_counter()
    for r in range(rounds):
        state = one_round(state, cohort, r)
    print(json.dumps({"seconds_per_round": (time.perf_counter() - start) / rounds}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohorts", default="10,100,1000")
    parser.add_argument("--workloads", default="lm,gan")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds per cell (after the warm-up)")
    parser.add_argument("--population", type=int, help="users / writers, the same for every cohort "
                        "(default: 1.2 × the largest cohort), so RSS compares rounds, not data sizes")
    parser.add_argument("--child", nargs=3, metavar=("WORKLOAD", "BACKEND", "QN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.rounds, args.population)
        return
    cohorts = [int(c) for c in args.cohorts.split(",")]
    population = args.population or int(1.2 * max(cohorts))
    print(f"{'workload':<10}{'qN':>6}{'tff s/round':>13}{'tf s/round':>12}{'tf/tff':>8}{'tff RSS MiB':>13}"
          f"{'tf RSS MiB':>12}", flush=True)
    for workload in args.workloads.split(","):
        cells = {}
        for cohort in cohorts:
            cells[cohort] = {b: measure_child(workload, b, cohort, args.rounds, population) for b in ("tff", "tf")}
            tff, tf = cells[cohort]["tff"], cells[cohort]["tf"]
            print(f"{workload:<10}{cohort:>6}{tff['seconds_per_round']:>13.2f}{tf['seconds_per_round']:>12.2f}"
                  f"{tf['seconds_per_round'] / tff['seconds_per_round']:>8.2f}{tff['peak_rss_mib']:>13.0f}"
                  f"{tf['peak_rss_mib']:>12.0f}", flush=True)
        if len(cohorts) >= 2:
            low, high = cohorts[-2], cohorts[-1]
            for backend in ("tff", "tf"):
                a, b = cells[low][backend], cells[high][backend]
                slope = (b["seconds_per_round"] - a["seconds_per_round"]) / (high - low)
                print(f"  {workload} {backend}: {slope * 1000:.1f} ms per added client (qN {low}→{high}); "
                      f"RSS at {high} / at {low}: {b['peak_rss_mib'] / a['peak_rss_mib']:.2f}", flush=True)


if __name__ == "__main__":
    main()
