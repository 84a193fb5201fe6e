"""Benchmark: seconds per DP-FedAvg round of the char- and word-LM at demo and paper model sizes, on
TFF and on the in-process `tf` backend (same client work, DP query and server update;
`round_timing.py`), with the ratio.
Prints numbers, not pass/fail: `.venv/bin/python benchmarks/lm_round.py [--clients-per-round 10]`.

Workload: synthetic-text:users=300 with the 10% tokenization bug, the demo preset's client work
(2 local epochs, batch 16). The paper trains with qN = 5000 clients per round; per-client seconds
(the round time over qN) let that be extrapolated, but here every round has the same small qN.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.scenarios.lm import LMRun, model_spec, prepare_devices  # noqa: E402
from fedgen_debug.scenarios.lm_data import public_vocabulary  # noqa: E402
from fedgen_debug.training import dp_fedavg  # noqa: E402
from fedgen_debug.training.sampling import sample_clients  # noqa: E402
from round_timing import num_parameters, time_rounds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="synthetic-text:users=300")
    parser.add_argument("--clients-per-round", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up round)")
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    print(f"{'model':<16}{'parameters':>12}{'examples/round':>16}{'TFF s/round':>13}{'tf s/round':>12}"
          f"{'ratio':>7}{'s/client':>10}")
    for kind in ("char", "word"):
        # The public stand-in vocabulary the scenario uses for synthetic text (no ledger: a benchmark).
        base = LMRun(kind, args.data, 0.1, "demo")
        vocab = public_vocabulary(base.vocab, base.vocab_size)
        devices = prepare_devices(base, data_spec.load_client_data(args.data), vocab)
        population = sorted(c for c, (x, _) in devices.examples.items() if len(x))
        for preset in ("demo", "paper"):
            run = LMRun(kind, args.data, 0.1, preset)
            # The demo preset's client work at both sizes, so only the model size differs.
            config = dataclasses.replace(LMRun(kind, args.data, 0.1, "demo").training_config(len(population)),
                                         dp=dataclasses.replace(run.training_config(len(population)).dp,
                                                                clients_per_round=args.clients_per_round))
            spec = model_spec(run, devices.num_ids)

            def client_ds(cid):
                return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices(devices.examples[cid]), config)

            rounds = [sample_clients(population, args.clients_per_round, np.random.default_rng(r)) for r in range(args.rounds + 1)]
            examples = np.mean([sum(len(devices.examples[c][0]) for c in r) for r in rounds])
            tff_s, tf_s = time_rounds(spec, config, rounds, client_ds)
            print(f"{kind + '-LM ' + preset:<16}{num_parameters(spec):>12,}{examples:>16.0f}{tff_s:>13.2f}{tf_s:>12.2f}"
                  f"{tff_s / tf_s:>7.2f}{tff_s / args.clients_per_round:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
