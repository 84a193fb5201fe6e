"""What a perfect auxiliary would show (issue 55): each catalog fault on FRACTION of the devices, measured
on the data itself, no training, against a shipped calibration's training noise.

  .venv/bin/python evaluation/fault_ceiling.py                     # synthetic writers, gan-demo-replicate
  .venv/bin/python evaluation/fault_ceiling.py --data npz:../shared/data/femnist_real_184_writers.npz \\
      --calibration gan-sharp-replicate
  .venv/bin/python evaluation/fault_ceiling.py --kind word --data synthetic-text:users=300,seed=0,rich=0.04
  .venv/bin/python evaluation/fault_ceiling.py --kind char --data play:../shared/data/tinyshakespeare.txt

A before/after pair of T1 GANs over everyone compares two auxiliaries that at best draw their data as it
is: A the clean users' images, B the same users' after the fault on FRACTION of the devices. So the
samples here are the data's own: SAMPLES images drawn at random from every user's clean images (A) and,
independently, from the faulted ones (B), compared and calibrated as `diagnose` does a GAN pair (the
pixel properties; no primary model, so no class mix or confidence). Its calibrated z is what a GAN pair
that draws its data as it is would show: the difference a fault makes in the data over the training noise
two clean trainings already have. A GAN may draw the faulty share more or less often than its data holds
it, so this is not a bound, but it sorts the misses: a fault whose ceiling is under the threshold is lost
in the training noise itself (more clean runs, more rounds or less DP noise would be needed); one far
above it and still missed is lost in the GAN.

Text (`--kind word` or `char`): a word-LM that draws its data as it is draws the users' sentences, cut at
the sampler's 20 tokens, with words outside its vocabulary as UNK; a char-LM draws the OOV words, cut at 16
characters. The vocabulary is the run's default for synthetic text (public) and, for other data, the data's
own 10,000 most frequent words (a stand-in for the DP vocabulary the runs build).

`--noise estimate` takes each property's training noise at its estimate instead of its 95% upper bound
(and Bonferroni's threshold): what a calibration from many more clean runs of the same settings would see,
if the estimate were the truth. From few clean runs the estimate can itself be low: 6 runs' turn matches
were 21-62% under 14 runs' (docs/analysis.md, 2026-12-06 night).

Rows (`--out`, one JSON line each): fault, fraction, whether the ceiling passes the threshold, the
families beyond it in order, the rank of the fault's own family among them (0: not there), the top three
properties and the strongest of the fault's own family. `--seed` draws the images and the devices hit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from fedgen_debug.analysis import calibration as calibration_module  # noqa: E402
from fedgen_debug.analysis import calibration_store, diagnose  # noqa: E402
from fedgen_debug.analysis.lm_analysis import UNKNOWN_WORD  # noqa: E402
from fedgen_debug.data import client_data as cd  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.device import lm_data  # noqa: E402
from fedgen_debug.device.catalog import bug_names, parse_bug  # noqa: E402
from fedgen_debug.device.tokenization import TokenizationBug  # noqa: E402
from fedgen_debug.training.lm_run import MAX_LENGTH  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from any_bug import DEFAULT_DATA, expected_families  # noqa: E402


def all_pixels(client_data) -> np.ndarray:
    """Every user's images, (N, 28, 28) float in [0, 1], white background."""
    return np.concatenate([np.asarray(cd.client_numpy(client_data, cid)["pixels"], np.float64)
                           for cid in client_data.client_ids])


def vocabulary_for(data: str, client_data, size: int = 10_000) -> lm_data.Vocabulary:
    """The run's default vocabulary for synthetic text (public); else the clean data's own `size` most
    frequent words (evaluation only: a stand-in for the DP vocabulary)."""
    source = lm_data.default_vocabulary_source(data)
    if source != lm_data.DP_VOCABULARY:
        return lm_data.named_vocabulary(source, size)
    return lm_data.Vocabulary.from_sentences(
        (t for cid in client_data.client_ids for t in lm_data.device_tokens(client_data, cid, None)), size)


def lm_texts(client_data, kind: str, vocabulary, bug: TokenizationBug | None = None) -> list[str]:
    """What an LM of `kind` that draws its data as it is samples: each sentence's first tokens, OOV as UNK
    (word), or each OOV word (char), cut at the sampler's length."""
    cap, texts = MAX_LENGTH[kind], []
    for cid in client_data.client_ids:
        tokens = lm_data.device_tokens(client_data, cid, bug)
        if kind == "word":
            texts += [" ".join(t if t in vocabulary else UNKNOWN_WORD for t in sentence[:cap])
                      for sentence in tokens if sentence]
        else:
            texts += [word[:cap] for sentence in tokens for word in sentence if word not in vocabulary]
    return texts


def values(kind: str, samples, vocabulary) -> dict:
    if kind == "gan":
        return diagnose.image_values(samples)
    return diagnose.text_values(list(samples), kind, list(vocabulary.words) if kind == "char" else None)


def ceiling(kind: str, clean, faulty, calibration, samples: int, rng, vocabulary=None) -> list[dict]:
    """`diagnose`'s ranked rows for SAMPLES samples of each side, drawn independently."""
    a = [clean[i] for i in rng.choice(len(clean), samples, replace=len(clean) < samples)]
    b = [faulty[i] for i in rng.choice(len(faulty), samples, replace=len(faulty) < samples)]
    if kind == "gan":
        a, b = np.stack(a), np.stack(b)
    compared = diagnose.compare_values(kind, values(kind, a, vocabulary), values(kind, b, vocabulary))
    return calibration_module.apply(compared, calibration)


def fault_row(name: str, fraction: float, ranked: list[dict], kind: str = "gan") -> dict:
    expected = expected_families(name, kind)
    significant = [r for r in ranked if r["significant"]]
    families = list(dict.fromkeys(r["family"] for r in significant))
    own = [r for r in ranked if r["family"] in expected and r["calibrated_z"] is not None]
    best = max(own, key=lambda r: abs(r["calibrated_z"]), default=None)
    return {
        "fault": name, "fraction": fraction, "expected": list(expected), "threshold": ranked[0]["z_threshold"],
        "detected": bool(significant), "families": families,
        "family_rank": families.index(best["family"]) + 1 if best and best["family"] in families else 0,
        "top": [(r["property"], r["family"], round(r["calibrated_z"], 2)) for r in ranked[:3]],
        "own_family_best": None if best is None else (best["property"], round(best["calibrated_z"], 2)),
    }


def at_estimate(calibration):
    """The calibration with τ_upper = τ̂ for every property and Bonferroni's threshold (`--noise estimate`)."""
    properties = {name: dataclasses.replace(noise, training_noise_upper=noise.training_noise)
                  for name, noise in calibration.properties.items()}
    return dataclasses.replace(calibration, properties=properties,
                               z_threshold=calibration_module.threshold_for(len(properties)))


DEFAULT_CALIBRATION = {"gan": "gan-demo-replicate", "word": "word-demo-replicate", "char": "char-demo-replicate"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("gan", "word", "char"), default="gan")
    parser.add_argument("--data", help=f"default: {DEFAULT_DATA['images']} or {DEFAULT_DATA['text']}")
    parser.add_argument("--calibration",
                        help="a calibration file or a shipped one's name (default: the kind's demo one)")
    parser.add_argument("--faults", help="default: every catalog fault of the modality")
    parser.add_argument("--noise", choices=("upper", "estimate"), default="upper",
                        help="the training noise at its 95%% upper bound (as diagnose) or at its estimate")
    parser.add_argument("--fractions", default="0.5,0.1")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the rows here (.jsonl)")
    args = parser.parse_args()
    modality = "images" if args.kind == "gan" else "text"
    data = args.data or DEFAULT_DATA[modality]
    calibration, _ = calibration_store.named(args.calibration or DEFAULT_CALIBRATION[args.kind]).for_data([data, data])
    if args.noise == "estimate":
        calibration = at_estimate(calibration)
    client_data = data_spec.load_client_data(data)
    vocabulary = None if args.kind == "gan" else vocabulary_for(data, client_data)

    def samples_of(fault):
        if args.kind == "gan":
            return all_pixels(client_data if fault is None else fault.apply(client_data))
        if isinstance(fault, TokenizationBug):
            return lm_texts(client_data, args.kind, vocabulary, fault)
        return lm_texts(client_data if fault is None else fault.apply(client_data), args.kind, vocabulary)

    clean = samples_of(None)
    rng = np.random.default_rng(args.seed)
    rows = [fault_row("clean", 0.0, ceiling(args.kind, clean, clean, calibration, args.samples, rng, vocabulary))]
    for fraction in [float(f) for f in args.fractions.split(",")]:
        for name in (args.faults or ",".join(bug_names(modality))).split(","):
            faulty = samples_of(parse_bug(f"{name}:{fraction}", modality, seed=args.seed))
            ranked = ceiling(args.kind, clean, faulty, calibration, args.samples, rng, vocabulary)
            rows.append(fault_row(name, fraction, ranked, args.kind))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
