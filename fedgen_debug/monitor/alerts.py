"""Alerts from per-period signals (issue 14): thresholds calibrated on clean periods, persistence (k of
the last m periods past the threshold), and alerts that say which signal, how far past, since when and
which two periods to compare.

Calibration: a signal's threshold is mean + `CALIBRATION_SDS` standard deviations of its values in the
calibration periods (which the plan declares clean), with the standard deviation floored by what those
values themselves say it cannot be less than: `MIN_RELATIVE_SPREAD` of their mean's magnitude, and for a
share of n generated samples (a space mass, a dark-background share) the sd sampling alone gives it at
their mean, sqrt(p(1-p)/n), so more samples make the threshold sharper (1% glued sentences need 40,000
samples a period). With 3 clean periods an estimated spread can be near 0 by chance, and a threshold a
hair above the clean mean would fire on noise. Until 2026-11-29 a drift also had an absolute floor,
0.001, set for the char-LM's JS drift (its clean values wandered by 0.0005-0.002 bits); that signal is no
longer computed (`measure`), and the GAN's Fréchet drift (clean values 3-30) never reached it.
A signal that carries its own test (a verdict's z) can be given a fixed threshold instead.
Everything here is post-processing of DP releases (the signals are computed from released samples).
"""

from __future__ import annotations

import dataclasses
import math

CALIBRATION_SDS = 4.0
MIN_RELATIVE_SPREAD = 0.1


@dataclasses.dataclass(frozen=True)
class Threshold:
    signal: str
    value: float
    source: str          # "calibrated on periods 1-3: mean 0.12, sd 0.02" or "fixed: the verdict's z > 3"


def calibrate(signal: str, clean_values, periods, samples: int | None = None) -> Threshold:
    """mean + `CALIBRATION_SDS` × the spread of the clean values; the spread is floored (module
    docstring) at `MIN_RELATIVE_SPREAD` of their mean and, for a share of `samples` draws, at its sampling sd."""
    values = [float(v) for v in clean_values]
    if len(values) < 2 or any(math.isnan(v) for v in values):
        raise ValueError(f"{signal}: calibration needs at least 2 clean values without NaN. Found {values}.")
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    floor = share_sampling_sd(values, samples) if samples else 0.0
    spread = max(sd, MIN_RELATIVE_SPREAD * abs(mean), floor)
    return Threshold(signal, mean + CALIBRATION_SDS * spread,
                     f"calibrated on periods {periods[0]}-{periods[-1]}: mean {mean:.4g}, sd {sd:.3g} "
                     f"(floored at {spread:.3g}), + {CALIBRATION_SDS:g} sd")


def fixed(signal: str, value: float, why: str) -> Threshold:
    return Threshold(signal, float(value), f"fixed: {why}")


def share_sampling_sd(clean_shares, samples: int) -> float:
    """The sampling standard deviation of a share of `samples` draws at the clean shares' mean (at
    least one draw's worth, so a clean share of 0 still has a spread)."""
    mean = sum(clean_shares) / len(clean_shares)
    p = min(max(mean, 1.0 / samples), 0.5)
    return (p * (1 - p) / samples) ** 0.5


@dataclasses.dataclass(frozen=True)
class Alert:
    signal: str
    period: int            # the period this state is for
    since: int             # the first period past the threshold in the current streak
    value: float
    threshold: float
    threshold_source: str
    compare: tuple[int, int]   # the last period before `since` (the baseline) and `period`

    @property
    def past_by(self) -> str:
        if self.threshold > 0:
            return f"{self.value / self.threshold:.2f}× its threshold"
        return f"{self.value - self.threshold:+.3g} over its threshold"

    def describe(self) -> str:
        return (f"ALERT {self.signal}: {self.value:.4g} in period {self.period}, {self.past_by} "
                f"({self.threshold:.4g}; {self.threshold_source}), past it since period {self.since}; "
                f"compare periods {self.compare[0]} and {self.compare[1]}")

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "compare": list(self.compare), "past_by": self.past_by,
                "message": self.describe()}


def active_alerts(history: dict[int, dict[str, float]], thresholds: dict[str, Threshold], persistence: int,
                  window: int) -> dict[int, list[Alert]]:
    """For every period in `history` ({period: {signal: value}}), the alerts active then: a signal is
    alerting in period t when it is past its threshold in t and in at least `persistence` of the last
    `window` periods up to t. A missing value counts as not past."""
    periods = sorted(history)
    out: dict[int, list[Alert]] = {}
    for i, period in enumerate(periods):
        recent = periods[max(0, i - window + 1):i + 1]
        out[period] = []
        for signal, threshold in sorted(thresholds.items()):
            past = [p for p in recent if history[p].get(signal, -math.inf) > threshold.value]
            if period not in past or len(past) < persistence:
                continue
            since = period
            for earlier in reversed(periods[:i]):
                if history[earlier].get(signal, -math.inf) > threshold.value:
                    since = earlier
                else:
                    break
            before = [p for p in periods if p < since]
            out[period].append(Alert(signal, period, since, history[period][signal], threshold.value,
                                     threshold.source, (before[-1] if before else since, period)))
    return out


def transitions(active: dict[int, list[Alert]]) -> list[tuple[str, int, str]]:
    """("raised" | "cleared", period, signal) in period order: what a sink is told."""
    events, alerting = [], set()
    for period in sorted(active):
        now = {a.signal for a in active[period]}
        events += [("raised", period, s) for s in sorted(now - alerting)]
        events += [("cleared", period, s) for s in sorted(alerting - now)]
        alerting = now
    return events
