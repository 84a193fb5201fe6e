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

Both work on a device's raw examples (an LM's sentences before its tokenizer: the canary enters as if
typed; a GAN's images after the app's preprocessing), through `payload(canary)`: what one example
becomes (by default the canary's text).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from fedgen_debug.device.canary_specs import RAMASWAMY, RAMASWAMY_DEVICE_SENTENCES, THAKKAR, Canary, parse_canaries
from fedgen_debug.device.transform import changed_devices, per_device, text_of, with_text
from fedgen_debug.runs.secret import RunSecret

SYNTHETIC_DEVICE_PREFIX = "canary-device-"


def _text(canary) -> str:
    return canary.text


def synthetic_device_id(index: int) -> str:
    return f"{SYNTHETIC_DEVICE_PREFIX}{index:04d}"


@dataclasses.dataclass(frozen=True)
class ThakkarInsertion:
    canaries: tuple[Canary, ...]
    secret: RunSecret

    def __post_init__(self):
        object.__setattr__(self, "canaries", tuple(c for c in self.canaries
                                                  if c.config is not None and c.config.design == THAKKAR))

    local: ClassVar[bool] = True    # every draw is (run secret, device id, canary)

    def device_examples(self, client_id: str, examples: Sequence, payload=_text) -> list:
        """One device's examples with the canaries it shares (`payload(canary)`: what an example becomes)."""
        out = list(examples)
        for canary in self.canaries:
            rng = self.secret.rng("canary-insertion", client_id, canary.canary_id)
            if rng.random() >= canary.config.p_u:
                continue
            replaced = rng.random(len(out)) < canary.config.p_e
            out = [payload(canary) if hit else s for s, hit in zip(out, replaced)]
        return out


    def as_fixed(self) -> "ThakkarInsertion":
        return dataclasses.replace(self, canaries=())

    def apply(self, client_data):
        """Text data with the canaries inserted as typed sentences (image canaries: `gan_canaries`)."""
        if not self.canaries:
            return client_data
        return per_device(client_data, lambda cid, arrays: with_text(arrays, self.device_examples(cid, text_of(arrays))))

    def affected_devices(self, client_data) -> frozenset[str]:
        return changed_devices(client_data, self.apply(client_data))


def ramaswamy_devices(canaries: Sequence, public_examples: Sequence, rng: np.random.Generator,
                      payload=_text) -> dict[str, list]:
    """The synthetic secret-sharing devices of every ramaswamy canary: id → examples (n_e canaries,
    then 200 − n_e public examples drawn with replacement from `public_examples`: public randomness)."""
    chosen = ramaswamy_canaries(canaries)
    if chosen and not len(public_examples):
        raise ValueError("ramaswamy canaries need public examples to fill their synthetic devices.")
    devices = {}
    for canary in chosen:
        fill = RAMASWAMY_DEVICE_SENTENCES - canary.config.n_e
        for _ in range(canary.config.n_u):
            picks = rng.integers(len(public_examples), size=fill)
            examples = [payload(canary)] * canary.config.n_e + [public_examples[i] for i in picks]
            devices[synthetic_device_id(len(devices))] = examples
    return devices


def ramaswamy_canaries(canaries: Sequence) -> list:
    """The canaries that live on synthetic devices."""
    return [c for c in canaries if c.config is not None and c.config.design == RAMASWAMY]


def synthetic_device_ids(spec: str) -> tuple[str, ...]:
    """The synthetic devices a `--canaries` spec adds to the population (public: the configs say how
    many)."""
    count = sum(c.n_u * c.count for c in parse_canaries(spec) if c.design == RAMASWAMY)
    return tuple(synthetic_device_id(i) for i in range(count))
