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
])
def test_what_prints_as_nothing_or_as_another_letter_is_written_as_its_code_point(text, expected):
    assert visible(text) == expected


@pytest.mark.parametrize("text", ["i have", "naïve café", "Straße", "хорошо", "東京タワー", "ひらがなカタカナ漢字",
                                  "don't", "a1b2", "", "x & y"])
def test_ordinary_text_in_any_script_is_unchanged(text):
    assert visible(text) == text


def test_spaces_are_marked_only_when_asked_and_each_word_is_read_on_its_own():
    assert visible("i have", space="␣") == "i␣have"
    # Each word has its own script: a Russian word next to an English one is no mixed word.
    assert visible("love хорошо l\u043eve", space="␣") == "love␣хорошо␣l⟨U+043E⟩ve"


def test_analyze_lm_prints_the_top_words_written_out():
    from fedgen_debug.cli.lm_cmd import format_report

    words = [{"word": "\u200b", "probability": 0.02}, {"word": "l\u043eve", "probability": 0.01}]
    current = {"kind": "char", "device_reported_oov_rate": 0.1, "device_reported_oov_rate_stddev": 0.01,
               "privacy": {"run": {"epsilon": 5.0, "above_warning": False}}, "top_k": words,
               "space_top_k": [{"word": "i\u00a0have x", "probability": 0.001}], "space_mass": 0.0,
               "top_k_with_space": 0}
    report = {"current": current, "tokenization_bug_suspected": False,
              "evidence": {"test": "space mass", "z": 0.0}}
    lines = format_report(report, "RUN", top_k=2)
    assert lines[2].startswith("'⟨U+200B⟩'") and lines[3].startswith("'l⟨U+043E⟩ve'")
    assert "most probable sampled words with a space: 'i⟨U+00A0⟩have x' 1.00e-3" in lines[4]
