"""The DP aggregations around training, before and after their 2026-12-03 changes, in one run:

- T4's DP quantile (100 users a round, 100 rounds, as at the paper's 3,400 writers): tf-privacy's
  `accumulate_record` eagerly record by record (before) vs a round's records in one call (`dp_quantile`
  now); the two trajectories must be equal.
- A GAN's DP sum over rounds whose cohort size changes (a T4 selection: 40-50 demo critics a round):
  one unrolled graph per stack size (before) vs power-of-two pieces (`DPSum.next` now).

  .venv/bin/python benchmarks/dp_aggregation.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fedgen_debug.models.gan import build_discriminator  # noqa: E402
from fedgen_debug.privacy.quantile import QuantileConfig, SeededQuantileEstimatorQuery, dp_quantile  # noqa: E402
from fedgen_debug.privacy.sampling import sample_clients  # noqa: E402
from fedgen_debug.runs.secret import RunSecret  # noqa: E402
from fedgen_debug.training import presets  # noqa: E402
from fedgen_debug.training.config import DPConfig  # noqa: E402
from fedgen_debug.training.dp_query import dp_query  # noqa: E402
from fedgen_debug.training.tf_backend import DPSum  # noqa: E402


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="DP-sum rounds")
    args = parser.parse_args()

    accuracy = np.random.default_rng(0).beta(40, 4.5, size=3400)
    values = {f"w{i:05d}": float(a) for i, a in enumerate(accuracy)}
    config = QuantileConfig(0.25, clients_per_round=100, rounds=100, noise_multiplier=10.0)
    before, t_before = timed(lambda: quantile_record_by_record(sorted(values), values, config, RunSecret(1)))
    after, t_after = timed(lambda: dp_quantile(list(values), values, config, RunSecret(1)).trajectory)
    assert list(after) == before, "the one-call quantile must give the record-by-record trajectory"
    print(f"DP quantile, 100 users x 100 rounds: record by record {t_before:.2f} s, one call a round {t_after:.2f} s "
          f"(x{t_before / t_after:.1f}), trajectories equal")

    critic = build_discriminator(presets.gan_model_config("demo"), 0)
    specs = [tf.TensorSpec(v.shape, v.dtype) for v in critic.trainable_variables]
    cohorts = np.random.default_rng(2).integers(40, 51, size=args.rounds)
    stacks = {n: [np.random.default_rng(int(n)).normal(0, 0.01, (n, *s.shape)).astype(np.float32) for s in specs]
              for n in set(cohorts.tolist())}
    dp = DPConfig(clients_per_round=50, noise_multiplier=1.0, clip=0.1)

    def rounds(whole_stacks: bool):
        dp_sum = DPSum(dp_query(dp, (1, 2)), specs)
        state = dp_sum.initialize()
        for n in cohorts:
            if whole_stacks:   # before: one unrolled graph per stack size
                query_state = tf.nest.map_structure(tf.convert_to_tensor, state.query_state)
                params = dp_sum._query.derive_sample_params(query_state)  # noqa: SLF001
                dp_sum._sum_stacked(params, dp_sum._query.initial_sample_state(specs), stacks[n])  # noqa: SLF001
            else:
                _, state = dp_sum.next(state, stacks=[stacks[n]])
        return dp_sum._sum_stacked.experimental_get_tracing_count()  # noqa: SLF001

    traces_before, t_before = timed(lambda: rounds(True))
    traces_after, t_after = timed(lambda: rounds(False))
    print(f"DP sum, {args.rounds} rounds of 40-50 demo critics ({len(stacks)} cohort sizes): one graph per size "
          f"{t_before:.2f} s ({traces_before} traces), power-of-two pieces {t_after:.2f} s ({traces_after} traces) "
          f"(x{t_before / t_after:.1f})")


if __name__ == "__main__":
    main()
