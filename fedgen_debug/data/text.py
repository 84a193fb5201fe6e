"""Tokenizer and vocabulary in the manner of TFF's Stack Overflow preprocessing.

TFF's Stack Overflow `tokens` are lower-cased with punctuation split off into separate tokens and
joined by single spaces; the word-prediction baseline splits them on whitespace and maps them into a
top-K vocabulary with pad/bos/eos/oov ids. `tokenize` reproduces that for raw text, and is
idempotent on text that is already tokenized (so TFF's own `tokens` pass through unchanged).

Vocabulary ids: 0 = pad, 1..K = the K most frequent words, K+1 = oov, K+2 = bos, K+3 = eos.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterable, Sequence

PAD = "<pad>"
OOV = "<oov>"
BOS = "<bos>"
EOS = "<eos>"

# A word is a run of letters/digits/underscores (identifiers such as `my_var` stay whole), optionally
# with one apostrophe part ("don't"); every other non-space character is a token of its own.
# GLUE between two tokens makes them one token with a space inside ('good' GLUE 'day' -> 'good day'): how
# a device's buggy tokenizer is written down as text (`device.tokenization`). A private-use character,
# so real text does not hold it.
GLUE = "\ue000"
_ONE_TOKEN = r"\w+(?:['’]\w+)?|[^\w\s\ue000]"
_TOKEN_RE = re.compile(rf"(?:{_ONE_TOKEN})(?:\ue000(?:{_ONE_TOKEN}))*", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cases and splits `text` into word and punctuation tokens."""
    return [t.replace(GLUE, " ") for t in _TOKEN_RE.findall(text.lower())]


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """A top-K word vocabulary. `words` are ordered by decreasing frequency."""

    words: tuple[str, ...]

    def __post_init__(self):
        if not self.words:
            raise ValueError("A vocabulary needs at least one word. Found 0.")
        if len(set(self.words)) != len(self.words):
            raise ValueError("Vocabulary words must be unique.")
        object.__setattr__(self, "_index", {w: i + 1 for i, w in enumerate(self.words)})

    @classmethod
    def from_token_counts(cls, counts: collections.Counter, size: int) -> "Vocabulary":
        if size < 1:
            raise ValueError(f"size must be >= 1. Found {size}.")
        # Ties are broken alphabetically so that the vocabulary is deterministic.
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls(tuple(w for w, _ in ranked[:size]))

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str]], size: int) -> "Vocabulary":
        counts = collections.Counter()
        for tokens in sentences:
            counts.update(tokens)
        return cls.from_token_counts(counts, size)

    @property
    def size(self) -> int:
        return len(self.words)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def oov_id(self) -> int:
        return self.size + 1

    @property
    def bos_id(self) -> int:
        return self.size + 2

    @property
    def eos_id(self) -> int:
        return self.size + 3

    @property
    def num_ids(self) -> int:
        """Size of the id space, special tokens included."""
        return self.size + 4

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def ids(self, tokens: Sequence[str]) -> list[int]:
        oov = self.oov_id
        return [self._index.get(t, oov) for t in tokens]

    def oov_tokens(self, tokens: Sequence[str]) -> list[str]:
        """The tokens of one sentence that fall outside the vocabulary, in order."""
        return [t for t in tokens if t not in self._index]


def oov_rate(sentences: Iterable[Sequence[str]], vocab: Vocabulary) -> float:
    """Fraction of tokens outside `vocab` (the device-reported metric of paper Table 6)."""
    total = oov = 0
    for tokens in sentences:
        total += len(tokens)
        oov += len(vocab.oov_tokens(tokens))
    return oov / total if total else 0.0
