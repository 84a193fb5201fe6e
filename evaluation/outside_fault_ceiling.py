"""What a perfect auxiliary would show for image faults outside the catalog (issue 55): each fault of
`npz_outside_faults` on every image of half the users of an images `.npz`, measured on the data itself, no
training, as `fault_ceiling.py` does for the catalog's faults.

  .venv/bin/python evaluation/outside_fault_ceiling.py ../shared/data/femnist_real_184_writers.npz \\
      --calibration gan-demo-replicate --seeds 0,1 --out rows.jsonl

Per seed (the users hit and the images drawn): SAMPLES images from the clean file (A) and, independently, from
the faulty one (B), diagnosed as `diagnose` does a GAN pair (the pixel properties, no primary model) against the
calibration's training noise for the file, and the named check `pixel_inversion_suspected` on the same
images. A row: the fault, the family a modeler would look for, the families beyond the threshold in order,
the top three properties, and the named check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.analysis import calibration_store, diagnose, gan_analysis  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from npz_outside_faults import FAULTS, corrupt  # noqa: E402

# The family a modeler would name for each fault ("|": either reads right).
EXPECTED = {"squash": "scale|orientation", "shear": "orientation", "ruled": "artefact", "occlude": "position",
            "pad": "artefact|scale", "frame": "artefact", "thin_frame": "artefact", "stretch": "scale|orientation",
            "shrink": "scale",
            "motion_blur": "sharpness", "downsample": "resolution|sharpness", "darken": "brightness",
            "washed": "contrast", "posterize": "contrast|sharpness", "rotate180": "orientation"}


def row(fault: str, seed: int, ranked: list[dict], inversion: dict) -> dict:
    significant = [r for r in ranked if r["significant"]]
    families = list(dict.fromkeys(r["family"] for r in significant))
    expected = EXPECTED[fault].split("|")
    return {"fault": fault, "seed": seed, "expected": expected, "detected": bool(significant),
            "first_right": bool(families) and families[0] in expected, "families": families,
            "top": [(r["property"], r["family"], round(r["calibrated_z"], 2)) for r in ranked[:3]],
            "inversion_suspected": inversion["pixel_inversion_suspected"],
            "inversion_inconclusive": inversion["inconclusive"], "inversion_z": round(inversion["evidence"]["z"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="an images .npz (pixels, labels, client_ids), white background")
    parser.add_argument("--calibration", default="gan-demo-replicate")
    parser.add_argument("--faults", default=",".join(EXPECTED))
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", help="write the rows here (.jsonl)")
    args = parser.parse_args()
    calibration, _ = calibration_store.named(args.calibration).for_data([f"npz:{args.source}"] * 2)
    with np.load(args.source, allow_pickle=False) as f:
        pixels, client_ids = f["pixels"], f["client_ids"]
    scale = 255.0 if pixels.dtype == np.uint8 else 1.0
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        rng = np.random.default_rng(seed)
        a = rng.choice(len(pixels), args.samples, replace=False)
        b = rng.choice(len(pixels), args.samples, replace=False)
        clean = pixels[a].astype(np.float64) / scale
        for fault in args.faults.split(","):
            if fault not in FAULTS:
                raise SystemExit(f"--faults: {fault!r} is not one of {', '.join(FAULTS)}")
            faulty, _ = corrupt(pixels, client_ids, fault, args.fraction, seed)
            images = faulty[b].astype(np.float64) / scale
            ranked, _, _ = diagnose.image_differences(clean, images, calibration=calibration)
            inversion = gan_analysis.inversion_verdict(images * 2 - 1, clean * 2 - 1)
            rows.append(row(fault, seed, ranked, inversion))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
