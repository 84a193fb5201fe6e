"""The real-text evaluation helpers: Markdown articles to sentences (`evaluation/articles_to_jsonl.py`),
film dialogue to users (`evaluation/dialogs_to_jsonl.py`) and the users' own OOV rankings
(`evaluation/lm_oov_ceiling.py`), on hand-built inputs."""

import collections
import importlib.util
import os

import pytest

from fedgen_debug.data.text import Vocabulary

_EVALUATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_EVALUATION, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def articles():
    return _load("articles_to_jsonl")


@pytest.fixture(scope="module")
def dialogs():
    return _load("dialogs_to_jsonl")


@pytest.fixture(scope="module")
def ceiling():
    return _load("lm_oov_ceiling")


ARTICLE = """+++
path = "2018/07/27/what-is-rust-2018"
title = "What is Rust?"
+++

# A heading is not a sentence

Back in March, [we announced](https://example.org/a) something new. It is
*here* &amp; ready! Use `cargo new` today.

```rust
fn main() { println!("code is not prose"); }
```

    indented code is not prose either

- First item of a list
- Second item
| a | table |
> a quote from elsewhere

<!-- a comment -->
See the [notes][relnotes] for more.

[relnotes]: https://example.org/notes
"""


def test_article_sentences_keeps_prose_only(articles):
    assert articles.article_sentences(ARTICLE) == [
        "Back in March, we announced something new.",
        "It is here & ready!",
        "Use cargo new today.",
        "First item of a list",
        "Second item",
        "See the notes for more.",
    ]


def test_article_date_from_front_matter_then_path(articles):
    assert articles.article_date("posts/x.md", ARTICLE) == "2018-07-27"
    assert articles.article_date("posts/2015-05-11-traits.md", "no date here") == "2015-05-11"
    assert articles.article_date("posts/undated.md", "") == "9999-99-99"


def test_oov_rankings_weight_each_user_once(ceiling):
    vocab = Vocabulary(("the", "a", "."))
    tokens = {
        "writer-of-names": [["angelo", "angelo", "angelo", "the"], ["angelo", "."]],  # 4 OOV tokens, 1 word
        "glued-1": [["i am", "a", "."], ["kate"]],
        "glued-2": [["i am", "the"]],
    }
    counts, weights = ceiling.oov_rankings(tokens, vocab)
    assert counts == {"angelo": 4, "i am": 2, "kate": 1}
    # angelo: all of one user's OOV words; i am: half of one user's, all of another's.
    assert weights == pytest.approx({"angelo": 1 / 3, "i am": (0.5 + 1) / 3, "kate": 0.5 / 3})
    assert ceiling.top(counts, 1) == [("angelo", 4)]
    assert ceiling.top(weights, 1) == [("i am", pytest.approx(0.5))]


MOVIE_LINES = (
    "L3 +++$+++ u0 +++$+++ m0 +++$+++ BIANCA +++$+++ I don't know. Do you?\r\n"
    "L2 +++$+++ u1 +++$+++ m0 +++$+++ CAMERON +++$+++ Hi\r\n"   # one token: no sentence
    "not a line of the corpus\r\n"
    "L1 +++$+++ u0 +++$+++ m0 +++$+++ BIANCA +++$+++ Caf\xe9 au lait!  Thank you so much.\r\n"
    "L9 +++$+++ u7 +++$+++ m1 +++$+++ KAT +++$+++ You set me up.\r\n"
)


def test_movie_lines_become_each_characters_sentences_in_spoken_order(dialogs, tmp_path):
    path = tmp_path / "movie_lines.txt"
    path.write_bytes(MOVIE_LINES.encode("latin-1"))
    lines, skipped = dialogs.read_movie_lines(str(path))
    assert skipped == 1
    assert [(film, line, who) for film, line, who, _ in lines] == [(0, 3, "u0"), (0, 2, "u1"), (0, 1, "u0"), (1, 9, "u7")]
    assert dialogs.characters_sentences(lines, {0}) == {
        "u0": ["Caf\xe9 au lait!", "Thank you so much.", "I don't know.", "Do you?"],  # L1 before L3
        "u1": [],
    }
    assert dialogs.characters_sentences(lines, {1}) == {"u7": ["You set me up."]}


def test_split_sentences_needs_a_capital_after_the_stop_and_two_tokens(articles):
    assert articles.split_sentences("Well, no... I was?  e.g. this stays.  Ok") == [
        "Well, no...", "I was? e.g. this stays."]  # whitespace collapsed; "Ok" is one token


def test_a_models_spaced_words_split_into_pairs_users_typed_and_pairs_it_composed(ceiling):
    counts = collections.Counter({"no ,": 22, "i .": 5, "jake": 9})
    assert ceiling.glued_pairs_typed(["no ,", "dy", "do ,", "i .", "jake", "ho ,"], counts) == {
        "with_space": 4, "typed": [("no ,", 22), ("i .", 5)], "composed": ["do ,", "ho ,"]}


def test_package_descriptions_become_users_with_their_prose_lines_only(tmp_path):
    script = _load("package_text_jsonl")
    site = tmp_path / "site"
    body = "\n".join(["Intro line with four words here", "| a | table | row | here |", "```python code block fence",
                      "short line", "Second prose line of the description"] + [f"Line {i} of more prose" for i in range(4)])
    for name, text in (("pkg_a-1.0", body), ("pkg_b-2.0", "Only one line of prose here")):
        (site / f"{name}.dist-info").mkdir(parents=True)
        (site / f"{name}.dist-info" / "METADATA").write_text(f"Name: {name}\nVersion: 1\n\n{text}\n")
    assert script.package_lines(str(site / "pkg_a-1.0.dist-info" / "METADATA")) == [
        "Intro line with four words here", "Second prose line of the description"] + [
        f"Line {i} of more prose" for i in range(4)]
    import json
    import sys
    out = tmp_path / "out.jsonl"
    argv, sys.argv = sys.argv, ["package_text_jsonl", "--site-packages", str(site), "--out", str(out)]
    try:
        script.main()
    finally:
        sys.argv = argv
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["client_id"] for r in rows} == {"pkg_a"} and len(rows) == 6   # pkg_b has under 5 lines


def test_fault_ceiling_draws_what_a_perfect_lm_would(tmp_path):
    """`evaluation/fault_ceiling.py` on hand-built users: a word-LM's samples are the sentences cut at 20
    tokens with OOV words as UNK; a char-LM's are the OOV words cut at 16 characters; the paper's glued
    tokens reach both."""
    import json

    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device.tokenization import TokenizationBug

    script = _load("fault_ceiling")
    path = tmp_path / "users.jsonl"
    long_sentence = " ".join(["the"] * 25) + " ."
    lines = [{"client_id": "a", "text": "i have a zyxwvutsrqponmlkjih word ."}, {"client_id": "b", "text": long_sentence}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    users = data_spec.load_client_data(f"jsonl:{path}")
    vocabulary = Vocabulary(("the", "i", "have", "a", "word", "."))
    words = script.lm_texts(users, "word", vocabulary)
    assert sorted(words) == sorted(["i have a UNK word .", " ".join(["the"] * 20)])
    assert script.lm_texts(users, "char", vocabulary) == ["zyxwvutsrqponmlk"]
    glued = script.lm_texts(users, "char", vocabulary, TokenizationBug(1.0))
    assert "i have" in glued and "the the" in glued
