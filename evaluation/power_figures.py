"""The power curve's figures for docs/ from a rows file of `power.py` (issue 56).

  .venv/bin/python evaluation/power_figures.py docs/power_2026-12-04.json --out docs/

Draws, against the deployment-equivalent ε (ε = inf at the right):
- `power_word_z_DATE.png`: the word-LM's named check z per fraction (its threshold drawn), so a cell
  that missed shows by how much, and the clean pair's z shows the noise the check runs against;
- `power_gan_DATE.png`: each GAN pair's answer per fraction (detected, not detected, inconclusive), rows
  with an `init` (public pretraining) or a `data` (other than the default synthetic data) as lines of
  their own, set slightly apart to stay visible.
`draw_rates` draws a detection rate over seeds per cell (`power.py`'s own figure, `power_rates.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import os

ANSWER_Y = {"detected": 1.0, "not detected": 0.0, "inconclusive": 0.5}


def positions(epsilons) -> dict:
    finite = sorted(e for e in set(epsilons) if math.isfinite(e))
    where = {e: i for i, e in enumerate(finite)}
    where[math.inf] = len(finite)
    return where


def draw(rows: list[dict], value, ylabel: str, title: str, path: str, threshold: float | None = None,
         yticks: dict | None = None, jitter: float = 0.0, ylim: tuple[float, float] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    where = positions(r["epsilon"] for r in rows)
    fig, ax = plt.subplots(figsize=(8.5, 3.5))

    def key(r):   # a line per fraction, public init and data source
        return r["fraction"], r.get("init") or "", r.get("data") or ""

    series = sorted({key(r) for r in rows}, key=lambda s: (-s[0], s[1], s[2]))
    for i, (fraction, init, data) in enumerate(series):
        cells = sorted((r for r in rows if key(r) == (fraction, init, data)), key=lambda r: where[r["epsilon"]])
        source, _, data_path = data.partition(":")
        label = ("clean vs clean" if fraction == 0 else f"{fraction:g} of devices") + \
            (", pretrained (--init)" if init else "") + (f", {source}: {os.path.basename(data_path)}" if data else "")
        ax.plot([where[r["epsilon"]] for r in cells], [value(r) + jitter * (i - (len(series) - 1) / 2) for r in cells],
                marker="s" if init else ("^" if data else "o"), label=label,
                linestyle="--" if fraction == 0 or init else (":" if data else "-"))
    if threshold is not None:
        ax.axhline(threshold, color="grey", linewidth=0.8)
        ax.text(len(where) - 1, threshold, "threshold ", ha="right", va="bottom", fontsize=7, color="grey")
    order = sorted(where, key=where.get)
    ax.set_xticks(range(len(order)), [f"{e:g}" if math.isfinite(e) else "∞" for e in order])
    ax.set_xlabel("deployment-equivalent ε (all of the auxiliary's training)")
    ax.set_ylabel(ylabel)
    if yticks:
        ax.set_yticks(list(yticks.values()), list(yticks))
    if ylim:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_rates(table: list[dict], path: str, title: str) -> None:
    """Detection rate over seeds against ε (∞ at the right), a line per fraction; the clean pairs' (fraction
    0) rate is the false alarms. `table`: {"epsilon", "fraction", "detected", "seeds"} per cell."""
    rows = [{**c, "rate": c["detected"] / c["seeds"]} for c in table]
    draw(rows, lambda r: r["rate"], "detection rate over seeds", title, path, ylim=(-0.05, 1.05))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="a rows file: {date, deployment, word: [...], gan: [...]}")
    parser.add_argument("--out", required=True, help="the directory the figures go to")
    args = parser.parse_args()
    with open(args.rows, encoding="utf-8") as f:
        doc = json.load(f)
    for story in ("word", "gan"):   # one seed drawn; the others are in the rows and the tables
        doc[story] = [r for r in doc.get(story, []) if r.get("seed", 0) == 0]
    date, deployment = doc["date"], doc["deployment"]
    if doc.get("word"):
        draw(doc["word"], lambda r: r["z"], "named check z (seed 0)",
             f"word-LM, concatenation, deployment {deployment}",
             os.path.join(args.out, f"power_word_z_{date}.png"), threshold=doc["word_threshold"])
    if doc.get("gan"):
        draw(doc["gan"], lambda r: ANSWER_Y[r["answer"]], "pixel inversion (seed 0)",
             f"GAN (T4 pair), inversion, deployment {deployment}",
             os.path.join(args.out, f"power_gan_{date}.png"), yticks=dict(ANSWER_Y), jitter=0.03)


if __name__ == "__main__":
    main()
