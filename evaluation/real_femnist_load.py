"""Loads the real FEMNIST writers in ../shared/data through the npz contract and reports counts.

Evaluation only (a fresh user machine has no ../shared): `.venv/bin/python evaluation/real_femnist_load.py
[PATH]`. Prints the writer/example/class counts the contract yields, and the same statistics for a
synthetic dataset of as many writers, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from fedgen_debug.cli.data_cmd import size_summary
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "femnist_real_184_writers.npz")


def describe(client_data) -> dict:
    labels = np.concatenate([cd.client_numpy(client_data, c)["label"] for c in client_data.client_ids])
    pixels_mean = np.mean([cd.client_numpy(client_data, c)["pixels"].mean() for c in client_data.client_ids])
    return {
        **size_summary(cd.client_sizes(client_data)),
        "classes": int(len(np.unique(labels))),
        "digit_share": round(float(np.mean(labels < 10)), 3),
        "mean_pixel_intensity": round(float(pixels_mean), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=os.path.normpath(DEFAULT))
    args = parser.parse_args()
    if not os.path.exists(args.path):
        print(f"not found: {args.path} (this script needs ../shared/data)", file=sys.stderr)
        return 1
    real = describe(spec.load_client_data(f"npz:{args.path}"))
    synthetic = describe(spec.load_client_data(f"synthetic-images:writers={real['clients']},seed=0"))
    print(json.dumps({"real_femnist": real, "synthetic_same_writers": synthetic}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
