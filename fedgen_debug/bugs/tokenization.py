"""The tokenization bug of paper §5: the first two tokens of some sentences are glued into one.

`'Good day to you.'` is tokenized as `['good day', 'to', 'you', '.']` instead of
`['good', 'day', 'to', 'you', '.']`. Each sentence of each device is hit independently with
probability `fraction` (so over all sentences the hit rate is Binomial(n, fraction)); the decision
for a device's k-th sentence depends only on (seed, client id, k), as if each phone ran the buggy
tokenizer itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from fedgen_debug.bugs._validation import check_fraction
from fedgen_debug.seeding import client_rng
from fedgen_debug.data.text import tokenize

_STREAM = 0x70C


@dataclasses.dataclass(frozen=True)
class TokenizationBug:
    fraction: float
    seed: int = 0
    fixed: bool = False

    def __post_init__(self):
        check_fraction(self.fraction)

    def as_fixed(self) -> "TokenizationBug":
        """The same deployment after the fix: tokenization is correct everywhere."""
        return dataclasses.replace(self, fixed=True)

    def affected_sentences(self, client_id: str, num_sentences: int) -> np.ndarray:
        """Ground truth: which of the client's sentences the buggy tokenizer glues (evaluation only)."""
        if self.fixed or self.fraction == 0.0:
            return np.zeros(num_sentences, bool)
        return client_rng(self.seed, client_id, _STREAM).random(num_sentences) < self.fraction

    def tokenize_client(self, client_id: str, sentences: Sequence[str]) -> list[list[str]]:
        """The device's tokenizer output for its sentences, bug included."""
        hit = self.affected_sentences(client_id, len(sentences))
        out = []
        for sentence, glue in zip(sentences, hit):
            tokens = tokenize(sentence)
            if glue and len(tokens) >= 2:
                tokens = [f"{tokens[0]} {tokens[1]}"] + tokens[2:]
            out.append(tokens)
        return out


def tokenize_client(client_id: str, sentences: Sequence[str], bug: TokenizationBug | None) -> list[list[str]]:
    """The device's tokenization with an optional bug."""
    if bug is None:
        return [tokenize(s) for s in sentences]
    return bug.tokenize_client(client_id, sentences)
