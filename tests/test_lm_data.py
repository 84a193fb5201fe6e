"""The LM scenario's vocabulary sources: the modeler's vocabulary file (the DP one and its warning are
attacked in tests/test_attacks.py)."""

import logging
import os

import pytest

from fedgen_debug.runs import store
from fedgen_debug.device import lm_data
from fedgen_debug.training.lm_run import LMRun, load_lm
from fedgen_debug.experiments.lm import train_lm

DATA = "synthetic-text:users=40,seed=6"


def _write(tmp_path, text):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    return f"file:{path}"


def test_a_vocabulary_file_gives_its_first_words_in_order(tmp_path):
    source = _write(tmp_path, "the\ni\n\nhave\nregex\n")
    assert lm_data.file_vocabulary(source, 10).words == ("the", "i", "have", "regex")
    assert lm_data.file_vocabulary(source, 2).words == ("the", "i")
    lm_data.check_vocabulary_source(source, DATA)  # accepted


def test_a_named_vocabulary_is_the_file_or_public_one_and_never_the_dp_one(tmp_path):
    source = _write(tmp_path, "the\ni\nhave\n")
    assert lm_data.named_vocabulary(source, 2) == lm_data.file_vocabulary(source, 2)
    public = "public:synthetic-text:users=20,seed=1006"
    assert lm_data.named_vocabulary(public, 50) == lm_data.public_vocabulary(public, 50)
    with pytest.raises(ValueError, match=r"vocabulary must be 'file:PATH' or 'public:DATA_SPEC' here. Found 'dp'."):
        lm_data.named_vocabulary(lm_data.DP_VOCABULARY, 10)


@pytest.mark.parametrize("name, content", [
    ("vocab.txt", "\ufeffthe\ni\nhave\nregex\n"),                         # a byte-order mark (Windows editors)
    ("vocab.txt", "the\t812\ni\t640\r\nhave 77\nregex 3\n"),             # word counts, tabs or spaces, CRLF
    ("vocab.txt", "<unk>\t0\n<s>\t0\nthe\t-2.9\ni\t-3.5\nhave\t-4.1\nregex\t-9.0\n"),  # scores, reserved ids
    ("vocab.txt", "[PAD]\n[UNK]\n[unused0]\nthe\ni\nhave\nregex\n"),    # a BERT-style file's reserved entries
    ("vocab.json", '{"[UNK]": 0, "have": 3, "the": 1, "regex": 4, "i": 2}'),  # word -> id, as Keras' word_index
    ("vocab.json", '["the", "i", "have", "regex"]'),
    # word -> count, largest first (was read as ids: the rarest words first), and with repeated counts
    ("vocab.json", '{"the": 6285, "i": 5000, "have": 77, "regex": 3}'),
    ("vocab.json", '{"the": 6285, "i": 5000, "have": 1, "regex": 1}'),
    ("vocab.csv", "word,count\nthe,6285\ni,5000\nhave,77\nregex,3\n"),   # a spreadsheet's export (was 'the,6285')
    ("vocab.txt", "the,6285\r\ni,5000\r\nhave,77\r\nregex,3\r\n"),
])
def test_vocabulary_files_as_tokenizers_write_them_give_the_same_words(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8"))
    assert lm_data.file_vocabulary(f"file:{path}", 10).words == ("the", "i", "have", "regex")


def test_a_cased_vocabulary_is_lower_cased_each_word_where_its_most_frequent_casing_stands(tmp_path, caplog):
    # A cased tokenizer lists "The" and "the" apart; the tool lower-cases text before it tokenizes, so they are
    # one word, ranked where the first of them stands, and the rest move up.
    caplog.set_level(logging.INFO, logger="fedgen_debug.device.lm_data")
    path = tmp_path / "vocab.txt"
    path.write_text("The 900\nI 700\nthe 600\nHave 50\nREGEX 9\nhave 3\n", encoding="utf-8")
    assert lm_data.file_vocabulary(f"file:{path}", 10).words == ("the", "i", "have", "regex")
    assert lm_data.file_vocabulary(f"file:{path}", 3).words == ("the", "i", "have")
    assert "2 cased entries merged" in caplog.text


@pytest.mark.parametrize("name, content, message", [
    ("vocab.json", '{"the": "first"}', r"vocab.json: a JSON vocabulary is a list of words or an object from word to id."),
    ("vocab.json", '["the", ', r"vocab.json: not JSON"),
    ("vocab.txt", b"the\n\xff\xfe\n", r"vocab.txt: not UTF-8 text"),
    # Most entries are no token the devices' tokenizer makes: a format the tool does not read, never a word.
    ("vocab.txt", "the;6285\ni;5000\nhave;77\n", r"vocab.txt: 3 of its 3 words are not one token to the devices' "
                                                   r"tokenizer \(e.g. 'the;6285' is \['the', ';', '6285'\]\)"),
])
def test_a_vocabulary_file_in_no_format_the_tool_reads_is_a_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ValueError, match=message):
        lm_data.file_vocabulary(f"file:{path}", 10)


@pytest.mark.parametrize("text, message", [
    ("the\ni have\n", r"vocab.txt:2: a vocabulary word is one token, without spaces. Found 'i have'."),
    ("the 10\ni have 5\n", r"vocab.txt:2: a vocabulary word is one token, without spaces. Found 'i have'."),
    ("the\na\nthe\n", r"vocab.txt:3: 'the' is listed twice \(first on line 1; is line 1 a header\?\)."),
    ("a\nword\nthe\nword\n", r"vocab.txt:4: 'word' is listed twice \(first on line 2\)."),
    ("\n\n", r"vocab.txt: the vocabulary file holds no word."),
])
def test_a_bad_vocabulary_file_is_a_clear_error_naming_the_line(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        lm_data.file_vocabulary(_write(tmp_path, text), 10)


@pytest.mark.parametrize("text, message", [(None, r"vocabulary file: no such file '.*vocab.txt'."),
                                           ("the\nthe\n", r"vocab.txt:2: 'the' is listed twice")])
def test_a_missing_or_bad_vocabulary_file_is_refused_before_anything_is_charged(tmp_path, text, message):
    source = _write(tmp_path, text) if text is not None else f"file:{tmp_path / 'vocab.txt'}"
    run_dir = str(tmp_path / "r")
    with pytest.raises(ValueError, match=message):
        train_lm(LMRun("char", DATA, 0.0, "test", rounds=1, vocab=source), run_dir)
    assert not os.path.exists(store.released(run_dir, store.PRIVACY))
    with pytest.raises(ValueError, match=r"vocabulary must be 'dp', 'file:PATH' or 'public:DATA_SPEC'"):
        LMRun("char", DATA, vocab="top10k")


def test_a_run_releases_the_files_vocabulary_without_the_small_vocabulary_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="fedgen_debug.experiments.lm")
    source = _write(tmp_path, "the\ni\nyou\nto\n")
    run_dir = str(tmp_path / "file")
    train_lm(LMRun("word", DATA, 0.0, "test", rounds=1, vocab_size=3, vocab=source), run_dir)
    assert store.read_json(store.released(run_dir, store.VOCAB)) == {"words": ["the", "i", "you"], "source": source}
    # The run holds its copy: it loads, and resumes, without the file.
    os.remove(source[len("file:"):])
    assert load_lm(run_dir)[1].words == ("the", "i", "you")
    train_lm(LMRun("word", DATA, 0.0, "test", rounds=1, vocab_size=3, vocab=source), run_dir)
    assert "holds only" not in caplog.text  # the warning is about DP vocabularies (tests/test_attacks.py)


def test_an_empty_dp_vocabulary_is_a_clear_error_pointing_to_spaces_and_a_vocabulary_file():
    # Text written without spaces is one "word" a sentence: no word is shared by enough users to pass the
    # heavy hitters' threshold, and the run must say why rather than "A vocabulary needs at least one word".
    import collections
    import numpy as np
    import tensorflow as tf
    from fedgen_debug.data.client_data import ArrayClientData

    sentences = {f"u{i}": [f"我们{i}的{j}是不了在有人这" for j in range(3)] for i in range(30)}
    data = ArrayClientData({cid: collections.OrderedDict(text=np.array([s.encode() for s in ss], dtype=object))
                            for cid, ss in sentences.items()})
    config = lm_data.heavy_hitters_config(100, 30)
    with pytest.raises(ValueError, match=r"the DP vocabulary came out empty: .* of the 30 users .* written "
                                         r"without spaces .* --vocab file:PATH"):
        lm_data.dp_vocabulary(data, config, tf.constant([1, 2], tf.int64))


def test_a_missing_relative_vocabulary_path_says_where_it_was_looked_for(tmp_path, monkeypatch):
    # A monitor plan's `vocab = "file:vocab.txt"` is read from where the command runs, not from the plan's folder.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"no such file 'vocab.txt' \(relative paths are read from {tmp_path}\)."):
        lm_data.file_vocabulary("file:vocab.txt", 10)
