"""Sampled text as a modeler should see it: characters that print as nothing, or as a letter they are not,
written out as their code points.

A char-LM's samples are out-of-vocabulary words, so a pipeline fault that puts a zero-width space, a byte
order mark or a soft hyphen into the text (copied web text, a file read with the wrong encoding) shows up
as words that look empty or ordinary. Letters of another script inside a word (a Cyrillic о among Latin
letters: a keyboard layout, a spoofing filter) look like the word itself, and so does a word of such letters
alone ("а") among Latin ones. The properties count all of these
(`non_ascii_share`, family characters); the evidence lists, the distinctive terms and the top words must
show them too, or the modeler reads a "yes" next to blank rows. Measured on Tiny Shakespeare with such
faults on half the speakers, 2026-12-07 (docs/analysis.md).
"""

from __future__ import annotations

import collections
import unicodedata

CAPTION = "⟨U+XXXX⟩: a character that prints as nothing (e.g. U+200B, a zero-width space) or as a letter of " \
          "another script it looks like (e.g. U+043E, a Cyrillic о among Latin letters)"


def code_point(character: str) -> str:
    return f"⟨U+{ord(character):04X}⟩"


def any_written_out(shown) -> bool:
    """Whether any of these texts, as `visible` wrote them, holds a code point (the view then shows `CAPTION`)."""
    return any("⟨U+" in text for text in shown)


# Scripts one word mixes by design (Japanese writes 東京タワー, 時々): read as one.
_EAST_ASIAN = {"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "HALFWIDTH", "IDEOGRAPHIC", "BOPOMOFO"}


def _script(character: str) -> str:
    """The first word of a letter's Unicode name: LATIN, CYRILLIC, GREEK, ... ("" without a name)."""
    script = unicodedata.name(character, "").split(" ")[0]
    return "CJK" if script in _EAST_ASIAN else script


# The letters of other scripts that print as a letter of this one (the common pairs of Unicode's confusables).
# Only these are written out: a Latin acronym inside Japanese (NHKのニュース) or a Cyrillic ш is plainly what it is.
TWINS = {
    "LATIN": frozenset("аеорсухіјѕһԁԛԝАВЕКМНОРСТУХІЈЅ" "οΑΒΕΖΗΙΚΜΝΟΡΤΥΧ"),   # Cyrillic, Greek
    "CYRILLIC": frozenset("aeopcyxijshABEKMHOPCTYXIJS" "οΑΒΕΚΜΗΟΡΤΥΧ"),      # Latin, Greek
    "GREEK": frozenset("oABEZHIKMNOPTYX" "оАВЕКМНОРТХ"),                   # Latin, Cyrillic
}


def dominant_script(texts) -> str | None:
    """The script of most letters among `texts` (the view they are shown in), None without letters."""
    scripts = collections.Counter(_script(c) for text in texts for c in text if c.isalpha())
    return scripts.most_common(1)[0][0] if scripts else None


def _visible_word(word: str, context: str | None) -> str:
    letters = [c for c in word if c.isalpha()]
    scripts = collections.Counter(_script(c) for c in letters)
    # The word's own script: the most common among its letters; a tie keeps the first letter's.
    own = max(scripts, key=lambda s: (scripts[s], s == _script(letters[0]))) if letters else None
    # A word every letter of which is a twin of a letter of the text around it (so none is of its script): "а"
    # (Cyrillic) among English words, or Greek ο with Cyrillic о ("οо" reads "oo"). Russian "хорошо" among English
    # words is not (ш has no Latin twin).
    twins_of_view = TWINS.get(context, frozenset())
    disguised = all(c in twins_of_view for c in letters)
    twins_of_word = TWINS.get(own, frozenset())
    out, previous_written = [], False
    for i, c in enumerate(word):
        invisible = not c.isprintable()                                # Cc, Cf, Zs other than " ", Zl, Zp, Co, Cn
        # A combining mark with nothing under it, or under a character written out (it would sit on the ⟩).
        stray_mark = unicodedata.category(c).startswith("M") and (i == 0 or previous_written)
        look_alike = c.isalpha() and (disguised or _script(c) != own and c in twins_of_word)
        previous_written = invisible or stray_mark or look_alike
        out.append(code_point(c) if previous_written else c)
    return "".join(out)


def visible(text: str, space: str = " ", context: str | None = None) -> str:
    """`text` with each character a reader cannot see for what it is written as ⟨U+XXXX⟩ (see the module), and
    each plain space as `space` ("␣" where spaces are what a table is about). `context`: the script of the
    view the text is shown in (`dominant_script` of all its texts; None: the text's own)."""
    context = dominant_script([text]) if context is None else context
    return space.join(_visible_word(word, context) for word in text.split(" "))


def visible_all(texts, space: str = " ", among=None) -> list[str]:
    """`visible` for each of `texts`, read in the script of `among` (all the texts of the view; default `texts`)."""
    texts = list(texts)
    context = dominant_script(texts if among is None else list(among))
    return [visible(text, space, context) for text in texts]


def drawable(text: str, has_glyph) -> str:
    """`text` (as `visible` wrote it) with each character `has_glyph` says the chart's fonts lack written out too: a
    chart draws it as an empty box, so two different sampled words (東京, 大阪) would look alike."""
    return "".join(c if c == " " or has_glyph(c) else code_point(c) for c in text)


def report_script(report: dict) -> str | None:
    """The script of a text diagnosis's view: of both sides' evidence lists and distinctive terms together (a side
    whose samples are all "а" is read among the other side's English words)."""
    texts = [t for side in ("a", "b") for t in report.get("evidence", {}).get(side, [])]
    for rows in (report.get("distinctive_terms") or {}).values():
        texts += [row["term"] for side in ("a", "b") for row in (rows or {}).get(side, [])]
    return dominant_script(texts)
