"""A fleet that changes over time, for simulating continuous monitoring (issue 14): a source's devices
bring new examples each period, join late and leave early.

Every draw depends only on (config seed, device id, stream), as `seeding.client_rng`: the same device
has the same history whatever other devices exist and in whatever order periods are built, so a period
rebuilt after a crash is the same period.

- Membership: a device is present from period 1 with probability `initial`; otherwise it joins at a
  period drawn geometrically with rate `join_rate` (it may never join within the horizon). Once there,
  it stays a geometric number of periods with rate `leave_rate` per period (0: never leaves).
- Examples: each device's examples are shuffled once; period p brings the next `window` share of them
  (at least one), wrapping around at the end. A source holds a fixed set of examples, so after
  1/`window` periods a device's examples repeat: the stream is new in the model's eyes only while it
  lasts (say so when measuring drift on real data).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.data import client_data as cd
from fedgen_debug.seeding import client_rng



@dataclasses.dataclass(frozen=True)
class FleetConfig:
    initial: float = 0.8       # share of devices present at period 1
    join_rate: float = 0.1     # per period, for devices not yet present
    leave_rate: float = 0.05   # per period, for present devices
    window: float = 0.25       # share of a device's examples arriving per period
    seed: int = 0

    def __post_init__(self):
        for name in ("initial", "join_rate", "leave_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0 or math.isnan(value):
                raise ValueError(f"{name} must be in [0, 1]. Found {value}.")
        if not 0.0 < self.window <= 1.0:
            raise ValueError(f"window must be in (0, 1]. Found {self.window}.")


@dataclasses.dataclass(frozen=True)
class Membership:
    joins: int            # first period present (1-based)
    leaves: float         # first period absent again (inf: never leaves)

    def present(self, period: int) -> bool:
        return self.joins <= period < self.leaves


def _geometric(rng: np.random.Generator, rate: float) -> float:
    """Periods until an event of per-period probability `rate` (>= 1; inf when rate is 0)."""
    return math.inf if rate == 0.0 else float(rng.geometric(rate))


def membership(config: FleetConfig, client_id: str) -> Membership:
    rng = client_rng(config.seed, client_id, rng_streams.FLEET_MEMBERSHIP)
    initial, join_wait, stay = rng.random(), _geometric(rng, config.join_rate), _geometric(rng, config.leave_rate)
    joins = 1 if initial < config.initial else 1 + join_wait
    if math.isinf(joins):
        return Membership(joins=2 ** 62, leaves=math.inf)
    return Membership(joins=int(joins), leaves=joins + stay)


def period_indices(config: FleetConfig, client_id: str, num_examples: int, period: int) -> np.ndarray:
    """Indices of the device's examples that arrive in `period` (1-based)."""
    if period < 1:
        raise ValueError(f"period must be >= 1. Found {period}.")
    order = client_rng(config.seed, client_id, rng_streams.FLEET_ORDER).permutation(num_examples)
    size = max(1, int(round(config.window * num_examples)))
    start = ((period - 1) * size) % num_examples
    return order[(start + np.arange(size)) % num_examples]


def fleet_period(source, config: FleetConfig, period: int) -> cd.ArrayClientData:
    """The devices present in `period` with the examples that period brought them."""
    arrays = {}
    for client_id in sorted(source.client_ids):
        if not membership(config, client_id).present(period):
            continue
        examples = cd.client_numpy(source, client_id)
        n = len(next(iter(examples.values())))
        chosen = period_indices(config, client_id, n, period)
        arrays[client_id] = {k: v[chosen] for k, v in examples.items()}
    if not arrays:
        raise ValueError(f"no device is present in period {period}; raise initial or join_rate.")
    return cd.ArrayClientData(arrays)
