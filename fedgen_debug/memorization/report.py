"""The memorization report's picture: exposure against how often a canary was inserted (Carlini
Fig. 4's axis), one panel per insertion design, controls as the band an unseen canary falls in."""

from __future__ import annotations

import math

import numpy as np

from fedgen_debug.privacy.accounting import format_epsilon
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
    empirical = report.get("empirical_privacy")
    panels = max(len(designs) + (empirical is not None), 1)
    fig, axes = plt.subplots(1, panels, figsize=(8.5 * panels, 4), squeeze=False)
    if empirical is not None:
        _plot_cosines(axes[0][-1], empirical)
    for ax, design in zip(axes[0], designs):
        chosen = [r for r in rows if r["inserted"] and r["config"]["design"] == design]
        x = np.array([insertions(r["config"]) for r in chosen])
        ax.scatter(x, [r["exposure"] for r in chosen], label="inserted: exposure", color="tab:red")
        if all("exposure_extrapolated" in r for r in chosen):  # LM canaries: the skew-normal reading
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
    title = [f"canary exposure, {report['references']:,} references"] if designs else []
    title += ["update-canary cosines (empirical ε)"] if empirical is not None else []
    model = "GAN" if report["kind"] == "GAN" else f"{report['kind']}-LM"
    fig.suptitle(f"{model}: " + "; ".join(title or ["no canaries"]))
    fig.tight_layout()
    path = store.released(run_dir, store.MEMORIZATION_PNG)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_cosines(ax, empirical: dict) -> None:
    """The inserted canaries' cosines against the null a direction nobody sent follows, N(0, 1/d)."""
    seen = np.asarray(empirical["seen_cosines"])
    null = empirical["null_std"]
    lo, hi = min(seen.min(), -4 * null), max(seen.max(), 4 * null)
    ax.hist(seen, bins=30, range=(lo, hi), density=True, color="tab:red", alpha=0.6,
            label=f"{empirical['seen']} inserted canaries")
    grid = np.linspace(lo, hi, 400)
    ax.plot(grid, np.exp(-0.5 * (grid / null) ** 2) / (null * math.sqrt(2 * math.pi)), color="k",
            label=f"null N(0, 1/d), d = {empirical['dimension']:,}")
    ax.set_xlabel("cosine of the final model delta with the canary's direction")
    ax.set_ylabel("density")
    ax.set_title(f"empirical ε ≈ {format_epsilon(empirical['estimate'])} (lower bound "
                 f"{format_epsilon(empirical['lower_bound'])}, {1 - empirical['alpha']:.0%}); accountant ε = "
                 f"{format_epsilon(empirical['accountant_epsilon'])}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
