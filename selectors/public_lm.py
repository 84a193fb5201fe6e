"""A public explicit-likelihood model for T6: a word unigram LM with add-k smoothing.

It is trained on public text at the server and shipped to devices, which score their own sentences
with `log_prob_per_token` (the `public_log_prob` output `PublicDensity` reads). Unseen words share
the mass of an open vocabulary of `unseen_words` types, so no sentence gets probability 0.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class UnigramLM:
    counts: dict
    total: int
    k: float = 0.1
    unseen_words: int = 100_000

    @classmethod
    def fit(cls, sentences: Iterable[Sequence[str]], k: float = 0.1, unseen_words: int = 100_000) -> "UnigramLM":
        if k <= 0:
            raise ValueError(f"k must be > 0. Found {k}.")
        counts = collections.Counter()
        for tokens in sentences:
            counts.update(tokens)
        if not counts:
            raise ValueError("the public corpus is empty.")
        return cls(dict(counts), sum(counts.values()), k, unseen_words)

    def log_prob(self, token: str) -> float:
        types = len(self.counts) + self.unseen_words
        return math.log((self.counts.get(token, 0) + self.k) / (self.total + self.k * types))

    def log_prob_per_token(self, tokens: Sequence[str]) -> float:
        """Mean log-probability per token: log of the geometric-mean token probability."""
        if not tokens:
            return 0.0
        return float(np.mean([self.log_prob(t) for t in tokens]))
