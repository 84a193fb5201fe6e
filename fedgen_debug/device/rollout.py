"""A bug that rolls out on a schedule and is fixed later (issue 14's fleets): `invert:3=0.05,4=0.2,5=0.5,8=0`
reads "no inversion in periods 1-2, then 5% of devices from period 3, 20% from 4, 50% from 5, fixed
from 8". `concat:` likewise, as the share of sentences the buggy tokenizer glues.

Inversion rolls out to devices, as an app update does: each device draws one number u in [0, 1) from
(seed, device id) and runs the update in every period whose fraction exceeds u. Rollouts are therefore
nested (the 5% are among the 20%) and stable when devices join or leave, unlike drawing a fresh subset
per period. The tokenization bug hits sentences independently (`device.tokenization.TokenizationBug`): its schedule
only says the fraction per period.
"""

from __future__ import annotations

import dataclasses
import math

from typing import ClassVar

from fedgen_debug import rng_streams
from fedgen_debug.device.pixels import inverted_on
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.device.transform import device_draw
from fedgen_debug.spec_grammar import split_spec
from fedgen_debug.validation import check_fraction, check_one_of

BUGS = ("invert", "concat")


@dataclasses.dataclass(frozen=True)
class Rollout:
    bug: str
    steps: tuple[tuple[int, float], ...]   # (first period, fraction), periods increasing
    seed: int = 0

    def __post_init__(self):
        check_one_of("bug", self.bug, BUGS)
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
        return device_draw(self.seed, client_id, rng_streams.ROLLOUT)

    def affected_devices(self, client_ids, period: int) -> frozenset[str]:
        """Devices running the inverted update in `period` (ground truth, for evaluation)."""
        if self.bug != "invert":
            raise ValueError("only the invert rollout hits whole devices; concat hits sentences.")
        fraction = self.fraction(period)
        return frozenset(c for c in client_ids if self.device_draw(c) < fraction)

    def at(self, period: int):
        """The period's `DeviceTransform`: the inversion on the devices it reached, or the tokenization bug
        at the period's share of sentences."""
        if self.bug == "invert":
            return RolloutStage(self, period)
        return TokenizationBug(self.fraction(period), seed=self.seed)


@dataclasses.dataclass(frozen=True)
class RolloutStage:
    """The inversion as it stands in one period of a rollout (a `DeviceTransform`)."""

    rollout: Rollout
    period: int
    fixed: bool = False
    local: ClassVar[bool] = True    # each device's own draw

    @property
    def fraction(self) -> float:
        return 0.0 if self.fixed else self.rollout.fraction(self.period)

    def as_fixed(self) -> "RolloutStage":
        return dataclasses.replace(self, fixed=True)

    def affected_devices(self, client_data) -> frozenset[str]:
        return frozenset() if self.fixed else self.rollout.affected_devices(client_data.client_ids, self.period)

    def apply(self, client_data):
        return inverted_on(client_data, self.affected_devices(client_data))


def parse_rollout(spec: str, seed: int = 0) -> Rollout:
    """`BUG:PERIOD=FRACTION,...`, e.g. `invert:3=0.05,4=0.2,5=0.5,8=0`."""
    example = "invert:3=0.05,5=0.5,8=0"
    parts = split_spec(spec)
    if parts.positional:
        raise ValueError(f"rollout step {parts.positional[0]!r} must look like PERIOD=FRACTION (e.g. 3=0.05).")
    if not parts.settings:
        raise ValueError(f"a rollout looks like {example}. Found {spec!r}.")
    steps = []
    for period, fraction in parts.settings:
        try:
            steps.append((int(period), float(fraction)))
        except ValueError:
            raise ValueError(f"rollout step {period}={fraction} must look like PERIOD=FRACTION (e.g. 3=0.05).") from None
        if math.isnan(steps[-1][1]):
            raise ValueError(f"rollout step {period}={fraction} must look like PERIOD=FRACTION (e.g. 3=0.05).")
    return Rollout(parts.name, tuple(steps), seed)


def first_period_at_least(rollout: Rollout, fraction: float, periods: int) -> int | None:
    """The first period (1..periods) whose fraction reaches `fraction` (issue 14's "reaching 10%")."""
    return next((p for p in range(1, periods + 1) if rollout.fraction(p) >= fraction), None)

