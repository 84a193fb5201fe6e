"""The real-text evaluation helpers: Markdown articles to sentences (`evaluation/articles_to_jsonl.py`)
and the users' own OOV rankings (`evaluation/lm_oov_ceiling.py`), on hand-built inputs."""

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
