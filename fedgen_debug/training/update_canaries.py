"""Update canaries: clients that send a random direction instead of training (Andrew et al. 2023).

`--update-canaries K` adds K clients to the training population. They are sampled like everyone else
(the run secret's sampling stream, so they take the slots a user would have taken); when one is
sampled its device trains on nothing (a zero record) and the DP sum adds S·c_i, its unit direction
c_i scaled to the clip — exactly what a client whose update is clipped to the norm S contributes.
The sum is still clipped-and-noised under the same event, so the ledger's ε covers the run (N counts
the canaries). `privacy.empirical` turns the cosines of the final model delta with the inserted
directions into an empirical ε.

The directions come from the public `--seed`: releasing them (or cosines with them) is post-processing
of the released weights with data independent of the users. Which rounds sampled them is the run
secret's and stays with the server.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from fedgen_debug.privacy.sampling import sample_clients
from fedgen_debug import rng_streams

CANARY_PREFIX = "update-canary-"


def canary_ids(count: int) -> tuple[str, ...]:
    return tuple(f"{CANARY_PREFIX}{i:05d}" for i in range(count))


def is_canary(client_id: str) -> bool:
    return client_id.startswith(CANARY_PREFIX)


def direction(shapes, seed: int, index) -> list[tf.Tensor]:
    """Canary `index`'s unit direction over tensors of `shapes` (a list), from the public `seed`.
    Works eagerly and in graphs (`index` may be a tensor); directions `count..` are never inserted
    (the "unseen" ones)."""
    base = tf.stack([tf.constant(seed * rng_streams.UPDATE_CANARY_DIRECTIONS, tf.int64), tf.cast(index, tf.int64)])
    seeds = tf.random.experimental.stateless_split(base, num=len(shapes))
    leaves = [tf.random.stateless_normal(shape, seed=seeds[i]) for i, shape in enumerate(shapes)]
    norm = tf.linalg.global_norm(leaves)
    return [leaf / norm for leaf in leaves]


@dataclasses.dataclass(frozen=True)
class UpdateCanaryPlan:
    """Which canaries each round's DP sum adds (`schedule[t, i]`: canary i sampled in round t), their
    seed and the clip they are scaled to. Server-side: the schedule comes from the secret sampling."""

    schedule: np.ndarray
    seed: int
    clip: float

    @property
    def count(self) -> int:
        return int(self.schedule.shape[1])


def plan(population_ids, count: int, config, secret, accounted_size: int | None = None) -> UpdateCanaryPlan:
    """Replays the training loop's sampling (`loop.train` draws round t's sample from
    `secret.rng("sampling", t)` over the same population, `accounted_size` its `Population.accounted_size`)
    to know which canaries each round holds."""
    if config.dp.clip is None:
        raise ValueError("update canaries are scaled to the clip: they need clip S (not None).")
    ids = canary_ids(count)
    missing = set(ids) - set(population_ids)
    if missing:
        raise ValueError(f"{len(missing)} update canaries are not in the population.")
    position = {cid: i for i, cid in enumerate(ids)}
    schedule = np.zeros((config.rounds, count), bool)
    for t in range(config.rounds):
        for cid in sample_clients(population_ids, config.dp.clients_per_round, secret.rng("sampling", t),
                                  config.sampling, accounted_size):
            if cid in position:
                schedule[t, position[cid]] = True
    return UpdateCanaryPlan(schedule, config.seed, float(config.dp.clip))


def cosines(delta, seed: int, indices) -> np.ndarray:
    """Cosine of the model delta (a list of arrays) with each canary direction in `indices`."""
    delta = [tf.convert_to_tensor(np.asarray(d, np.float32)) for d in delta]
    shapes = [d.shape for d in delta]
    norm = tf.linalg.global_norm(delta)
    out = []
    for i in indices:
        c = direction(shapes, seed, i)
        out.append(float(sum(tf.reduce_sum(d * ci) for d, ci in zip(delta, c)) / norm))
    return np.asarray(out)
