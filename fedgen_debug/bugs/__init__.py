"""Bug injectors, applied as on-device preprocessing (paper §5 and §6).

Each injector is a frozen dataclass of public settings (fraction, seed) with a `fixed` variant (the
pipeline after the modeler's fix). Their ground-truth bookkeeping (`affected_*`) exists for tests and
evaluation scripts only; no modeler-facing output (CLI summary, run store, app) shows it.
"""

from fedgen_debug.bugs.pixels import PixelInversionBug
from fedgen_debug.bugs.tokenization import TokenizationBug

__all__ = ["PixelInversionBug", "TokenizationBug"]
