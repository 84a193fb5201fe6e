"""Real articles as users: a folder of Markdown articles becomes the text `.jsonl` contract (one article =
one user, one sentence a line) and a production vocabulary, for
`lm_tokenization_bug.py --data jsonl:OUT/private.jsonl --vocab file:OUT/vocab.txt`:

  .venv/bin/python evaluation/articles_to_jsonl.py DIR --out runs/articles

The articles are ordered by the date in their path or front matter (`2018/07/27/...`), then by name.
The older half is the public text the production vocabulary (the `--size` most frequent tokens, as the
devices tokenize them) was built from, before the bug; the newer half are the users. This is the
issue's "one article = one user" on text the scenario's stand-in never saw, e.g. a blog's posts.

Only prose is kept: front matter, fenced and indented code, tables, headings, HTML tags, link
targets and link definitions are dropped, HTML entities decoded (a device's keyboard sees sentences, not markup). Paragraphs are split into
sentences after `.`, `!` or `?` followed by a space and a capital letter, digit or quote.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re

from fedgen_debug.data.text import Vocabulary, tokenize

_DATE = re.compile(r"(\d{4})[/-](\d{2})[/-](\d{2})")
_FRONT_MATTER = re.compile(r"\A(\+\+\+|---)\n.*?\n\1\n", re.S)
_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1\s*$", re.S | re.M)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\s*(\([^)]*\)|\[[^\]]*\])")
_TAG = re.compile(r"<[^>\n]+>")
_URL = re.compile(r"https?://\S+")
_LINK_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(])")


def article_sentences(markdown: str) -> list[str]:
    """The prose sentences of one Markdown article."""
    text = _FRONT_MATTER.sub("", markdown.replace("\r\n", "\n"))
    text = _HTML_COMMENT.sub("", _FENCE.sub("", text))
    paragraphs, current = [], []
    for line in text.split("\n"):
        is_code = line.startswith(("    ", "\t"))
        bullet = _BULLET.match(line)
        if (not line.strip() or is_code or line.lstrip().startswith(("#", "|", ">"))
                or _LINK_DEFINITION.match(line) or bullet):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            if bullet:  # each list item is a paragraph of its own
                paragraphs.append(line[bullet.end():])
            continue
        current.append(line.strip())
    if current:
        paragraphs.append(" ".join(current))
    sentences = []
    for paragraph in paragraphs:
        paragraph = _URL.sub("", html.unescape(_TAG.sub("", _LINK.sub(r"\1", _IMAGE.sub("", paragraph)))))
        paragraph = paragraph.replace("`", "").replace("*", "").replace("__", "")
        sentences.extend(split_sentences(paragraph))
    return sentences


def split_sentences(text: str) -> list[str]:
    """`text`'s sentences: split after `.`, `!` or `?` followed by a space and a capital letter, digit or
    quote; sentences of fewer than two tokens are left out (the bug glues a sentence's first two)."""
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if len(tokenize(s)) >= 2]


def write_corpus(out_dir: str, vocab: Vocabulary, users: dict[str, list[str]]) -> None:
    """`out_dir/vocab.txt` (one word a line, most frequent first) and `out_dir/private.jsonl` (the text
    contract: one sentence a line, users in `users`' order)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab.words) + "\n")
    with open(os.path.join(out_dir, "private.jsonl"), "w", encoding="utf-8") as f:
        for user, sentences in users.items():
            for sentence in sentences:
                f.write(json.dumps({"client_id": user, "text": sentence}) + "\n")


def article_date(path: str, markdown: str) -> str:
    match = _DATE.search(markdown[:600]) or _DATE.search(path)
    return "-".join(match.groups()) if match else "9999-99-99"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder of Markdown articles (searched recursively)")
    parser.add_argument("--size", type=int, default=10_000, help="vocabulary size")
    parser.add_argument("--min-sentences", type=int, default=5, help="articles with fewer are left out")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    articles = []
    for root, _, names in os.walk(args.folder):
        for name in names:
            if name.endswith(".md") and not name.startswith("_"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    markdown = f.read()
                sentences = article_sentences(markdown)
                if len(sentences) >= args.min_sentences:
                    rel = os.path.relpath(path, args.folder)
                    articles.append((article_date(rel, markdown), rel, sentences))
    if len(articles) < 2:
        parser.error(f"{args.folder}: found {len(articles)} articles with >= {args.min_sentences} sentences; need 2")
    articles.sort()
    public, private = articles[: len(articles) // 2], articles[len(articles) // 2:]
    vocab = Vocabulary.from_sentences((tokenize(s) for _, _, sentences in public for s in sentences), args.size)
    write_corpus(args.out, vocab, {rel: sentences for _, rel, sentences in private})
    print(f"{len(public)} public articles ({public[0][0]} to {public[-1][0]}) -> {vocab.size} words in "
          f"vocab.txt; {len(private)} users ({private[0][0]} to {private[-1][0]}), "
          f"{sum(len(s) for _, _, s in private)} sentences in private.jsonl")


if __name__ == "__main__":
    main()
