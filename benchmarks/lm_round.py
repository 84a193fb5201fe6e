"""Benchmark: seconds per DP-FedAvg round of the char- and word-LM at demo and paper model sizes, on
TFF and on the in-process `tf` backend (same client work, DP query and server update;
`round_timing.py`), with the ratio; and on the `tf` backend, its clients one by one on threads (as
before `training.vectorized_lm`) against all of them in one vectorized call, with that ratio.
Prints numbers, not pass/fail:
`.venv/bin/python benchmarks/lm_round.py [--clients-per-round 10] [--rounds 3] [--no-tff] [--demo-only]
[--kinds char,word]` (run two at once to time them side by side, as the demo trains each LM pair).

Workload: synthetic-text:users=300 with the 10% tokenization bug, the demo preset's client work
(its local epochs, batch 16, at most `max_examples` examples a device). The paper trains with qN = 5000
clients per round; per-client seconds (the round time over qN) let that be extrapolated, but here every
round has the same small qN.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.training.lm_run import LMRun, model_spec  # noqa: E402
from fedgen_debug.experiments.lm import prepare_devices  # noqa: E402
from fedgen_debug.device.lm_data import public_vocabulary  # noqa: E402
from fedgen_debug.training import dp_fedavg, vectorized_lm  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402
from round_timing import num_parameters, seconds_per_round  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="synthetic-text:users=300")
    parser.add_argument("--clients-per-round", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up round)")
    parser.add_argument("--no-tff", action="store_true", help="time the tf backend only")
    parser.add_argument("--demo-only", action="store_true", help="the demo model sizes only")
    parser.add_argument("--kinds", default="char,word", help="comma-separated: char, word")
    args = parser.parse_args()
    runtime.install_shutdown_hooks()
    print(f"{'model':<16}{'parameters':>12}{'examples/round':>16}{'TFF s/round':>13}{'tf s/round':>12}"
          f"{'ratio':>7}{'s/client':>10}{'tf one by one':>15}{'vectorized':>12}{'ratio':>7}")
    for kind in args.kinds.split(","):
        # The public stand-in vocabulary the scenario uses for synthetic text (no ledger: a benchmark).
        base = LMRun(kind, args.data, 0.1, "demo")
        vocab = public_vocabulary(base.vocab, base.vocab_size)
        devices = prepare_devices(base, data_spec.load_client_data(args.data), vocab)
        population = sorted(c for c, (x, _) in devices.examples.items() if len(x))
        for preset in ("demo",) if args.demo_only else ("demo", "paper"):
            run = LMRun(kind, args.data, 0.1, preset)
            # The demo preset's client work at both sizes, so only the model size differs.
            config = dataclasses.replace(LMRun(kind, args.data, 0.1, "demo").training_config(len(population)),
                                         dp=dataclasses.replace(run.training_config(len(population)).dp,
                                                                clients_per_round=args.clients_per_round))
            spec = model_spec(run, devices.num_ids)

            def client_ds(cid):
                # The demo's per-round cap (`client.max_examples`), a fixed subset per device.
                # Arrays, as the scenario hands them over (`dp_fedavg.ClientExamples`).
                return dp_fedavg.ClientExamples(dp_fedavg.round_examples(
                    devices.examples[cid], config.client.max_examples, np.random.default_rng(len(cid))))

            rounds = [sample_clients(population, args.clients_per_round, np.random.default_rng(r)) for r in range(args.rounds + 1)]
            cap = config.client.max_examples or np.inf
            examples = np.mean([sum(min(len(devices.examples[c][0]), cap) for c in r) for r in rounds])
            tff_s = seconds_per_round(dp_fedavg.build_process(spec, config, (0, 0), backend="tff"), rounds,
                                      lambda c: client_ds(c).dataset(config)) if not args.no_tff else float("nan")
            one_by_one, vectorized = (seconds_per_round(tf_process(spec, config, vectorize), rounds, client_ds)
                                      for vectorize in (False, True))
            print(f"{kind + '-LM ' + preset:<16}{num_parameters(spec):>12,}{examples:>16.0f}{tff_s:>13.2f}"
                  f"{vectorized:>12.2f}{tff_s / vectorized:>7.2f}{tff_s / args.clients_per_round:>10.3f}"
                  f"{one_by_one:>15.2f}{vectorized:>12.2f}{one_by_one / vectorized:>7.2f}", flush=True)


def tf_process(spec, config, vectorize: bool):
    """The tf backend's process, its clients in one vectorized call or (without `vectorize`) one by one
    on threads, whichever `vectorized_lm.worthwhile` would choose."""
    worthwhile = vectorized_lm.worthwhile
    vectorized_lm.worthwhile = lambda model: vectorize
    try:
        process = dp_fedavg.build_process(spec, config, (0, 0), backend="tf")
    finally:
        vectorized_lm.worthwhile = worthwhile
    assert process.vectorized == vectorize
    return process


if __name__ == "__main__":
    main()
