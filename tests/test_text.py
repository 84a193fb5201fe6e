import collections

import pytest

from fedgen_debug.data.text import Vocabulary, oov_rate, tokenize


@pytest.mark.parametrize("raw, tokens", [
    ("Good day to you.", ["good", "day", "to", "you", "."]),
    ("I don't know, my_var is 3.14!", ["i", "don't", "know", ",", "my_var", "is", "3", ".", "14", "!"]),
    ("C++ (and C#)?", ["c", "+", "+", "(", "and", "c", "#", ")", "?"]),
    ("  ", []),
])
def test_tokenize_lowercases_and_splits_punctuation(raw, tokens):
    assert tokenize(raw) == tokens


def test_tokenize_is_idempotent_on_tokenized_text():
    raw = "Is there a way to use regex in Python? Yes, there's one: re.sub()."
    once = tokenize(raw)
    assert tokenize(" ".join(once)) == once


def test_vocabulary_ids_and_special_tokens():
    counts = collections.Counter({"the": 5, "a": 3, "b": 3, "rare": 1})
    vocab = Vocabulary.from_token_counts(counts, size=3)
    assert vocab.words == ("the", "a", "b")  # ties broken alphabetically
    assert (vocab.pad_id, vocab.oov_id, vocab.bos_id, vocab.eos_id, vocab.num_ids) == (0, 4, 5, 6, 7)
    assert vocab.ids(["the", "rare", "b"]) == [1, 4, 3]
    assert vocab.oov_tokens(["the", "rare", "i have"]) == ["rare", "i have"]
    assert oov_rate([["the", "rare"], ["a", "b", "zzz", "the"]], vocab) == pytest.approx(2 / 6)


def test_vocabulary_rejects_bad_size():
    with pytest.raises(ValueError, match="size must be >= 1. Found 0."):
        Vocabulary.from_token_counts(collections.Counter({"x": 1}), 0)
