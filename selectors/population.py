"""The population step: per-device selection turned into an auxiliary's training population.

Each client runs the selector on its own data (in the simulation: one client at a time). What leaves
the device is only whether it takes part and, for the modeler's report, how many examples it keeps
(paper Tables 11/12 report such subpopulation sizes); the kept examples themselves never do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from fedgen_debug.progress import progress
from fedgen_debug.selectors.base import Selector


@dataclasses.dataclass(frozen=True)
class Population:
    selector: dict
    client_ids: tuple[str, ...]
    examples_kept: int
    clients_total: int

    @property
    def size(self) -> int:
        return len(self.client_ids)

    def as_dict(self) -> dict:
        return {"selector": self.selector, "clients": self.size, "clients_total": self.clients_total,
                "examples_kept": self.examples_kept}


def keep(examples: Mapping[str, np.ndarray], mask: np.ndarray) -> dict:
    """The kept examples, on the device that owns them."""
    return {k: np.asarray(v)[mask] for k, v in examples.items()}


def select_population(client_ids, device_view: Callable[[str], tuple[Mapping, Mapping]],
                      selector: Selector) -> Population:
    """`device_view(client_id)` -> (examples, primary outputs) as computed on that device."""
    chosen, kept = [], 0
    client_ids = list(client_ids)
    for cid in progress(client_ids, desc=f"selecting ({selector.name})", unit="client"):
        examples, outputs = device_view(cid)
        mask = selector(cid, examples, outputs)
        if mask is not None:
            chosen.append(cid)
            kept += int(mask.sum())
    return Population(selector.describe(), tuple(chosen), kept, len(client_ids))
