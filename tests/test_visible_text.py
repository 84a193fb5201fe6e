"""`analysis.visible_text`: what the evidence lists, the distinctive terms and the top words print for text whose
characters a reader cannot see for what they are."""

import pytest

from fedgen_debug.analysis.visible_text import visible


@pytest.mark.parametrize("text, expected", [
    ("\u200b", "⟨U+200B⟩"),                      # zero-width space: a blank row otherwise
    ("\ufeffthe", "⟨U+FEFF⟩the"),                # a byte order mark left at the start of a line
    ("com\u00admand", "com⟨U+00AD⟩mand"),        # soft hyphen
    ("ab\u00a0cd", "ab⟨U+00A0⟩cd"),              # no-break space: a space, but not the tokenizer's
    ("a\tb\r", "a⟨U+0009⟩b⟨U+000D⟩"),
    ("\u0301", "⟨U+0301⟩"),                      # a combining accent with nothing under it
    ("l\u043eve", "l⟨U+043E⟩ve"),                # a Cyrillic о among Latin letters
    ("c\u043e\u043el", "c⟨U+043E⟩⟨U+043E⟩l"),
    ("\u0440a", "\u0440⟨U+0061⟩"),               # a tie: the first letter's script is the word's
    ("l\u043e\u0301ve", "l⟨U+043E⟩⟨U+0301⟩ve"),    # an accent on a written-out letter would sit on its ⟩
])
def test_what_prints_as_nothing_or_as_another_letter_is_written_as_its_code_point(text, expected):
    assert visible(text) == expected


@pytest.mark.parametrize("text", ["i have", "naïve café", "Straße", "хорошо", "東京タワー", "ひらがなカタカナ漢字",
                                  "時々", "NHKのニュース", "東京tokyo", "lшve", "don\u02bct", "don't", "a1b2", "", "  ",
                                  "x & y"])
def test_ordinary_text_in_any_script_is_unchanged(text):
    assert visible(text) == text


def test_spaces_are_marked_only_when_asked_and_each_word_is_read_on_its_own():
    assert visible("i have", space="␣") == "i␣have"
    # Each word has its own script: a Russian word next to an English one is no mixed word.
    assert visible("love хорошо l\u043eve", space="␣") == "love␣хорошо␣l⟨U+043E⟩ve"


def test_analyze_lm_prints_the_top_words_written_out():
    from fedgen_debug.cli.lm_cmd import format_report

    words = [{"word": w, "probability": 0.02} for w in ("\u200b", "l\u043eve", "\u0430", "grumio")]
    current = {"kind": "char", "device_reported_oov_rate": 0.1, "device_reported_oov_rate_stddev": 0.01,
               "privacy": {"run": {"epsilon": 5.0, "above_warning": False}}, "top_k": words,
               "space_top_k": [{"word": "i\u00a0have x", "probability": 0.001}], "space_mass": 0.0,
               "top_k_with_space": 0}
    report = {"current": current, "tokenization_bug_suspected": False,
              "evidence": {"test": "space mass", "z": 0.0}}
    lines = format_report(report, "RUN", top_k=4)
    assert [line.split()[0] for line in lines[2:6]] == ["'⟨U+200B⟩'", "'l⟨U+043E⟩ve'", "'⟨U+0430⟩'", "'grumio'"]
    assert len({line.index("e-3") for line in lines[2:6]}) == 1   # the probabilities stay in one column
    # A written-out word longer than the column's 24 characters widens its column; the next still lines up.
    report["current"] = {**current, "top_k": [{"word": "\u200b" * 4, "probability": 0.02}] + words[1:]}
    report["baseline"] = {**current, "top_k": [{"word": "ing", "probability": 0.5}]}
    both = format_report(report, "RUN", top_k=4)
    assert both[1].index("baseline top 4") == both[2].index("'ing'") > len("'⟨U+200B⟩'" * 4)
    assert both[2].endswith("500.00e-3") and len({line.index("e-3") for line in both[2:6]}) == 1
    assert "most probable sampled words with a space: 'i⟨U+00A0⟩have x' 1.00e-3" in lines[6]


def test_a_word_of_look_alike_letters_alone_is_written_out_among_words_of_another_script():
    """A Cyrillic "а" sampled alone looks like the English article; read among English words it is written out,
    and an English "a" among Russian words likewise. A word of the view's own script never is."""
    from fedgen_debug.analysis.visible_text import dominant_script, visible_all

    english = ["the", "king", "grumio"]
    assert visible_all(["\u0430", "\u0430", "a", "\u0441\u043e\u0440"], among=english + ["\u0430"]) == [
        "⟨U+0430⟩", "⟨U+0430⟩", "a", "⟨U+0441⟩⟨U+043E⟩⟨U+0440⟩"]
    assert visible_all(["хорошо"], among=english) == ["хорошо"]   # ш has no Latin twin: plainly Russian
    japanese = ["東京", "大阪", "OK"]
    assert visible_all(["OK", "exo"], among=japanese) == ["OK", "exo"]   # no Latin letter looks like a kana
    russian = ["спасибо", "хорошо", "\u0430"]
    assert visible_all(["\u0430", "a", "с"], among=russian) == ["\u0430", "⟨U+0061⟩", "с"]
    assert dominant_script(english) == "LATIN" and dominant_script(russian) == "CYRILLIC"
    assert dominant_script(["\u200b", "12"]) is None and visible("\u0430") == "\u0430"   # its own view: Cyrillic


def test_a_diagnosis_is_read_in_the_script_of_both_sides_together():
    from fedgen_debug.analysis.visible_text import report_script

    report = {"evidence": {"a": ["grumio", "bear"], "b": ["\u0430", "\u0430"]},
              "distinctive_terms": {"tokens": {"a": [{"term": "grumio"}], "b": [{"term": "\u0430"}]}, "ngrams": None}}
    assert report_script(report) == "LATIN"
    assert report_script({"evidence": {"chart_png": "x.png"}}) is None   # a GAN's report: no text


def test_drawable_writes_out_only_what_the_font_lacks_and_keeps_spaces():
    from fedgen_debug.analysis.visible_text import drawable

    assert drawable("東京 tokyo", lambda c: c.isascii()) == "⟨U+6771⟩⟨U+4EAC⟩ tokyo"
    assert drawable("a b", lambda c: c != " ") == "a b"


def test_the_edges_of_the_script_rules():
    from fedgen_debug.analysis.visible_text import any_written_out, dominant_script, report_script

    # Kana and kanji are one script: a Japanese view is no Latin one, so a Cyrillic а there stays as it is.
    assert dominant_script(["ひらが漢字", "abcd"]) == "CJK" and visible("ひらが漢字 abcd а") == "ひらが漢字 abcd а"
    assert visible("l\u03bfve") == "l⟨U+03BF⟩ve"                                   # a Greek ο among Latin letters
    assert report_script({"evidence": {"a": [], "b": ["хорошо"]}}) == "CYRILLIC"   # side b is read too
    assert any_written_out(["⟨U+200B⟩", "plain"]) and not any_written_out(["plain", "U+200B"])
    # Look-alikes of two other scripts together are as disguised as those of one: "οо" (Greek, Cyrillic) reads "oo".
    assert visible("οо", context="LATIN") == "⟨U+03BF⟩⟨U+043E⟩" and visible("οо") == "ο⟨U+043E⟩"
