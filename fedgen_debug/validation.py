"""Validation shared by the bug injectors and device faults: messages as dp_accounting's, "x must be > 0. Found -1."."""

from __future__ import annotations


def check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]. Found {fraction}.")


def check_positive(name: str, value: float) -> None:
    """`value > 0` and finite (nan and inf are refused alike)."""
    if not 0.0 < value < float("inf"):
        raise ValueError(f"{name} must be > 0. Found {value}.")


def check_between(name: str, value: float, low: float, high: float) -> None:
    """`low <= value <= high` (nan refused)."""
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}]. Found {value}.")


def check_one_of(name: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}. Found {value!r}.")
