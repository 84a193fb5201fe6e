"""A public explicit-likelihood model for T6: a word unigram LM with a character-trigram backoff.

It is trained on public text at the server and shipped to devices, which score their own sentences
with `log_prob_per_token` (the `public_log_prob` output `PublicDensity` reads). A word seen in public
text has probability λ·count/total + (1 − λ)·p_char(word); an unseen word only the character part,
so unseen words that *look like* public words (typos, identifiers made of public words) score higher
than words whose spelling public text never shows (a new topic's jargon). No probability is 0.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np

from fedgen_debug.validation import check_in_range, check_positive

_BOW, _EOW = "\x02", "\x03"


@dataclasses.dataclass(frozen=True)
class PublicWordLM:
    word_counts: dict
    total: int
    trigrams: dict
    bigrams: dict
    alphabet_size: int
    word_weight: float = 0.95
    char_smoothing: float = 0.01

    @classmethod
    def fit(cls, sentences: Iterable[Sequence[str]], word_weight: float = 0.95,
            char_smoothing: float = 0.01) -> "PublicWordLM":
        check_in_range("word_weight", word_weight, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        check_positive("char_smoothing", char_smoothing)
        counts = collections.Counter()
        for tokens in sentences:
            counts.update(tokens)
        if not counts:
            raise ValueError("the public corpus is empty.")
        trigrams, bigrams, alphabet = collections.Counter(), collections.Counter(), set()
        for word in counts:  # over word types, so the character model describes spellings
            chars = _BOW * 2 + word + _EOW
            alphabet.update(chars)
            for i in range(2, len(chars)):
                trigrams[chars[i - 2:i + 1]] += 1
                bigrams[chars[i - 2:i]] += 1
        # Room for characters public text never used (digits, accents, ...).
        return cls(dict(counts), sum(counts.values()), dict(trigrams), dict(bigrams), len(alphabet) + 64,
                   word_weight, char_smoothing)

    def char_log_prob(self, word: str) -> float:
        chars = _BOW * 2 + word + _EOW
        k = self.char_smoothing
        return sum(
            math.log((self.trigrams.get(chars[i - 2:i + 1], 0) + k) / (self.bigrams.get(chars[i - 2:i], 0) + k * self.alphabet_size))
            for i in range(2, len(chars))
        )

    def log_prob(self, word: str) -> float:
        p_word = self.word_counts.get(word, 0) / self.total
        return math.log(self.word_weight * p_word + (1 - self.word_weight) * math.exp(self.char_log_prob(word)))

    def log_prob_per_token(self, tokens: Sequence[str]) -> float:
        """Mean log-probability per token: log of the geometric-mean token probability."""
        if not tokens:
            return 0.0
        return float(np.mean([self.log_prob(t) for t in tokens]))
