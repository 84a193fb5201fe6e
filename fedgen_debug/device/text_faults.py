"""Text pipeline faults a device can have, as `DeviceTransform`s (`device.faults.DeviceFault`): the text
half of issue 55's test bed.

Each is a frozen dataclass `(fraction, seed=0, fixed=False, <settings>)`. A device is hit when its own
draw is below `fraction` (local, nested shares); on a hit device every sentence (`text`, UTF-8 bytes)
goes through the fault. Faults that pick words at random (typos, duplicate_words, missing_spaces) draw
from (seed, device, sentence index): public randomness, each sentence its own stream, so a device's
sentence reads the same whatever else the device holds after it.

The faults, with their settings [defaults] (`NAME:FRACTION,key=value` in `device.catalog.parse_bug`):
- entities: HTML-escaped (`html.escape`): & ' " < > become &amp; &#x27; ...
- mojibake: UTF-8 bytes decoded as `codec`: café → cafÃ© [codec (cp1252)]
- truncate: cut after `length` words (whitespace-separated) or characters [length (5), unit (words)]
- split: words of ≥ min_length letters broken in the middle by a space [min_length (5)]
- typos: per word with probability `rate`: two adjacent letters swapped or one dropped [rate (0.2)]
- strip_punctuation: every character that is neither a word character nor a space removed
- duplicate_words: per word with probability `rate`: the word written twice [rate (0.3)]
- missing_spaces: per space between two words with probability `rate`: removed [rate (0.3)]
- number_format: numbers written in a German locale: 1234.5 → 1.234,5
- strip_accents: accents removed (NFKD, combining marks dropped): café → cafe
- smart_quotes: ' → ’ and "…" → “…” (a word processor's autocorrect)

Case faults (`uppercase`, `lowercase`) are left out on purpose: `data.text.tokenize` lower-cases before
any model (word or char LM) sees a token, so they are invisible to every auxiliary this tool trains.
A fault changes only sentences it applies to (an `entities` fault leaves "Good day." as it is): a hit
device whose sentences hold nothing the fault touches is hit but not affected (`affected_devices`).
"""

from __future__ import annotations

import collections
import dataclasses
import html
import re
import unicodedata
from typing import ClassVar

import numpy as np

from fedgen_debug.device.faults import DeviceFault
from fedgen_debug.device.transform import text_of, with_text
from fedgen_debug import rng_streams
from fedgen_debug.seeding import client_rng
from fedgen_debug.validation import check_in_range, check_one_of

TRUNCATE_UNITS = ("words", "chars")
_LETTERS = re.compile(r"[^\W\d_]+")          # a run of letters (no digits, no underscore)
_WORD = re.compile(r"\w+(?:['’.,]\w+)*")     # a word with its apostrophes ("Jerry's") or a number ("1,234.5")
_NUMBER = re.compile(r"(?<![\d.,])(\d+)(?:\.(\d+))?(?![\d.,]*\d)")


@dataclasses.dataclass(frozen=True)
class TextFault(DeviceFault):
    """A text fault: `transform_sentence(sentence, rng)` rewrites one sentence; `rng` is the sentence's
    own generator (seeded by (seed, device, sentence index)), for faults that draw."""
    modality: ClassVar[str] = "text"

    def transform_sentence(self, sentence: str, rng: np.random.Generator) -> str:
        raise NotImplementedError

    def sentence_rng(self, client_id: str, index: int) -> np.random.Generator:
        return client_rng(self.seed, client_id, self.stream, rng_streams.FAULT_CONTENT, index)

    def device_text(self, client_id: str, sentences: list[str]) -> list[str]:
        """The device's sentences after the faulty pipeline."""
        return [self.transform_sentence(s, self.sentence_rng(client_id, i)) for i, s in enumerate(sentences)]

    def device_arrays(self, client_id: str, arrays) -> collections.OrderedDict:
        return with_text(arrays, self.device_text(client_id, text_of(arrays)))


def _check_rate(rate: float) -> None:
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1]. Found {rate}.")


@dataclasses.dataclass(frozen=True)
class Entities(TextFault):
    name: ClassVar[str] = "entities"

    def transform_sentence(self, sentence, rng):
        return html.escape(sentence, quote=True)


@dataclasses.dataclass(frozen=True)
class Mojibake(TextFault):
    """UTF-8 read as a single-byte code page. Bytes the code page leaves undefined (cp1252's 0x81, 0x8d,
    0x8f, 0x90, 0x9d) become the Latin-1 control character of the same value, as browsers do."""
    codec: str = "cp1252"
    name: ClassVar[str] = "mojibake"

    def __post_init__(self):
        super().__post_init__()
        check_one_of("codec", self.codec, ("cp1252", "latin-1"))

    def transform_sentence(self, sentence, rng):
        decoded = sentence.encode("utf-8").decode(self.codec, errors="surrogateescape")
        return "".join(chr(ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in decoded)


@dataclasses.dataclass(frozen=True)
class Truncate(TextFault):
    """A length limit in the pipeline (a VARCHAR column, a max_len): the sentence cut after `length`
    words (the first `length` whitespace-separated words, whitespace between them kept) or characters."""
    length: int = 5
    unit: str = "words"
    name: ClassVar[str] = "truncate"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("length", self.length, 1, 10_000)
        check_one_of("unit", self.unit, TRUNCATE_UNITS)

    def transform_sentence(self, sentence, rng):
        if self.unit == "chars":
            return sentence[:self.length]
        words = list(re.finditer(r"\S+", sentence))
        return sentence[:words[self.length - 1].end()] if len(words) > self.length else sentence


@dataclasses.dataclass(frozen=True)
class Split(TextFault):
    """A detokenizer that inserts spaces inside words (subword pieces joined with spaces)."""
    min_length: int = 5
    name: ClassVar[str] = "split"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("min_length", self.min_length, 2, 100)

    def transform_sentence(self, sentence, rng):
        def broken(match: re.Match) -> str:
            word = match.group(0)
            half = len(word) // 2
            return f"{word[:half]} {word[half:]}" if len(word) >= self.min_length else word

        return _LETTERS.sub(broken, sentence)


@dataclasses.dataclass(frozen=True)
class Typos(TextFault):
    """Keyboard typos: each word of ≥ 3 letters, with probability `rate`, gets two adjacent letters
    swapped or one letter dropped (even odds), at a uniform position."""
    rate: float = 0.2
    name: ClassVar[str] = "typos"

    def __post_init__(self):
        super().__post_init__()
        _check_rate(self.rate)

    def transform_sentence(self, sentence, rng):
        def typo(match: re.Match) -> str:
            word = match.group(0)
            if len(word) < 3 or rng.random() >= self.rate:
                return word
            if rng.random() < 0.5:
                i = int(rng.integers(len(word) - 1))
                return word[:i] + word[i + 1] + word[i] + word[i + 2:]
            i = int(rng.integers(len(word)))
            return word[:i] + word[i + 1:]

        return _LETTERS.sub(typo, sentence)


@dataclasses.dataclass(frozen=True)
class StripPunctuation(TextFault):
    name: ClassVar[str] = "strip_punctuation"

    def transform_sentence(self, sentence, rng):
        return re.sub(r"[^\w\s]", "", sentence)


@dataclasses.dataclass(frozen=True)
class DuplicateWords(TextFault):
    rate: float = 0.3
    name: ClassVar[str] = "duplicate_words"

    def __post_init__(self):
        super().__post_init__()
        _check_rate(self.rate)

    def transform_sentence(self, sentence, rng):
        return _WORD.sub(lambda m: f"{m.group(0)} {m.group(0)}" if rng.random() < self.rate else m.group(0), sentence)


@dataclasses.dataclass(frozen=True)
class MissingSpaces(TextFault):
    """Words run together: each single space between two word characters removed with probability `rate`."""
    rate: float = 0.3
    name: ClassVar[str] = "missing_spaces"

    def __post_init__(self):
        super().__post_init__()
        _check_rate(self.rate)

    def transform_sentence(self, sentence, rng):
        return re.sub(r"(?<=\w) (?=\w)", lambda m: "" if rng.random() < self.rate else " ", sentence)


@dataclasses.dataclass(frozen=True)
class NumberFormat(TextFault):
    """A locale bug: numbers written as in German, thousands grouped by '.' and the decimal mark ','.
    Numbers already holding ',' or several '.' are left alone; integers below 1000 do not change."""
    name: ClassVar[str] = "number_format"

    def transform_sentence(self, sentence, rng):
        def german(match: re.Match) -> str:
            whole, decimals = match.group(1), match.group(2)
            grouped = f"{int(whole):,}".replace(",", ".") if len(whole) < 16 else whole
            return grouped + (f",{decimals}" if decimals is not None else "")

        return _NUMBER.sub(german, sentence)


@dataclasses.dataclass(frozen=True)
class StripAccents(TextFault):
    name: ClassVar[str] = "strip_accents"

    def transform_sentence(self, sentence, rng):
        return "".join(c for c in unicodedata.normalize("NFKD", sentence) if not unicodedata.combining(c))


@dataclasses.dataclass(frozen=True)
class SmartQuotes(TextFault):
    """Autocorrect's typographic quotes: every ' becomes ’; straight double quotes alternate “ and ”."""
    name: ClassVar[str] = "smart_quotes"

    def transform_sentence(self, sentence, rng):
        parts = sentence.replace("'", "\u2019").split('"')
        return "".join(part + ("\u201c" if i % 2 == 0 else "\u201d") for i, part in enumerate(parts[:-1])) + parts[-1]


TEXT_FAULTS = {cls.name: cls for cls in (Entities, Mojibake, Truncate, Split, Typos, StripPunctuation, DuplicateWords,
                                         MissingSpaces, NumberFormat, StripAccents, SmartQuotes)}
