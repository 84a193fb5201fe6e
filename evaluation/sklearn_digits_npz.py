"""A third source of handwriting for calibration checks: scikit-learn's bundled 8×8 digits (1,797 images of
43 writers, UCI optdigits; no download), resized to MNIST's layout (the digit in a 20×20 box centred in
28×28, 0 = background) and dealt round-robin to USERS pseudo-users, written in the `npz:` contract, to be
read as `npz:OUT,background=black`. The writers are not recorded in the data, so a pseudo-user mixes
writers: enough for clean replicate pairs (two trainings on the same users), not for per-writer faults.

  .venv/bin/python evaluation/sklearn_digits_npz.py --users 90 --out digits.npz
"""

from __future__ import annotations

import argparse

import numpy as np
from PIL import Image


def mnist_layout(images8: np.ndarray) -> np.ndarray:
    """[n, 8, 8] in 0-16 (ink high) → [n, 28, 28] uint8, ink high, the digit in the central 20×20."""
    out = np.zeros((len(images8), 28, 28), np.uint8)
    for i, image in enumerate(images8):
        scaled = Image.fromarray((image * (255.0 / 16.0)).astype(np.uint8)).resize((20, 20), Image.BILINEAR)
        out[i, 4:24, 4:24] = np.asarray(scaled)
    return out


def main() -> None:
    from sklearn.datasets import load_digits

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=90)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    digits = load_digits()
    client_ids = np.array([f"user{i % args.users:03d}" for i in range(len(digits.images))])
    np.savez(args.out, pixels=mnist_layout(digits.images), labels=digits.target.astype(np.int64),
             client_ids=client_ids)


if __name__ == "__main__":
    main()
