"""The memorization report's picture: exposure against how often a canary was inserted (Carlini
Fig. 4's axis), one panel per insertion design, controls as the band an unseen canary falls in."""

from __future__ import annotations

import math

import numpy as np

from fedgen_debug.runs import store


def insertions(config: dict) -> float:
    """The design's public measure of repetition: n_u·n_e copies (Ramaswamy), or p_u·p_e, the share of
    all sentences a canary is expected to replace (Thakkar; the count itself depends on private data)."""
    if config["design"] == "ramaswamy":
        return float(config["n_u"] * config["n_e"])
    return float(config["p_u"] * config["p_e"])


def plot_exposure(report: dict, run_dir: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["canaries"]
    designs = [d for d in ("thakkar", "ramaswamy") if any(r["inserted"] and r["config"]["design"] == d for r in rows)]
    controls = [r["exposure"] for r in rows if not r["inserted"]]
    fig, axes = plt.subplots(1, max(len(designs), 1), figsize=(8.5 * max(len(designs), 1), 4), squeeze=False)
    for ax, design in zip(axes[0], designs):
        chosen = [r for r in rows if r["inserted"] and r["config"]["design"] == design]
        x = np.array([insertions(r["config"]) for r in chosen])
        ax.scatter(x, [r["exposure"] for r in chosen], label="inserted: exposure", color="tab:red")
        ax.scatter(x, [r["exposure_extrapolated"] for r in chosen], label="inserted: extrapolated (skew-normal)",
                   facecolors="none", edgecolors="tab:red")
        if controls:
            ax.axhspan(min(controls), max(controls), color="tab:gray", alpha=0.25, label="controls (never inserted)")
        ax.axhline(report["log2_space"], color="k", linestyle=":", label="log2 |R| (rank 1 in the space)")
        ax.axhline(math.log2(report["references"] + 1), color="tab:blue", linestyle=":",
                   label="log2(m + 1): the most m references resolve")
        ax.axhline(report["verdict"]["max_exposure_bits"], color="tab:orange", linestyle="--", label="threshold")
        ax.set_xscale("log")
        ax.set_xlabel("copies n_u·n_e" if design == "ramaswamy" else "share of sentences replaced p_u·p_e")
        ax.set_ylabel("exposure (bits)")
        ax.set_title(f"{design} insertion")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"canary exposure, {report['kind']}-LM, {report['references']:,} references")
    fig.tight_layout()
    path = store.released(run_dir, store.MEMORIZATION_PNG)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
