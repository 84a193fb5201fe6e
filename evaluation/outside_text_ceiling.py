"""What a perfect auxiliary would show for text faults outside the catalog (issue 55): each fault of
`jsonl_outside_faults` on every line of half the users of a text file, measured on the data itself, no
training, as `fault_ceiling.py` does for the catalog's faults and `outside_fault_ceiling.py` for images.

  .venv/bin/python evaluation/outside_text_ceiling.py ../shared/data/tinyshakespeare.txt --play \\
      --kinds char,word --faults bom,zwsp,homoglyph,soft_hyphen --seeds 0,1 --out rows.jsonl

Per kind and seed: SAMPLES of what an LM that draws its data as it is would sample (`fault_ceiling.lm_texts`:
the OOV words for a char-LM, the first 20 tokens with UNK for a word-LM; the vocabulary is the clean file's
--vocab-size most frequent words, 10,000) from the clean file (A) and, independently, from the faulty one (B), diagnosed
as `diagnose` does an LM pair against the kind's demo replicate calibration for the file. A row: kind,
fault, seed, whether a property passes the threshold, the families beyond it in order, the top three.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.analysis import calibration_store  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_ceiling import ceiling, lm_texts, vocabulary_for  # noqa: E402
from jsonl_outside_faults import FAULTS, corrupt, read_rows  # noqa: E402


def row(kind: str, fault: str, seed: int, ranked: list[dict]) -> dict:
    significant = [r for r in ranked if r["significant"]]
    return {"kind": kind, "fault": fault, "seed": seed, "detected": bool(significant),
            "families": list(dict.fromkeys(r["family"] for r in significant)),
            "top": [(r["property"], r["family"], round(r["calibrated_z"], 2)) for r in ranked[:3]]}


def _as_data(rows: list[dict], directory: str, name: str) -> str:
    path = os.path.join(directory, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return f"jsonl:{path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a .jsonl file, or a play script with --play")
    parser.add_argument("--play", action="store_true")
    parser.add_argument("--kinds", default="char,word")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", help="write the rows here (.jsonl)")
    args = parser.parse_args()
    rows = read_rows(args.source, args.play)
    out = []
    with tempfile.TemporaryDirectory() as directory:
        clean_spec = _as_data(rows, directory, "clean")
        clean_data = data_spec.load_client_data(clean_spec)
        vocabulary = vocabulary_for(clean_spec, clean_data, args.vocab_size)
        for kind in args.kinds.split(","):
            calibration, _ = calibration_store.named(f"{kind}-demo-replicate").for_data([clean_spec] * 2)
            clean = lm_texts(clean_data, kind, vocabulary)
            for seed in [int(s) for s in args.seeds.split(",")]:
                rng = np.random.default_rng(seed)
                out.append(row(kind, "clean", seed, ceiling(kind, clean, clean, calibration, args.samples, rng,
                                                             vocabulary)))
                print(json.dumps(out[-1], ensure_ascii=False), flush=True)
                for fault in args.faults.split(","):
                    changed, _ = corrupt(rows, fault, args.fraction, seed)
                    faulty = lm_texts(data_spec.load_client_data(_as_data(changed, directory, fault)), kind,
                                      vocabulary)
                    ranked = ceiling(kind, clean, faulty, calibration, args.samples, rng, vocabulary)
                    out.append(row(kind, fault, seed, ranked))
                    print(json.dumps(out[-1], ensure_ascii=False), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in out)


if __name__ == "__main__":
    main()
