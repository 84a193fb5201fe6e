"""Canary insertion on the devices: the federated secret sharer, both published designs.

- `ThakkarInsertion` (Thakkar et al. 2021, Fig. 1): for each canary, each user independently becomes
  a secret sharer with probability p_u; then each sentence of a sharer is independently replaced by the
  canary with probability p_e (user selection first). A sentence claimed by two canaries keeps the
  later one. Every decision for a device depends only on (run secret, client id, canary), as if the
  device drew it itself: who shares a canary is never written anywhere, and a resumed run redraws it
  identically.
- `ramaswamy_devices` (Ramaswamy et al. 2020, §IV): n_u synthetic devices per canary, each holding
  n_e copies of it and 200 − n_e sentences of public text; they join the population and may be sampled
  like any device (the paper's "always available").

Both work on a device's raw sentences, before its tokenizer: the canary enters as if typed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from fedgen_debug.memorization.canaries import RAMASWAMY, RAMASWAMY_DEVICE_SENTENCES, THAKKAR, Canary
from fedgen_debug.runs.secret import RunSecret

SYNTHETIC_DEVICE_PREFIX = "canary-device-"


def synthetic_device_id(index: int) -> str:
    return f"{SYNTHETIC_DEVICE_PREFIX}{index:04d}"


@dataclasses.dataclass(frozen=True)
class ThakkarInsertion:
    canaries: tuple[Canary, ...]
    secret: RunSecret

    def __post_init__(self):
        object.__setattr__(self, "canaries", tuple(c for c in self.canaries
                                                  if c.config is not None and c.config.design == THAKKAR))

    def apply(self, client_id: str, sentences: Sequence[str]) -> list[str]:
        out = list(sentences)
        for canary in self.canaries:
            rng = self.secret.rng("canary-insertion", client_id, canary.canary_id)
            if rng.random() >= canary.config.p_u:
                continue
            replaced = rng.random(len(out)) < canary.config.p_e
            out = [canary.text if hit else s for s, hit in zip(out, replaced)]
        return out


def ramaswamy_devices(canaries: Sequence[Canary], public_sentences: Sequence[str],
                      rng: np.random.Generator) -> dict[str, list[str]]:
    """The synthetic secret-sharing devices of every ramaswamy canary: id → sentences. Public
    sentences are drawn with replacement from `public_sentences` (public randomness)."""
    chosen = [c for c in canaries if c.config is not None and c.config.design == RAMASWAMY]
    if chosen and not public_sentences:
        raise ValueError("ramaswamy canaries need public sentences to fill their synthetic devices.")
    devices = {}
    for canary in chosen:
        fill = RAMASWAMY_DEVICE_SENTENCES - canary.config.n_e
        for _ in range(canary.config.n_u):
            picks = rng.integers(len(public_sentences), size=fill)
            sentences = [canary.text] * canary.config.n_e + [public_sentences[i] for i in picks]
            devices[synthetic_device_id(len(devices))] = sentences
    return devices
