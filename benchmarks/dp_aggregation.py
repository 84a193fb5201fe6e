"""T4's DP quantile before and after its 2026-12-03 change, in one run: 100 users a round, 100 rounds (as at
the paper's 3,400 writers), tf-privacy's `accumulate_record` eagerly record by record (before) vs a round's
records in one call (`dp_quantile` now); the two trajectories must be equal.

  .venv/bin/python benchmarks/dp_aggregation.py
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedgen_debug.privacy.quantile import QuantileConfig, SeededQuantileEstimatorQuery, dp_quantile  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402
from fedgen_debug.runs.secret import RunSecret  # noqa: E402


def quantile_record_by_record(ids, values, config, secret):
    """`dp_quantile` as it was: each sampled user's record through the query's accumulate_record."""
    query = SeededQuantileEstimatorQuery(config, secret.tf_seed("quantile-noise", config.stream_key))
    state, trajectory = query.initial_global_state(), []
    for round_num in range(config.rounds):
        sampled = sample_clients(ids, config.clients_per_round, secret.rng("quantile-sampling", config.stream_key,
                                                                             round_num))
        params, sample_state = query.derive_sample_params(state), query.initial_sample_state()
        for cid in sampled:
            sample_state = query.accumulate_record(params, sample_state, tf.constant(np.float32(values[cid])))
        estimate, state, _ = query.get_noised_result(sample_state, state)
        trajectory.append(float(estimate))
    return trajectory


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()

    accuracy = np.random.default_rng(0).beta(40, 4.5, size=3400)
    values = {f"w{i:05d}": float(a) for i, a in enumerate(accuracy)}
    config = QuantileConfig(0.25, clients_per_round=100, rounds=100, noise_multiplier=10.0)
    before, t_before = timed(lambda: quantile_record_by_record(sorted(values), values, config, RunSecret(1)))
    after, t_after = timed(lambda: dp_quantile(list(values), values, config, RunSecret(1)).trajectory)
    assert list(after) == before, "the one-call quantile must give the record-by-record trajectory"
    print(f"DP quantile, 100 users x 100 rounds: record by record {t_before:.2f} s, one call a round {t_after:.2f} s "
          f"(x{t_before / t_after:.1f}), trajectories equal")


if __name__ == "__main__":
    main()
