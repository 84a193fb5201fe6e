"""Text faults outside the device catalog, written into a copy of a `.jsonl` file: data that reaches the tool
already corrupted, as a modeler's would (issue 55: build for the family, not the catalog's cases).

  .venv/bin/python evaluation/jsonl_outside_faults.py data.jsonl --fault leet --fraction 0.5 --out leet.jsonl

Faults, on every line of a `fraction` of the users (drawn with `--seed`):
- leet: e→3, o→0, a→4, i→1 (characters: digits inside words);
- signature: " -- Sent from my phone" appended (ordinary words, every line longer);
- html: the line left in the markup it was scraped from, "<p>TEXT</p>" (symbols: < / >);
- form_encoded: spaces written as "+", as a query string or a form post logs them (a symbol between words);
- emoji: " 🙂" appended to every line (a character outside ASCII, its own token);
- bom: a byte order mark (U+FEFF) before every line, as a file read with the wrong encoding keeps it;
- zwsp: a zero-width space (U+200B) after every word, as text copied from a web page can hold;
- homoglyph: Latin a, e, o written as the Cyrillic а, е, о (a keyboard layout, a spoofing filter);
- soft_hyphen: a soft hyphen (U+00AD) after the third letter of words longer than six (hyphenation hints).
The last four print as nothing or as the letters they replace (`analysis.visible_text`).

`play_to_jsonl` writes a play script (`play:` format) as the `.jsonl` contract, one speaker a user, one
sentence a line, so the faults can be written into Tiny Shakespeare as a modeler's file would hold it.
"""

from __future__ import annotations

import argparse
import json
import random

_LEET = str.maketrans({"e": "3", "o": "0", "a": "4", "i": "1"})
_HOMOGLYPHS = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e"})
FAULTS = {
    "leet": lambda text: text.translate(_LEET),
    "signature": lambda text: text + " -- Sent from my phone",
    "html": lambda text: f"<p>{text}</p>",
    "form_encoded": lambda text: "+".join(text.split(" ")),
    "emoji": lambda text: text + " \U0001F642",
    "bom": lambda text: "\ufeff" + text,
    "zwsp": lambda text: "\u200b ".join(text.split(" ")) + "\u200b",
    "homoglyph": lambda text: text.translate(_HOMOGLYPHS),
    "soft_hyphen": lambda text: " ".join(w[:3] + "\u00ad" + w[3:] if len(w) > 6 else w for w in text.split(" ")),
}


def corrupt(rows: list[dict], fault: str, fraction: float, seed: int) -> tuple[list[dict], set]:
    """(the rows with `fault` on every line of round(fraction × users) users, those users)."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {', '.join(FAULTS)}. Found {fault!r}.")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]. Found {fraction}.")
    users = sorted({str(r["client_id"]) for r in rows})
    hit = set(random.Random(seed).sample(users, round(fraction * len(users))))
    change = FAULTS[fault]
    return [{**r, "text": change(r["text"])} if str(r["client_id"]) in hit else r for r in rows], hit


def play_to_jsonl(path: str) -> list[dict]:
    """A play script's speakers and sentences (`data.plays.read_play`) as `.jsonl` rows."""
    from fedgen_debug.data.plays import read_play   # the package, only for this conversion
    play = read_play(path)
    return [{"client_id": speaker, "text": line.decode("utf-8")} for speaker in play.client_ids
            for line in play.client_arrays(speaker)["text"]]


def read_rows(source: str, play: bool) -> list[dict]:
    """The rows of a `.jsonl` file, or of a play script (`play_to_jsonl`) with `play`."""
    if play:
        return play_to_jsonl(source)
    with open(source, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a .jsonl file ({\"client_id\", \"text\"} a line), or a play script with --play")
    parser.add_argument("--play", action="store_true", help="the source is a play script (`play:` format)")
    parser.add_argument("--fault", choices=sorted(FAULTS), required=True)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = read_rows(args.source, args.play)
    changed, hit = corrupt(rows, args.fault, args.fraction, args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in changed)
    print(f"{args.fault}: {len(hit)} of {len({str(r['client_id']) for r in rows})} users' lines changed -> {args.out}")


if __name__ == "__main__":
    main()
