"""Sampled text as a modeler should see it: characters that print as nothing, or as a letter they are not,
written out as their code points.

A char-LM's samples are out-of-vocabulary words, so a pipeline fault that puts a zero-width space, a byte
order mark or a soft hyphen into the text (copied web text, a file read with the wrong encoding) shows up
as words that look empty or ordinary. Letters of another script inside a word (a Cyrillic о among Latin
letters: a keyboard layout, a spoofing filter) look like the word itself. The properties count all of these
(`non_ascii_share`, family characters); the evidence lists, the distinctive terms and the top words must
show them too, or the modeler reads a "yes" next to blank rows. Measured on Tiny Shakespeare with such
faults on half the speakers, 2026-12-07 (docs/analysis.md).
"""

from __future__ import annotations

import collections
import unicodedata

CAPTION = "⟨U+XXXX⟩: a character that prints as nothing (e.g. U+200B, a zero-width space) or as a letter of " \
          "another script inside a word (e.g. U+043E, a Cyrillic о among Latin letters)"


def code_point(character: str) -> str:
    return f"⟨U+{ord(character):04X}⟩"


# Scripts one word mixes by design (Japanese writes 東京タワー): read as one.
_EAST_ASIAN = {"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "HALFWIDTH"}


def _script(character: str) -> str:
    """The first word of a letter's Unicode name: LATIN, CYRILLIC, GREEK, ... ("" without a name)."""
    script = unicodedata.name(character, "").split(" ")[0]
    return "CJK" if script in _EAST_ASIAN else script


def _visible_word(word: str) -> str:
    letters = [c for c in word if c.isalpha()]
    scripts = collections.Counter(_script(c) for c in letters)
    # The word's own script: the most common among its letters; a tie keeps the first letter's.
    own = max(scripts, key=lambda s: (scripts[s], s == _script(letters[0]))) if letters else None
    out = []
    for i, c in enumerate(word):
        invisible = not c.isprintable()                                # Cc, Cf, Zs other than " ", Zl, Zp, Co, Cn
        stray_mark = unicodedata.category(c).startswith("M") and i == 0  # a combining mark with nothing under it
        other_script = c.isalpha() and len(scripts) > 1 and _script(c) != own
        out.append(code_point(c) if invisible or stray_mark or other_script else c)
    return "".join(out)


def visible(text: str, space: str = " ") -> str:
    """`text` with each character a reader cannot see for what it is written as ⟨U+XXXX⟩ (see the module), and
    each plain space as `space` ("␣" where spaces are what a table is about)."""
    return space.join(_visible_word(word) for word in text.split(" "))
