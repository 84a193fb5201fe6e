"""The selector contract (augenstein2020 §2.1, Table 1).

A selector is a frozen dataclass of public settings. On one device it sees that client's examples and
the primary model's outputs on them, and returns a boolean mask over the examples to keep, or `None`:
the client opts out. Selection runs where the data lives; the server only learns which clients take
part (and, for reporting, how many examples they keep), never which examples.

Arrays passed in, all of the same length n (the client's examples):
- `examples`: the client's data in the canonical element format (e.g. `pixels`, `label`; `text`;
  or `token` for token-level data such as the words a word-LM tokenizer produced).
- `outputs`: what the primary model computed on them on the device, by name: `correct` (bool),
  `confidence` (float, the top-class probability), `oov` (bool), `public_log_prob` (float), ...
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping

import numpy as np

Mask = np.ndarray  # bool [n]


def num_examples(examples: Mapping[str, np.ndarray]) -> int:
    lengths = {len(v) for v in examples.values()}
    if len(lengths) > 1:
        raise ValueError(f"all example arrays must have the same length. Found {sorted(lengths)}.")
    return lengths.pop() if lengths else 0


class Selector(abc.ABC):
    """Base of every selection criterion. Subclasses are frozen dataclasses."""

    task: str = ""  # "T1".."T6"
    name: str = ""  # the registry name, e.g. "by-example"
    required_outputs: tuple[str, ...] = ()
    # Whether it gathers where the primary model fails (True: T4's low-accuracy users, T2's misclassified
    # examples), where it works (False), or neither (None). In a pair of the two, the failing side is the
    # suspect whichever order the modeler gives them in (`analysis.diagnose.suspect_side`).
    failing: bool | None = None

    def __call__(self, client_id: str, examples: Mapping[str, np.ndarray],
                 outputs: Mapping[str, np.ndarray] | None = None) -> Mask | None:
        """The mask of examples this client keeps, or None if it opts out (also when it has none)."""
        n = num_examples(examples)
        outputs = outputs or {}
        missing = [k for k in self.required_outputs if k not in outputs]
        if missing:
            raise ValueError(f"{self.name} needs the primary model's outputs {missing} on the device.")
        for key in self.required_outputs:
            if len(outputs[key]) != n:
                raise ValueError(f"output {key!r} has {len(outputs[key])} values for {n} examples.")
        if n == 0:
            return None
        mask = self.select(client_id, examples, outputs, n)
        if mask is None:
            return None
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (n,):
            raise AssertionError(f"{self.name} returned a mask of shape {mask.shape} for {n} examples.")
        return mask if mask.any() else None

    @abc.abstractmethod
    def select(self, client_id: str, examples, outputs, n: int) -> Mask | None:
        """The subclass's rule; `n` >= 1 and required outputs are present."""

    def describe(self) -> dict:
        return {"name": self.name, "task": self.task,
                "settings": {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


@dataclasses.dataclass(frozen=True)
class AllOf(Selector):
    """Keeps the examples every part keeps; opts out if any part opts out."""

    parts: tuple[Selector, ...]
    name = "all-of"

    def __post_init__(self):
        if len(self.parts) < 2:
            raise ValueError(f"all-of needs at least 2 selectors. Found {len(self.parts)}.")
        object.__setattr__(self, "task", "+".join(p.task for p in self.parts))

    @property
    def required_outputs(self):
        return tuple(dict.fromkeys(k for p in self.parts for k in p.required_outputs))

    def select(self, client_id, examples, outputs, n):
        mask = np.ones(n, bool)
        for part in self.parts:
            part_mask = part(client_id, examples, outputs)
            if part_mask is None:
                return None
            mask &= part_mask
        return mask

    @property
    def failing(self) -> bool | None:
        """The parts' answer when those that have one agree, else None."""
        said = {p.failing for p in self.parts} - {None}
        return said.pop() if len(said) == 1 else None

    def describe(self) -> dict:
        return {"name": self.name, "task": self.task, "parts": [p.describe() for p in self.parts]}


@dataclasses.dataclass(frozen=True)
class AnyOf(AllOf):
    """Keeps the examples any part keeps; opts out only if every part does."""

    name = "any-of"

    def select(self, client_id, examples, outputs, n):
        mask = np.zeros(n, bool)
        for part in self.parts:
            part_mask = part(client_id, examples, outputs)
            if part_mask is not None:
                mask |= part_mask
        return mask
