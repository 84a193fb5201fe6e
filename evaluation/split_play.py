"""A production-like vocabulary for a play script: its first half is the public text the tokenizer's
vocabulary was built from, its second half the users' private text. Writes both, for
`lm_tokenization_bug.py --data play:OUT/private.txt --vocab file:OUT/vocab.txt`:

  .venv/bin/python evaluation/split_play.py ../shared/data/tinyshakespeare.txt --out runs/shakespeare-split

The split falls on the blank line nearest the middle (speaker blocks stay whole). The vocabulary is
the `--size` most frequent tokens of the first half, tokenized as the devices do (`data.text.tokenize`),
most frequent first: the paper's setting, where the production vocabulary (10K words) predates the
bug and leaves a few percent of tokens OOV.
"""

from __future__ import annotations

import argparse
import os

from fedgen_debug.data.text import Vocabulary, tokenize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("play", help="a play script in Tiny Shakespeare's format")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.play, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blanks = [i for i, line in enumerate(lines) if not line.strip()]
    middle = min(blanks, key=lambda i: abs(i - len(lines) // 2))
    public, private = lines[:middle], lines[middle + 1:]
    vocab = Vocabulary.from_sentences(
        (tokenize(line) for line in public if line.strip() and not line.rstrip().endswith(":")), args.size)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab.words) + "\n")
    with open(os.path.join(args.out, "private.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(private))
    print(f"{len(public)} public lines -> {vocab.size} words in vocab.txt; {len(private)} private lines")


if __name__ == "__main__":
    main()
