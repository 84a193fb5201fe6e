"""The range and choice checks every frozen config and spec parser uses (as jax_privacy's `_validate.py`).

Each check raises ValueError in dp_accounting's style, naming the argument, the rule and the value:
"clip must be > 0. Found -1.". Each returns the value, so a parser can check and assign in one line.

One rule for nan and inf, everywhere:
- nan is always refused: every comparison below is written so that nan fails it ("must be > 0. Found nan.");
- inf is refused ("must be finite. Found inf.") unless the check is told `allow_inf=True` (e.g. an upper
  bound that may be unbounded). A noise multiplier, a clip or a learning rate of inf would silently turn
  a run into noise or into nan weights, so the default is to refuse it.

`note` (optional) says what a special value means, e.g. "0 = never": it is put after the rule,
"eval_every must be >= 0 (0 = never). Found -1."
"""

from __future__ import annotations

import math
from typing import Any, Iterable


def _shown(number: float) -> str:
    """A bound as a person reads it: 0 rather than 0.0, 1e-06 rather than 1e-06000001."""
    return f"{number:g}" if isinstance(number, float) else str(number)


def _fail(name: str, rule: str, value: Any, note: str = "") -> ValueError:
    suffix = f" ({note})" if note else ""
    return ValueError(f"{name} must be {rule}{suffix}. Found {value}.")


def _refuse_inf(name: str, value: float, allow_inf: bool, note: str) -> None:
    if not allow_inf and isinstance(value, (int, float)) and math.isinf(value):
        raise _fail(name, "finite", value, note)


def check_finite(name: str, value: float, *, note: str = "") -> float:
    """Neither nan nor ±inf."""
    if not math.isfinite(value):
        raise _fail(name, "finite", value, note)
    return value


def check_positive(name: str, value: float, *, allow_inf: bool = False, note: str = "") -> float:
    """> 0."""
    if not value > 0:
        raise _fail(name, "> 0", value, note)
    _refuse_inf(name, value, allow_inf, note)
    return value


def check_non_negative(name: str, value: float, *, allow_inf: bool = False, note: str = "") -> float:
    """>= 0."""
    if not value >= 0:
        raise _fail(name, ">= 0", value, note)
    _refuse_inf(name, value, allow_inf, note)
    return value


def check_at_least(name: str, value: int, minimum: int, *, note: str = "") -> int:
    """>= `minimum`: counts (rounds, clients per round, batch sizes). A count is never inf or nan."""
    if not value >= minimum:
        raise _fail(name, f">= {_shown(minimum)}", value, note)
    _refuse_inf(name, value, False, note)
    return value


def check_at_most(name: str, value: float, maximum: float, *, note: str = "") -> float:
    """<= `maximum`."""
    if not value <= maximum:
        raise _fail(name, f"<= {_shown(maximum)}", value, note)
    return value


def check_in_range(name: str, value: float, low: float, high: float, *, low_inclusive: bool = True,
                   high_inclusive: bool = True, note: str = "") -> float:
    """In the interval from `low` to `high`, each end closed unless told otherwise: "in (0, 1]"."""
    above = value >= low if low_inclusive else value > low
    below = value <= high if high_inclusive else value < high
    if not (above and below):
        interval = (f"{'[' if low_inclusive else '('}{_shown(low)}, "
                    f"{_shown(high)}{']' if high_inclusive else ')'}")
        raise _fail(name, f"in {interval}", value, note)
    return value


def check_probability(name: str, value: float, *, note: str = "") -> float:
    """In [0, 1]."""
    return check_in_range(name, value, 0.0, 1.0, note=note)


def check_fraction(fraction: float, name: str = "fraction") -> float:
    """A share of devices, in [0, 1] (the bug injectors' `fraction`)."""
    return check_probability(name, fraction)


def check_one_of(name: str, value: Any, choices: Iterable[Any], *, note: str = "") -> Any:
    """One of `choices`; the message lists them: "sampling must be one of poisson, without-replacement."""
    choices = tuple(choices)
    if value not in choices:
        raise _fail(name, f"one of {', '.join(str(choice) for choice in choices)}", repr(value), note)
    return value
