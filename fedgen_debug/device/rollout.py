"""A bug that rolls out on a schedule and is fixed later (issue 14's fleets): `invert:3=0.05,4=0.2,5=0.5,8=0`
reads "no inversion in periods 1-2, then 5% of devices from period 3, 20% from 4, 50% from 5, fixed
from 8". `concat:` likewise, as the share of sentences the buggy tokenizer glues.

Inversion rolls out to devices, as an app update does: each device draws one number u in [0, 1) from
(seed, device id) and runs the update in every period whose fraction exceeds u. Rollouts are therefore
nested (the 5% are among the 20%) and stable when devices join or leave, unlike drawing a fresh subset
per period. The tokenization bug hits sentences independently (`bugs.TokenizationBug`): its schedule
only says the fraction per period.
"""

from __future__ import annotations

import dataclasses
import math

from fedgen_debug.bugs._validation import check_fraction
from fedgen_debug.data import client_data as cd
from fedgen_debug.seeding import client_rng

BUGS = ("invert", "concat")
_ROLLOUT_STREAM = 0x2011


@dataclasses.dataclass(frozen=True)
class Rollout:
    bug: str
    steps: tuple[tuple[int, float], ...]   # (first period, fraction), periods increasing
    seed: int = 0

    def __post_init__(self):
        if self.bug not in BUGS:
            raise ValueError(f"bug must be one of {', '.join(BUGS)}. Found {self.bug!r}.")
        periods = [p for p, _ in self.steps]
        if any(p < 1 for p in periods) or periods != sorted(set(periods)):
            raise ValueError(f"rollout periods must be >= 1 and increasing. Found {periods}.")
        for _, fraction in self.steps:
            check_fraction(fraction)

    def fraction(self, period: int) -> float:
        """The bug's fraction in `period` (0 before the first step)."""
        current = 0.0
        for first, fraction in self.steps:
            if period >= first:
                current = fraction
        return current

    def device_draw(self, client_id: str) -> float:
        return float(client_rng(self.seed, client_id, _ROLLOUT_STREAM).random())

    def affected_devices(self, client_ids, period: int) -> frozenset[str]:
        """Devices running the inverted update in `period` (ground truth, for evaluation)."""
        if self.bug != "invert":
            raise ValueError("only the invert rollout hits whole devices; concat hits sentences.")
        fraction = self.fraction(period)
        return frozenset(c for c in client_ids if self.device_draw(c) < fraction)

    def apply_inversion(self, client_data: cd.ArrayClientData, period: int) -> cd.ArrayClientData:
        """The period's image data as the devices see it: pixels inverted on the affected devices."""
        affected = self.affected_devices(client_data.client_ids, period)
        arrays = {}
        for client_id in client_data.client_ids:
            examples = dict(client_data.client_arrays(client_id))
            if client_id in affected:
                examples["pixels"] = 1.0 - examples["pixels"]
            arrays[client_id] = examples
        return cd.ArrayClientData(arrays)


def parse_rollout(spec: str, seed: int = 0) -> Rollout:
    """`BUG:PERIOD=FRACTION,...`, e.g. `invert:3=0.05,4=0.2,5=0.5,8=0`."""
    bug, sep, body = spec.partition(":")
    if not sep or not body:
        raise ValueError(f"a rollout looks like invert:3=0.05,5=0.5,8=0. Found {spec!r}.")
    steps = []
    for part in body.split(","):
        period, eq, fraction = part.partition("=")
        try:
            steps.append((int(period), float(fraction)))
        except ValueError:
            raise ValueError(f"rollout step {part!r} must look like PERIOD=FRACTION (e.g. 3=0.05).") from None
        if not eq or math.isnan(steps[-1][1]):
            raise ValueError(f"rollout step {part!r} must look like PERIOD=FRACTION (e.g. 3=0.05).")
    return Rollout(bug.strip(), tuple(steps), seed)


def first_period_at_least(rollout: Rollout, fraction: float, periods: int) -> int | None:
    """The first period (1..periods) whose fraction reaches `fraction` (issue 14's "reaching 10%")."""
    return next((p for p in range(1, periods + 1) if rollout.fraction(p) >= fraction), None)

