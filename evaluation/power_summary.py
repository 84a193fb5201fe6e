"""The power curve on one page (issue 56): every story and source as "found in k of n seeds" per ε and
fraction, as a Markdown table and one figure of small panels.

  .venv/bin/python evaluation/power_summary.py docs/power_summary_2026-12-06.json --out docs/power_summary_2026-12-06.png

The summary file holds panels ({"title", "reading", "cells": [{"epsilon", "fraction", "detected", "seeds",
"from"}]}), each cell compiled from the rows file or docs section its "from" names; ε is "inf" or a number.
A fraction of 0 is the clean pairs: its rate is the false alarms.
"""

from __future__ import annotations

import argparse
import json
import math

from power_figures import positions

# One colour and marker per fraction in every panel (clean pairs grey, dashed), so the panels read alike.
STYLE = {0.5: ("C0", "o"), 0.1: ("C1", "s"), 0.05: ("C2", "^"), 0.01: ("C3", "v"), 0.0: ("grey", "x")}


def epsilon_of(cell: dict) -> float:
    return float(cell["epsilon"])    # "inf" parses as ∞


def markdown(panels: list[dict]) -> str:
    """One table: a row per panel and fraction, a column per ε, each cell "k of n" (blank: not run)."""
    epsilons = sorted({epsilon_of(c) for p in panels for c in p["cells"]}, key=lambda e: (math.isfinite(e), -e))
    header = ["story, source", "fraction"] + ["∞" if not math.isfinite(e) else f"{e:g}" for e in epsilons]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for panel in panels:
        for fraction in sorted({c["fraction"] for c in panel["cells"]}, reverse=True):
            cells = {epsilon_of(c): c for c in panel["cells"] if c["fraction"] == fraction}
            label = "clean pairs (false alarms)" if fraction == 0 else f"{fraction:.0%}"
            text = [f"{cells[e]['detected']} of {cells[e]['seeds']}" if e in cells else "" for e in epsilons]
            lines.append("| " + " | ".join([panel["title"], label] + text) + " |")
    return "\n".join(lines)


def draw(panels: list[dict], path: str, deployment: str) -> None:
    """A panel per story and source: the rate against ε (∞ at the right), a line per fraction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 2
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(11, 3.3 * rows), sharey=True, squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        where = positions(epsilon_of(c) for c in panel["cells"])
        for fraction in sorted({c["fraction"] for c in panel["cells"]}, reverse=True):
            cells = sorted((c for c in panel["cells"] if c["fraction"] == fraction), key=lambda c: where[epsilon_of(c)])
            colour, marker = STYLE.get(fraction, ("black", "o"))
            ax.plot([where[epsilon_of(c)] for c in cells], [c["detected"] / c["seeds"] for c in cells],
                    color=colour, marker=marker, markersize=7, linestyle="--" if fraction == 0 else "-",
                    label="clean pairs (false alarms)" if fraction == 0 else f"{fraction:.0%} of devices")
        order = sorted(where, key=where.get)
        ax.set_xticks(range(len(order)), [f"{e:g}" if math.isfinite(e) else "∞" for e in order])
        ax.set_title(panel["title"], fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("found in k of n seeds")
    for ax in axes[-1]:
        ax.set_xlabel(f"deployment-equivalent ε ({deployment})")
    handles = {label: handle for ax in axes.flat for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", help="a power summary file (docs/power_summary_DATE.json)")
    parser.add_argument("--out", required=True, help="the figure (PNG)")
    args = parser.parse_args()
    with open(args.summary, encoding="utf-8") as f:
        doc = json.load(f)
    print(markdown(doc["panels"]))
    draw(doc["panels"], args.out, doc["deployment"])


if __name__ == "__main__":
    main()
