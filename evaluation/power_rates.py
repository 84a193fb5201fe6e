"""The power curve's detection rates over seeds (issue 56): rows of `power.py` runs from several files,
merged per (ε, fraction), as a Markdown table and a figure.

  .venv/bin/python evaluation/power_rates.py docs/power_word_2026-11-29.json docs/power_2026-12-04.json \\
      docs/power_2026-12-05.json --story word --out docs/power_word_rate_2026-12-05.png

A rows file is `power.py`'s `summary.json` ({"rows": [...]}) or a docs rows file ({"word": [...],
"gan": [...]}, or "gan_synthetic" beside other data's rows). Rows on other data, another vocabulary or
with public pretraining are left out: the rates are of one setting, the default synthetic users. A cell
measured twice for one seed (a file that repeats another's rows) counts once; two files disagreeing on it
is an error.
"""

from __future__ import annotations

import argparse
import collections
import json
import math

from power_figures import draw_rates


def rows_of(document: dict, story: str) -> list[dict]:
    """The rows of `story` ("word" or "gan") in one file, of the default setting only."""
    if "rows" in document:    # power.py's summary.json: one story and one data source per file
        kind = "gan" if document.get("story") == "invert" else "word"
        default = str(document.get("data", "synthetic-")).startswith("synthetic-") and not document.get("vocab")
        rows = document["rows"] if kind == story and default else []
    else:   # "gan_synthetic": the synthetic writers' GAN rows of a file that also holds other data's
        rows = document.get(story, []) + document.get(f"{story}_synthetic", [])
    return [r for r in rows if not r.get("init") and not r.get("data") and not r.get("vocab")]


def merge(documents: list[dict], story: str) -> dict[tuple[float, float], dict[int, dict]]:
    """{(ε, fraction): {seed: row}}, each seed once."""
    cells: dict = collections.defaultdict(dict)
    for document in documents:
        for row in rows_of(document, story):
            cell, seed = (float(row["epsilon"]), float(row["fraction"])), int(row["seed"])
            known = cells[cell].get(seed)
            if known is not None and bool(known["detected"]) != bool(row["detected"]):
                raise ValueError(f"two files disagree on ε = {cell[0]:g}, fraction {cell[1]:g}, seed {seed}.")
            cells[cell].setdefault(seed, row)
    return dict(cells)


def rates(cells: dict) -> list[dict]:
    """Per cell: detected, seeds, and the check's z per seed (word story), ε ∞ last."""
    out = []
    for (epsilon, fraction), by_seed in cells.items():
        seeds = sorted(by_seed)
        out.append({"epsilon": epsilon, "fraction": fraction, "seeds": len(seeds),
                    "detected": sum(bool(by_seed[s]["detected"]) for s in seeds),
                    "z": [by_seed[s].get("z") for s in seeds]})
    return sorted(out, key=lambda c: (-c["fraction"], math.isinf(c["epsilon"]), -c["epsilon"]))


def markdown(table: list[dict], with_z: bool = True) -> str:
    """Fractions as rows, ε as columns (∞ first, as in docs/privacy.md): "k of n" (z per seed, `with_z`: the
    word check's; the GAN verdict's z is a capped test of dark shares, 0 or 100, and says nothing more)."""
    by_cell = {(c["epsilon"], c["fraction"]): c for c in table}

    def cell(epsilon, fraction) -> str:
        c = by_cell.get((epsilon, fraction))
        if c is None:
            return ""
        zs = ", ".join(f"{z:.1f}" for z in c["z"] if z is not None) if with_z else ""
        return f"{c['detected']} of {c['seeds']}" + (f" ({zs})" if zs else "")

    return grid({c["epsilon"] for c in table}, {c["fraction"] for c in table}, cell, "0 (clean vs clean: false alarms)")


def grid(epsilons, fractions, cell, clean_name: str) -> str:
    """A Markdown table, a row per fraction of devices (largest first; 0 named `clean_name`) and a column per
    ε (∞ first), each cell `cell(ε, fraction)`."""
    epsilons = sorted(epsilons, key=lambda e: (not math.isinf(e), -e))
    head = "| fraction of devices | " + " | ".join("∞" if math.isinf(e) else f"{e:g}" for e in epsilons) + " |"
    lines = [head, "| --- " * (len(epsilons) + 1) + "|"]
    for fraction in sorted(fractions, reverse=True):
        name = clean_name if fraction == 0 else f"{fraction:g}"
        lines.append(f"| {name} | " + " | ".join(cell(e, fraction) for e in epsilons) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", help="rows files (power.py summary.json or docs rows files)")
    parser.add_argument("--story", choices=("word", "gan"), default="word")
    parser.add_argument("--out", help="the figure (PNG)")
    parser.add_argument("--title", default="word-LM, concatenation, deployment N=10000,qN=1000")
    args = parser.parse_args()
    documents = []
    for path in args.rows:
        with open(path, encoding="utf-8") as f:
            documents.append(json.load(f))
    table = rates(merge(documents, args.story))
    print(markdown(table, with_z=args.story == "word"))
    if args.out:
        draw_rates(table, args.out, args.title)


if __name__ == "__main__":
    main()
