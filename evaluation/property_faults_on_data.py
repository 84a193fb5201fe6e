"""Image properties on real data, no GAN: one half of the writers against the other with a pixel fault
on it, ranked as `diagnose` ranks by the samples' z (no training noise here: the data itself).

  .venv/bin/python evaluation/property_faults_on_data.py --npz ../shared/data/femnist_real_184_writers.npz
  git show 0ec3ebb:fedgen_debug/analysis/image_properties.py > /tmp/ip_before.py
  .venv/bin/python evaluation/property_faults_on_data.py --npz ... --properties /tmp/ip_before.py   # before specks left the ink

Writers with an even index are side A, odd ones side B; 1,000 images of each (seed 0), B faulted.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.analysis import differences  # noqa: E402
from fedgen_debug.analysis import image_properties  # noqa: E402


def salt_and_pepper(images, share, rng):
    hit = rng.random(images.shape) < share
    return np.where(hit, rng.integers(0, 2, images.shape).astype(np.float64), images)


FAULTS = {
    "clean": lambda x, rng: x,
    "gaussian 0.2": lambda x, rng: np.clip(x + rng.normal(0, 0.2, x.shape), 0, 1),
    "salt and pepper 2%": lambda x, rng: salt_and_pepper(x, 0.02, rng),
    "salt and pepper 5%": lambda x, rng: salt_and_pepper(x, 0.05, rng),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npz", required=True, help="pixels (uint8, 255 = paper) and writer_index, the npz contract")
    parser.add_argument("--properties", help="another image_properties.py to measure with (e.g. an older one)")
    parser.add_argument("--images", type=int, default=1000)
    args = parser.parse_args()
    module = image_properties
    if args.properties:
        spec = importlib.util.spec_from_file_location("other_image_properties", args.properties)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    data = np.load(args.npz)
    pixels, writer = data["pixels"].astype(np.float64) / 255.0, data["writer_index"]
    rng = np.random.default_rng(0)
    a, b = pixels[writer % 2 == 0], pixels[writer % 2 == 1]
    a = a[rng.choice(len(a), args.images, replace=False)]
    b = b[rng.choice(len(b), args.images, replace=False)]
    values_a = module.image_properties(a)
    for name, fault in FAULTS.items():
        ranked = differences.rank(differences.compare_properties(module.IMAGE_PROPERTIES, values_a,
                                                                 module.image_properties(fault(b, rng))))
        top = ", ".join(f"{c['property']} {c['z']:.1f}" for c in ranked[:4])
        print(f"{name}: families {differences.significant_families(ranked)[:5]}; top {top}")


if __name__ == "__main__":
    main()
