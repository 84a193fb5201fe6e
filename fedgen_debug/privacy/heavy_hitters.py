"""DP heavy hitters: a vocabulary from private text that no single user can put a word into.

Gaussian thresholding (the partition selection of Google's DP libraries; Gopi et al. 2020): each user
contributes its k most frequent distinct words with weight 1/√k each (L2 norm ≤ 1); the server sums
the contributions over the union of words, adds N(0, σ²) to every word's count through the seeded
tf-privacy query, and releases the words whose noised count exceeds τ (the K largest of them).

Privacy under replace-one: on the words both neighbouring datasets hold, the noised counts are a
Gaussian mechanism with L2 sensitivity √2 (two nonnegative vectors of norm ≤ 1); this is the record's
`GaussianDpEvent`. A word only the replaced user holds has count 1/√k and is released with
probability Φ̄((τ − 1/√k)/σ); with at most k such words on each side, τ is set so that
2k·Φ̄((τ − 1/√k)/σ) = `threshold_delta`, the record's `extra_delta`, which the ledger adds to δ.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping

import numpy as np

from fedgen_debug.privacy.accounting import ACCOUNTINGS, REPLACE_ONE
from fedgen_debug.privacy.aggregates import noised_sum
from fedgen_debug.privacy.ledger import PrivacyRecord
from fedgen_debug.privacy.seeded_queries import SeededGaussianSumQuery
from fedgen_debug.validation import check_at_least, check_in_range, check_one_of, check_positive


@dataclasses.dataclass(frozen=True)
class HeavyHittersConfig:
    size: int                          # K: at most this many words are released
    max_words_per_user: int = 16       # k
    noise_multiplier: float = 2.0      # σ, in units of a user's L2 contribution (1)
    threshold_delta: float = 1e-6
    accounting: str = REPLACE_ONE

    def __post_init__(self):
        check_at_least("size", self.size, 1)
        check_at_least("max_words_per_user", self.max_words_per_user, 1)
        check_positive("noise_multiplier", self.noise_multiplier)
        check_in_range("threshold_delta", self.threshold_delta, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        check_one_of("accounting", self.accounting, ACCOUNTINGS)

    @property
    def sensitivity(self) -> float:
        return math.sqrt(2.0) if self.accounting != "add-remove" else 1.0

    @property
    def threshold(self) -> float:
        """τ in count units: a word needs about τ·√k users to pass it."""
        k = self.max_words_per_user
        sides = 2 if self.accounting != "add-remove" else 1
        tail = statistics.NormalDist().inv_cdf(1.0 - self.threshold_delta / (sides * k))
        return 1.0 / math.sqrt(k) + self.noise_multiplier * tail

    def round_event(self):
        return SeededGaussianSumQuery(1.0, self.noise_multiplier, (0, 0), self.sensitivity).round_event


def user_top_words(tokens: Iterable[str], k: int) -> list[str]:
    """A user's k most frequent distinct words (ties alphabetical): computed on the device."""
    counts = collections.Counter(tokens)
    return [w for w, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:k]]


def heavy_hitters_record(config: HeavyHittersConfig, population: str, population_size: int, release_id: str,
                         source: str = "") -> PrivacyRecord:
    return PrivacyRecord(population, population_size, config.accounting, (config.round_event(),),
                         "DP vocabulary (heavy hitters)", release_id, extra_delta=config.threshold_delta, source=source)


def dp_heavy_hitters(user_words: Mapping[str, list[str]], config: HeavyHittersConfig, noise_seed) -> list[str]:
    """The released words, by noised count (descending). `user_words[client]` are the ≤ k words its
    device contributes (`user_top_words`). Charge `heavy_hitters_record(...)` first."""
    if not user_words:
        raise ValueError("no users to build a vocabulary from.")
    union = sorted({w for words in user_words.values() for w in words})
    index = {w: i for i, w in enumerate(union)}
    weight = 1.0 / math.sqrt(config.max_words_per_user)
    records = np.zeros((len(user_words), len(union)), np.float32)
    for row, words in enumerate(user_words.values()):
        if len(set(words)) != len(words) or len(words) > config.max_words_per_user:
            raise ValueError(f"each user contributes at most {config.max_words_per_user} distinct words.")
        records[row, [index[w] for w in words]] = weight
    counts, _ = noised_sum(records, 1.0, config.noise_multiplier, config.sensitivity, noise_seed)
    passed = np.flatnonzero(counts > config.threshold)
    order = passed[np.argsort(-counts[passed], kind="stable")][:config.size]
    return [union[i] for i in order]
