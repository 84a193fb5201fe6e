"""The tokenization bug of paper §5: the first two tokens of some sentences are glued into one.

`'Good day to you.'` is tokenized as `['good day', 'to', 'you', '.']` instead of
`['good', 'day', 'to', 'you', '.']`. Each sentence of each device is hit independently with
probability `fraction` (so over all sentences the hit rate is Binomial(n, fraction)); the decision
for a device's k-th sentence depends only on (seed, client id, k), as if each phone ran the buggy
tokenizer itself.

As a `DeviceTransform` (`device.transform`) the bug rewrites a hit sentence as its tokens with the first
two joined by `data.text.GLUE`, which `tokenize` keeps as one token with a space: the devices' text then
tokenizes as the buggy tokenizer would, through the one tokenizer every device runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.data.text import GLUE, tokenize
from fedgen_debug.device.transform import changed_devices, per_device, text_of, with_text
from fedgen_debug.seeding import client_rng
from fedgen_debug.validation import check_fraction



def glued(sentence: str) -> str:
    """The sentence as the buggy tokenizer reads it: its first two tokens one token."""
    tokens = tokenize(sentence)
    if len(tokens) < 2:
        return sentence
    return " ".join([tokens[0] + GLUE + tokens[1], *tokens[2:]])


@dataclasses.dataclass(frozen=True)
class TokenizationBug:
    fraction: float
    seed: int = 0
    fixed: bool = False
    local: ClassVar[bool] = True

    def __post_init__(self):
        check_fraction(self.fraction)

    def as_fixed(self) -> "TokenizationBug":
        """The same deployment after the fix: tokenization is correct everywhere."""
        return dataclasses.replace(self, fixed=True)

    def affected_sentences(self, client_id: str, num_sentences: int) -> np.ndarray:
        """Ground truth: which of the client's sentences the buggy tokenizer glues (evaluation only)."""
        if self.fixed or self.fraction == 0.0:
            return np.zeros(num_sentences, bool)
        return client_rng(self.seed, client_id, rng_streams.TOKENIZATION).random(num_sentences) < self.fraction

    def device_text(self, client_id: str, sentences: Sequence[str]) -> list[str]:
        """The device's sentences as its tokenizer reads them, bug included."""
        hit = self.affected_sentences(client_id, len(sentences))
        return [glued(s) if glue else s for s, glue in zip(sentences, hit)]

    def tokenize_client(self, client_id: str, sentences: Sequence[str]) -> list[list[str]]:
        """The device's tokenizer output for its sentences, bug included."""
        return [tokenize(s) for s in self.device_text(client_id, sentences)]

    def apply(self, client_data):
        if self.fixed or self.fraction == 0.0:
            return client_data
        return per_device(client_data, lambda cid, arrays: with_text(arrays, self.device_text(cid, text_of(arrays))))

    def affected_devices(self, client_data) -> frozenset[str]:
        return changed_devices(client_data, self.apply(client_data))


def tokenize_client(client_id: str, sentences: Sequence[str], bug: TokenizationBug | None) -> list[list[str]]:
    """The device's tokenization with an optional bug."""
    if bug is None:
        return [tokenize(s) for s in sentences]
    return bug.tokenize_client(client_id, sentences)
