"""What `image_properties.ink_spread` reads, on the data itself (docs/analysis.md, 2026-12-07): for each fault on
FRACTION of the users, the relative change of B's mean against A's in the ink's level at the strokes' cores,
the ink's total darkness near the strokes (`ink_masses`) and the strokes' width, and the families `diagnose`
files the contrast and stroke rows under for the pair.

  .venv/bin/python evaluation/ink_spread.py                                   # synthetic writers
  .venv/bin/python evaluation/ink_spread.py --data npz:../shared/data/femnist_real_184_writers.npz

A blur spreads the same ink over more pixels (level down, total the same, strokes wider at half their peak);
a fading loses total and level together; thicker strokes gain ink with their width. Catalog faults go through
the device catalog, the others (`npz_outside_faults`) through the same users drawn with `--seed`. A and B are
SAMPLES images each, drawn independently (as `fault_ceiling.py` draws them).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.analysis import diagnose, image_properties  # noqa: E402
from fedgen_debug.data import client_data as cd  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.device.catalog import parse_bug  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from any_bug import DEFAULT_DATA  # noqa: E402
from fault_ceiling import all_pixels  # noqa: E402
from npz_outside_faults import FAULTS as OUTSIDE, corrupt  # noqa: E402

CATALOG = ("blur", "threshold", "contrast", "dilate", "erode", "zoom", "gamma", "jpeg")
OUTSIDE_FAULTS = ("motion_blur", "downsample", "washed", "darken", "shrink")


def relative_changes(values_a: dict, values_b: dict) -> dict:
    """B's mean against A's, less 1 (`image_properties.relative_change`), of the ink's level, its total (both
    over every image) and the strokes' width (over the images with ink), rounded to 0.1%."""
    def change(of):
        return round(image_properties.relative_change(values_a, values_b, of), 3)

    return {"ink_level": change(image_properties.ink_levels), "ink_total": change(lambda v: v["ink_mass"]),
            "stroke_width": change(lambda v: v["stroke_width"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA["images"])
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    client_data = data_spec.load_client_data(args.data)
    clean = all_pixels(client_data)
    ids = np.concatenate([[cid] * len(cd.client_numpy(client_data, cid)["pixels"]) for cid in client_data.client_ids])
    rng = np.random.default_rng(args.seed)

    def drawn(pixels):
        return diagnose.image_values(pixels[rng.choice(len(pixels), args.samples, replace=len(pixels) < args.samples)])

    values_a = drawn(clean)
    print(f"{'fault':<14} {'ink level':>10} {'ink total':>10} {'stroke width':>13}   contrast, stroke filed under")
    faults = [(name, lambda n=name: all_pixels(parse_bug(f"{n}:{args.fraction}", "images", seed=args.seed)
                                               .apply(client_data))) for name in CATALOG]
    faults += [(name, lambda n=name: corrupt(clean, ids, n, args.fraction, args.seed)[0]) for name in OUTSIDE_FAULTS
               if name in OUTSIDE]
    for name, faulty in [("clean", lambda: clean)] + faults:
        values_b = drawn(faulty())
        changes = relative_changes(values_a, values_b)
        filed = ["sharpness" if image_properties.ink_spread(values_a, values_b, p) else family
                 for p, family in (("michelson_contrast", "contrast"), ("stroke_width", "stroke"))]
        print(f"{name:<14} {changes['ink_level']:>+10.1%} {changes['ink_total']:>+10.1%} "
              f"{changes['stroke_width']:>+13.1%}   {', '.join(filed)}", flush=True)


if __name__ == "__main__":
    main()
