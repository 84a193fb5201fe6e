"""Interpretable properties of generated text, one value per sample, and the most distinctive terms of two
sample sets (issue 55, "How they differ").

Samples are strings: a char-LM's generated words, or a word-LM's generated sentences. Tokens are the
whitespace-separated parts. Families (`differences.TEXT_FAMILIES`) and the properties that measure them:
- spacing: `has_space` (yes/no; a char-LM "word" with a space is two tokens glued by the tokenizer's
  fault), `space_share`, `double_space` (yes/no), `space_before_punctuation` (yes/no: "don ' t", "end ."),
  `token_length` (mean characters per token: glued tokens are long, split ones short). A word-LM's samples
  are compared on `token_length` alone (`properties_for`): its phrases are ids joined by spaces. A char-LM's
  sample is one word, so its `characters` and `tokens` repeat `token_length` and `has_space` and are left out.
  A char-LM's words are also read against its run's vocabulary: `glued_words` (yes/no: the word is two of
  the vocabulary's `COMMON_WORDS` most frequent words run together, "ofthe", "problemthe": a pipeline that
  drops spaces; `VOCABULARY_PROPERTIES`, measured only given the vocabulary).
- characters: `digit_share`, `punctuation_share`, `symbol_share` (other non-alphanumeric ASCII), `non_ascii_share`,
  `entities` (yes/no: an HTML entity or its fragment, "&amp;", "&#39;", "quot;"), `mojibake` (yes/no:
  UTF-8 read as Latin-1/cp1252, "Ã©", "â€™", "Â", or the replacement character). Given a char-LM's
  vocabulary also `misspelt_words` (yes/no: the word is one keyboard slip, two adjacent letters swapped or
  one dropped, from one of the vocabulary's `MISSPELT_COMMON_WORDS` most frequent words: "prolem", "teh").
- length: `characters`, `tokens`, `unterminated` (yes/no: a sample of 2+ tokens not ending in . ! ? or a
  closing quote/bracket: a truncated sentence; not measured on a sample the sampler cut at its length cap,
  `cut_by_sampler`: how many reach the cap varies between clean trainings of a word-LM from 3% to 30%,
  and they drowned the truncated sentences, 2026-12-04).
- repetition: `repeated_tokens` (share of tokens that repeat an earlier token of the sample),
  `character_run` (yes/no: a character 3+ times in a row).
- case: `uppercase_share` (of letters), `starts_uppercase` (yes/no, samples starting with a letter).
- vocabulary: `oov_share` (share of tokens out of the model's vocabulary), `oov_first` (yes/no: the first
  token is). A word-LM writes an out-of-vocabulary id as the token `OOV_TOKEN` ("UNK", as `lm_analysis`
  does): whatever a fault does inside a token (glued words, entities, typos, encoding damage) reaches a
  word-LM's samples only as more UNK, at the positions the fault hits (the paper's Table 7: a glued "i
  have" is UNK at position 1). The character properties are measured without the UNK tokens, so an UNK
  is not read as three capitals. A char-LM's samples (the OOV words themselves) hold no UNK.

`distinctive_terms` lists each side's most distinctive tokens and character n-grams by the log-odds ratio
with an informative Dirichlet prior (Monroe, Colaresi & Quinn 2008, "Fightin' Words", §3.5.1), the prior
being the two sides' pooled counts.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Sequence

import numpy as np

from fedgen_debug.analysis.differences import Property

_PUNCTUATION = set(".,;:!?'\"()-")
_SYMBOLS = set(string.punctuation) - _PUNCTUATION
_TERMINAL = (".", "!", "?", "\"", "'", ")", "]", "»", "”", "’")
# Whole entities and the fragments a char-LM generates from them.
_ENTITY = re.compile(r"&(?:[a-z]{2,6}|#x?[0-9a-f]{1,5});?|\b(?:amp|quot|apos|nbsp|lt|gt);|#(?:39|34|x27);", re.I)
# UTF-8 bytes decoded as Latin-1 or cp1252: a lead byte Ã/Â/â followed by a continuation character.
_MOJIBAKE = re.compile("â€|[ÃÂ]|\ufffd")
_RUN = re.compile(r"(.)\1\1")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s[.,;:!?']")
OOV_TOKEN = "UNK"

TEXT_PROPERTIES = (
    Property("has_space", "spacing", "fewer with a space", "more with a space",
             "share of samples holding a space between two non-space characters"),
    Property("space_share", "spacing", "fewer spaces", "more spaces", "share of characters that are spaces"),
    Property("double_space", "spacing", "fewer double spaces", "more double spaces",
             "share of samples with two spaces in a row"),
    Property("space_before_punctuation", "spacing", "less split punctuation", "more split punctuation",
             "share of samples with a space before . , ; : ! ? or '"),
    Property("token_length", "spacing", "shorter tokens (split)", "longer tokens (glued)",
             "mean characters per whitespace-separated token"),
    Property("digit_share", "characters", "fewer digits", "more digits", "share of characters that are digits"),
    Property("punctuation_share", "characters", "less punctuation", "more punctuation",
             "share of characters in . , ; : ! ? ' \" ( ) -"),
    Property("symbol_share", "characters", "fewer symbols", "more symbols",
             "share of characters that are other ASCII symbols (& # % $ / < > ...)"),
    Property("non_ascii_share", "characters", "fewer non-ASCII", "more non-ASCII",
             "share of characters outside ASCII"),
    Property("entities", "characters", "fewer HTML entities", "more HTML entities",
             "share of samples with an HTML entity or its fragment (&amp; &#39; quot;)"),
    Property("mojibake", "characters", "less encoding damage", "more encoding damage",
             "share of samples with UTF-8 read as Latin-1 (Ã© â€™ Â) or the replacement character"),
    Property("characters", "length", "shorter", "longer", "characters per sample"),
    Property("tokens", "length", "fewer tokens", "more tokens", "whitespace-separated tokens per sample"),
    Property("unterminated", "length", "fewer cut off", "more cut off",
             "share of samples of 2+ tokens not ending in . ! ? or a closing quote or bracket (of those the "
             "model ended, not the sampler's length cap)"),
    Property("repeated_tokens", "repetition", "fewer repeats", "more repeats",
             "share of a sample's tokens repeating an earlier token"),
    Property("character_run", "repetition", "fewer character runs", "more character runs",
             "share of samples with a character three times in a row"),
    Property("uppercase_share", "case", "more lower case", "more upper case", "share of letters in upper case"),
    Property("starts_uppercase", "case", "fewer capitalized", "more capitalized",
             "share of samples starting with an upper-case letter (of those starting with a letter)"),
    Property("oov_share", "vocabulary", "fewer out-of-vocabulary tokens", "more out-of-vocabulary tokens",
             f"share of tokens out of the vocabulary ({OOV_TOKEN} in a word-LM's samples)"),
    Property("oov_first", "vocabulary", "fewer start out of vocabulary", "more start out of vocabulary",
             f"share of samples whose first token is out of the vocabulary ({OOV_TOKEN})"),
)


# Measured on a char-LM's words given its run's vocabulary (`text_properties(..., vocabulary=)`). Glued pairs
# are read from the most frequent words only: the frequent words make most of a text's word pairs, and a
# rare word (a synthetic user's made-up name, 2-3 letters) would make half of all OOV words "two words"
# (2026-12-05: 345 of 1,000 clean char-LM words split into two words of the whole vocabulary, 1-3 into two
# of its 300 most frequent).
COMMON_WORDS = 300
# Misspellings are read against more words: a pipeline's typos hit every word, and the 1,000 most frequent
# make most of a text's words (2026-12-05, three typos runs at 50% against 12 clean synthetic char-LMs: 2.6-3.8%
# of samples against 0.8 ± 0.2% with 1,000 words, 1.5-2.7% against 0.4 ± 0.1% with 300). Substituted or
# inserted letters are not counted: a clean char-LM's made-up words are one substitution from a frequent
# word in 6% of samples, and typos added only a point to that.
MISSPELT_COMMON_WORDS = 1000
VOCABULARY_PROPERTIES = (
    Property("glued_words", "spacing", "fewer glued words", "more glued words",
             f"share of samples that are two of the vocabulary's {COMMON_WORDS} most frequent words run together, "
             "without a space (\"ofthe\")"),
    Property("misspelt_words", "characters", "fewer misspelt words", "more misspelt words",
             f"share of samples one slip (two adjacent letters swapped, or one dropped) from one of the "
             f"vocabulary's {MISSPELT_COMMON_WORDS} most frequent words (\"prolem\", \"teh\")"),
)


# A word-LM's phrase is its sampled ids joined by single spaces (`lm_analysis.phrase_text`): where its spaces
# are is the join's doing, not the data's, and "space before punctuation" only says that a punctuation token
# was drawn (a phrase cut short by a truncating pipeline or by the sampler's cap has none: it led the
# truncated word-LMs' reports as "spacing", 2026-12-04). Its spacing is read from `token_length` alone.
JOINED_BY_SPACES = ("has_space", "space_share", "double_space", "space_before_punctuation")


# A char-LM's sample is one out-of-vocabulary word: its characters are `token_length` again (times its
# tokens), and its tokens count its spaces (`has_space`). Measured twice in two families, shorter split
# words were "length" or "spacing" by which copy's noise was smaller (docs/analysis.md).
ONE_WORD_REPEATS = ("characters", "tokens")


def properties_for(kind: str | None) -> tuple[Property, ...]:
    """The properties that describe the samples of an LM of `kind` ("char", "word"; None: any text): a
    word-LM's without those of `JOINED_BY_SPACES`, a char-LM's without those of `ONE_WORD_REPEATS` and with
    `VOCABULARY_PROPERTIES` (its words are out of its vocabulary; a word-LM's are ids of it)."""
    left_out = {"word": JOINED_BY_SPACES, "char": ONE_WORD_REPEATS}.get(kind, ())
    kept = tuple(p for p in TEXT_PROPERTIES if p.name not in left_out)
    return kept + VOCABULARY_PROPERTIES if kind == "char" else kept


def common_words(vocabulary: Sequence[str], count: int = COMMON_WORDS) -> frozenset[str]:
    """The `count` first words of `vocabulary` (most frequent first, as a run releases it) made of letters
    (and apostrophes): punctuation tokens are not words to glue."""
    return frozenset([w for w in vocabulary if w and all(c.isalpha() or c == "'" for c in w)][:count])


def glued_words(samples: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
    """Per sample, 1.0 when it is out of `vocabulary`, holds no space, and is two of its `common_words` run
    together (a char-LM's word "ofthe"); else 0.0."""
    known, common = set(vocabulary), common_words(vocabulary)

    def glued(sample: str) -> bool:
        word = sample.strip().lower()
        return (word not in known and " " not in word
                and any(word[:i] in common and word[i:] in common for i in range(1, len(word))))

    return np.array([float(glued(s)) for s in samples], np.float64)


def slips(word: str) -> set[str]:
    """The words one keyboard slip from `word`: two adjacent letters swapped, or one letter dropped."""
    dropped = {word[:i] + word[i + 1:] for i in range(len(word))}
    swapped = {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
    return (dropped | swapped) - {word}


def misspelt_words(samples: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
    """Per sample, 1.0 when it is out of `vocabulary`, holds no space, and is one slip (`slips`) from one of
    its `MISSPELT_COMMON_WORDS` most frequent words of 3+ letters (a char-LM's word "prolem"); else 0.0."""
    known = set(vocabulary)
    misspelt = set().union(*(slips(w) for w in common_words(vocabulary, MISSPELT_COMMON_WORDS) if len(w) >= 3))
    misspelt -= known

    def is_misspelt(sample: str) -> bool:
        word = sample.strip().lower()
        return " " not in word and word in misspelt

    return np.array([float(is_misspelt(s)) for s in samples], np.float64)


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def cut_by_sampler(samples: Sequence[str], kind: str, max_length: int) -> np.ndarray:
    """Whether each sample of an LM of `kind` ("word", "char") reached the sampler's length cap
    (`max_length`, the run's: words of a phrase, bytes of a char-LM word): the sampler stopped it, not the
    model, so how it ends says nothing about the data. A word-LM's phrase is one whitespace token per id."""
    if kind == "word":
        return np.array([len(s.split()) >= max_length for s in samples], bool)
    return np.array([len(s.encode("utf-8")) > max_length for s in samples], bool)   # it draws max_length + 1 bytes


def _one(raw: str, cut: bool = False) -> dict[str, float]:
    tokens = raw.split()
    oov = [t == OOV_TOKEN for t in tokens]
    sample = " ".join(t for t in tokens if t != OOV_TOKEN) if any(oov) else raw
    length = len(sample)
    letters = [c for c in sample if c.isalpha()]
    stripped = sample.strip()
    first_letter = next((c for c in stripped if not c.isspace()), "")
    return {
        "has_space": float(" " in stripped),
        "space_share": _share(sample.count(" "), length),
        "double_space": float("  " in stripped),
        "space_before_punctuation": float(bool(_SPACE_BEFORE_PUNCTUATION.search(stripped))),
        "token_length": _share(sum(len(t) for t in tokens), len(tokens)) if tokens else math.nan,
        "digit_share": _share(sum(c.isdigit() for c in sample), length),
        "punctuation_share": _share(sum(c in _PUNCTUATION for c in sample), length),
        "symbol_share": _share(sum(c in _SYMBOLS for c in sample), length),
        "non_ascii_share": _share(sum(ord(c) > 127 for c in sample), length),
        "entities": float(bool(_ENTITY.search(sample))),
        "mojibake": float(bool(_MOJIBAKE.search(sample))),
        "characters": float(length),
        "tokens": float(len(tokens)),
        "unterminated": float(not stripped.endswith(_TERMINAL)) if len(tokens) >= 2 and not cut else math.nan,
        "repeated_tokens": _share(len(tokens) - len(set(tokens)), len(tokens)) if tokens else math.nan,
        "character_run": float(bool(_RUN.search(sample))),
        "uppercase_share": _share(sum(c.isupper() for c in letters), len(letters)) if letters else math.nan,
        "starts_uppercase": float(first_letter.isupper()) if first_letter.isalpha() else math.nan,
        "oov_share": _share(sum(oov), len(tokens)) if tokens else math.nan,
        "oov_first": float(oov[0]) if tokens else math.nan,
    }


def text_properties(samples: Sequence[str], cut: Sequence[bool] | None = None,
                    vocabulary: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Every property of `TEXT_PROPERTIES` for each sample: {name: float64 [n]} (nan: not measured, e.g.
    the case of a sample without letters). `cut`: per sample, whether the sampler stopped it at its length
    cap (`cut_by_sampler`); its `unterminated` is then not measured. `vocabulary` (a char-LM run's, most
    frequent first): also `VOCABULARY_PROPERTIES`."""
    if isinstance(samples, str) or not all(isinstance(s, str) for s in samples):
        raise ValueError("samples must be a sequence of strings.")
    cut = [False] * len(samples) if cut is None else list(cut)
    if len(cut) != len(samples):
        raise ValueError(f"cut must hold one flag per sample. Found {len(cut)} for {len(samples)} samples.")
    rows = [_one(s, bool(c)) for s, c in zip(samples, cut)]
    values = {p.name: np.array([r[p.name] for r in rows], np.float64) for p in TEXT_PROPERTIES}
    if vocabulary is not None:
        values["glued_words"] = glued_words(samples, vocabulary)
        values["misspelt_words"] = misspelt_words(samples, vocabulary)
    return values


def _char_ngrams(sample: str, n: int) -> list[str]:
    return [sample[i:i + n] for i in range(len(sample) - n + 1)]


def _log_odds(counts_a: collections.Counter, counts_b: collections.Counter, prior_weight: float, top: int,
              min_count: int) -> dict:
    """Monroe et al.'s z-scored log-odds ratio of each term, B against A, with the pooled counts (times
    `prior_weight`) as the Dirichlet prior."""
    pooled = counts_a + counts_b
    total_a, total_b = sum(counts_a.values()), sum(counts_b.values())
    alpha_total = prior_weight * sum(pooled.values())
    rows = []
    for term, count in pooled.items():
        if count < min_count:
            continue
        alpha = prior_weight * count
        y_a, y_b = counts_a.get(term, 0), counts_b.get(term, 0)
        log_odds_a = math.log((y_a + alpha) / (total_a + alpha_total - y_a - alpha))
        log_odds_b = math.log((y_b + alpha) / (total_b + alpha_total - y_b - alpha))
        z = (log_odds_b - log_odds_a) / math.sqrt(1.0 / (y_a + alpha) + 1.0 / (y_b + alpha))
        rows.append({"term": term, "z": float(z), "count_a": int(y_a), "count_b": int(y_b),
                     "probability_a": _share(y_a, total_a), "probability_b": _share(y_b, total_b)})
    rows.sort(key=lambda r: (-abs(r["z"]), r["term"]))
    return {"a": [r for r in rows if r["z"] < 0][:top], "b": [r for r in rows if r["z"] > 0][:top]}


def distinctive_terms(samples_a: Sequence[str], samples_b: Sequence[str], top: int = 10, ngram: int = 3,
                      prior_weight: float = 1.0, min_count: int = 3) -> dict:
    """Each side's most distinctive tokens and character `ngram`-grams: {"tokens": {"a": [...], "b": [...]},
    "ngrams": {...}}, each row {"term", "z" (> 0: more frequent on side B), "count_a", "count_b",
    "probability_a", "probability_b" (the term's share of its side's tokens or n-grams)}, largest |z| first.
    Terms seen fewer than `min_count` times on both sides together are left out (one-off samples say
    nothing about a side); `prior_weight` scales the pooled-count prior (1: as strong as the data)."""
    if top < 1 or ngram < 1 or prior_weight <= 0 or min_count < 1:
        raise ValueError(f"top, ngram, min_count must be >= 1 and prior_weight > 0. Found {top}, {ngram}, "
                         f"{min_count}, {prior_weight}.")
    tokens_a = collections.Counter(t for s in samples_a for t in s.split())
    tokens_b = collections.Counter(t for s in samples_b for t in s.split())
    ngrams_a = collections.Counter(g for s in samples_a for g in _char_ngrams(s, ngram))
    ngrams_b = collections.Counter(g for s in samples_b for g in _char_ngrams(s, ngram))
    return {"tokens": _log_odds(tokens_a, tokens_b, prior_weight, top, min_count),
            "ngrams": _log_odds(ngrams_a, ngrams_b, prior_weight, top, min_count)}
