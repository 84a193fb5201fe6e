"""Real conversation as users: a film-script corpus in the Cornell Movie-Dialogs format
(`movie_lines.txt`: `L1045 +++$+++ u0 +++$+++ m0 +++$+++ BIANCA +++$+++ They do not!`) becomes the text
`.jsonl` contract (one character = one user, one sentence a line) and a production vocabulary, for
`lm_tokenization_bug.py --data jsonl:OUT/private.jsonl --vocab file:OUT/vocab.txt`:

  .venv/bin/python evaluation/dialogs_to_jsonl.py movie_lines.txt --out runs/dialogs

The vocabulary is the `--size` most frequent tokens of the lines, tokenized as the devices do before
the bug, most frequent first: the paper's setting, where Stack Overflow's 10K-word vocabulary was
counted on the same population's correctly tokenized text (`--vocabulary-from older-half` counts it on
the first half of the films instead, and keeps only the second half's characters as users: names and
the films' own words are then OOV, as for the blog's articles). Characters with fewer than
`--min-sentences` sentences are left out. Lines that are not in the format are skipped and counted.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from articles_to_jsonl import split_sentences, write_corpus  # noqa: E402
from fedgen_debug.data.text import Vocabulary, tokenize  # noqa: E402

_FIELD_SEPARATOR = " +++$+++ "


def read_movie_lines(path: str) -> tuple[list[tuple[int, int, str, str]], int]:
    """((film number, line number, character id, text) in file order, lines skipped). Read as Latin-1,
    the corpus's encoding (every byte decodes)."""
    lines, skipped = [], 0
    with open(path, encoding="latin-1") as f:
        for raw in f:
            fields = raw.rstrip("\r\n").split(_FIELD_SEPARATOR)
            if len(fields) != 5 or not fields[0][1:].isdigit() or not fields[2][1:].isdigit():
                skipped += bool(raw.strip())
                continue
            line_id, character, film, _, text = fields
            lines.append((int(film[1:]), int(line_id[1:]), character, text))
    return lines, skipped


def characters_sentences(lines, films: set[int]) -> dict[str, list[str]]:
    """Each character's sentences in the films `films`, in the order spoken (line numbers rise)."""
    spoken = collections.defaultdict(list)
    for film, line_no, character, text in sorted(lines):
        if film in films:
            spoken[character].extend(split_sentences(text))
    return dict(spoken)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("movie_lines", help="movie_lines.txt of the Cornell Movie-Dialogs format")
    parser.add_argument("--size", type=int, default=5_000, help="vocabulary size")
    parser.add_argument("--vocabulary-from", choices=("all", "older-half"), default="all")
    parser.add_argument("--min-sentences", type=int, default=20, help="characters with fewer are left out")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    lines, skipped = read_movie_lines(args.movie_lines)
    films = sorted({film for film, *_ in lines})
    if len(films) < 2:
        parser.error(f"{args.movie_lines}: {len(films)} films in the format ({skipped} lines skipped); need 2")
    if args.vocabulary_from == "all":
        public_films = private_films = set(films)
    else:
        public_films, private_films = set(films[: len(films) // 2]), set(films[len(films) // 2:])
    spoken = characters_sentences(lines, private_films)
    public = spoken if public_films == private_films else characters_sentences(lines, public_films)
    vocab = Vocabulary.from_sentences((tokenize(s) for sentences in public.values() for s in sentences), args.size)
    users = {c: s for c, s in spoken.items() if len(s) >= args.min_sentences}
    if not users:
        parser.error(f"no character has {args.min_sentences} sentences")
    write_corpus(args.out, vocab, users)
    print(f"{len(lines)} lines of {len(films)} films ({skipped} skipped); vocabulary from {len(public_films)} "
          f"films -> {vocab.size} words in vocab.txt; {len(users)} characters as users, "
          f"{sum(map(len, users.values()))} sentences in private.jsonl")


if __name__ == "__main__":
    main()
