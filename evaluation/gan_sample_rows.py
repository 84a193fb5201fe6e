"""A figure of GAN runs' released samples, one labelled row per run (docs/gan.md's sensitivity pictures).

    .venv/bin/python evaluation/gan_sample_rows.py --run "5%, seed 0=runs/.../low-dir" --run "0%=..." \
        --count 16 --out docs/gan_quality/NAME.png

Reads each run's released samples (`released/samples.npz`, the first `--count`), nothing else.
"""

from __future__ import annotations

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fedgen_debug.runs import store  # noqa: E402
from fedgen_debug.analysis.gan_analysis import sample_grid  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=RUN_DIR")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--title", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runs = [spec.rsplit("=", 1) for spec in args.run]
    for spec, parts in zip(args.run, runs):
        if len(parts) != 2 or not os.path.exists(store.released(parts[1], store.SAMPLES_NPZ)):
            parser.error(f"--run {spec!r}: expected LABEL=RUN_DIR of a GAN run with released samples")
    fig, axes = plt.subplots(len(runs), 1, figsize=(args.count * 0.5, len(runs) * 0.75), squeeze=False)
    for ax, (label, run_dir) in zip(axes[:, 0], runs):
        (images,) = store.load_arrays(store.released(run_dir, store.SAMPLES_NPZ))
        ax.imshow(sample_grid(images, 1, args.count), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
    if args.title:
        fig.suptitle(args.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
