"""Validation shared by the bug injectors."""

from __future__ import annotations


def check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]. Found {fraction}.")
