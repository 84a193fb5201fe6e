"""Any bug (issue 55): catalog faults × fractions × seeds, and clean pairs, each diagnosed.

  .venv/bin/python evaluation/any_bug.py --modality images --out runs/any-bug-images \\
      --faults rotate,mirror,blur --fractions 0.5,0.1 --seeds 0,1,2 --clean-seeds 0,1,2,3
  .venv/bin/python evaluation/any_bug.py --modality text --kind word --out runs/any-bug-word \\
      --data play:../shared/data/tinyshakespeare.txt

For each seed S the reference run trains on clean data (seed 2S) and each fault's run on the data with
the fault on FRACTION of the devices (seed 2S + 1, `--bug FAULT:FRACTION`); a clean pair is a reference
and a second clean run (seed 2S + 1): another model initialisation and another secret, nothing else, so
what diagnose finds there is training noise (the false alarms, and the calibration's data). Images: DP
GANs on every user's images (T1 `random`, before vs after the update); text: char- or word-LMs.

Rows (one JSON line each, and `summary.json`): fault, fraction, seed, whether diagnose says the runs
differ, its families in order, the rank of the fault's expected family (`EXPECTED_FAMILY`; 0: not
among the significant ones), the top property, and the named check's verdict. The runs resume, and
the run directories are shared: a reference trains once for every fault of its seed. Every run is
charged to the privacy ledger of $FEDGEN_DEBUG_LEDGER; on synthetic data the script gives the simulated
users an unlimited budget in that ledger (use a ledger of its own).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug import runtime  # noqa: E402
from fedgen_debug.analysis.diagnose import diagnose  # noqa: E402
from fedgen_debug.experiments.sweep import Arm, Comparison, Sweep  # noqa: E402
from fedgen_debug.runs.store import write_json  # noqa: E402

# The family a fault should be diagnosed as (`analysis.differences` vocabulary).
EXPECTED_FAMILY = {
    "invert": "polarity", "rotate": "orientation", "rotate_small": "orientation", "mirror": "orientation",
    "flip": "orientation", "transpose": "orientation", "blur": "sharpness", "rescale": "resolution",
    "shift": "position", "zoom": "scale", "contrast": "contrast", "gamma": "brightness",
    "normalize_twice": "contrast", "noise": "noise", "jpeg": "resolution", "threshold": "sharpness",
    "erode": "stroke", "dilate": "stroke", "mark": "artefact",
    "concat": "spacing", "entities": "characters", "mojibake": "characters", "truncate": "length",
    "split": "spacing", "typos": "characters", "strip_punctuation": "characters",
    "duplicate_words": "repetition", "missing_spaces": "spacing", "number_format": "characters",
    "strip_accents": "characters", "smart_quotes": "characters",
}
# A word-LM generates vocabulary ids: what a fault does inside a token (glued or split words, entities,
# typos, encoding damage, other quotes or number formats) reaches its samples only as more UNK
# (`text_properties`, family "vocabulary"); the char-LM, trained on the OOV words, shows the characters.
WORD_LM_EXPECTED = {fault: ("vocabulary", family) for fault, family in EXPECTED_FAMILY.items()
                    if fault in ("concat", "entities", "mojibake", "split", "typos", "missing_spaces", "number_format",
                                 "strip_accents", "smart_quotes")}
# Stripped punctuation also leaves sentences without their final "." (length: `unterminated`).
WORD_LM_EXPECTED["strip_punctuation"] = ("characters", "length")


def expected_families(fault: str, kind: str) -> tuple[str, ...]:
    """The families a fault may correctly be diagnosed as, for this auxiliary ("gan", "char", "word")."""
    if kind == "word" and fault in WORD_LM_EXPECTED:
        return WORD_LM_EXPECTED[fault]
    return (EXPECTED_FAMILY[fault],) if fault in EXPECTED_FAMILY else ()


DEFAULT_DATA = {"images": "synthetic-images:writers=100,seed=0", "text": "synthetic-text:users=300,seed=0"}


# `--sharp`: the generator options docs/gan.md finds real FEMNIST needs for legible letters (the preset alone
# draws ink blobs there); such runs take their own shipped calibration, `gan-sharp-replicate` (`calibration_store`).
SHARP_GAN = {"cycle_client_data": True, "gen_ema": 0.9, "gen_upsample": "bilinear"}


# The paper's selection pairs (A, B): high- against low-accuracy users (T4), correctly classified against
# misclassified examples (T2).
SELECTION_PAIRS = {"random": None, "t4": ("by-user-accuracy:high", "by-user-accuracy:low"),
                   "t2": ("by-example:correct", "by-example:misclassified")}


def run_config(modality: str, kind: str, data: str, bug: str | None, seed: int, rounds: int | None,
               select: str = "random", vocab: str | None = None, sharp: bool = False, gen_ema: float = 0.0,
               primary: str | None = None):
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    settings = bug_settings(bug, modality)
    if modality == "images":
        options = SHARP_GAN if sharp else ({"gen_ema": gen_ema} if gen_ema else {})
        return GANRun(data, select, preset="demo", seed=seed, rounds=rounds, primary=primary, **settings, **options)
    return LMRun(kind, data, preset="demo", seed=seed, rounds=rounds, vocab=vocab, **settings)


def row(comparison, report: dict) -> dict:
    about = comparison.about
    expected = expected_families(about["fault"], report["kind"])
    families = report["families"]
    top = report["differences"][0] if report["differences"] else {}
    ranks = [families.index(f) + 1 for f in expected if f in families]
    return {**about, "differ": report["differ"], "families": families,
            "expected_family": list(expected), "expected_rank": min(ranks) if ranks else 0,
            "top_property": top.get("property"), "top_z": round(top.get("z", 0.0), 2),
            "top_calibrated_z": None if top.get("calibrated_z") is None else round(top["calibrated_z"], 2),
            "calibrated": report["calibration"]["calibrated"],
            "healthy": all(h["healthy"] for h in report["health"].values()),
            "check": {c["name"]: c["suspected"] for c in report["checks"]},
            "z_by_property": {c["property"]: round(c["z"], 3) for c in report["differences"]},
            "calibrated_z_by_property": {c["property"]: None if c.get("calibrated_z") is None else round(c["calibrated_z"], 3)
                                         for c in report["differences"]}}


def unlimited_budget(data: str) -> None:
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.privacy.ledger import Ledger, population_key

    if data_spec.parse_data_spec(data).source.startswith("synthetic"):
        Ledger().set_budget(population_key(data), float("inf"), reason="evaluation/any_bug.py: simulated users")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modality", choices=("images", "text"), required=True)
    parser.add_argument("--kind", choices=("char", "word"), default="word", help="text: the LM")
    parser.add_argument("--data", help="default: synthetic data of the modality (100 writers, 300 users)")
    parser.add_argument("--faults", help="comma-separated catalog names (default: every fault of the modality)")
    parser.add_argument("--fractions", default="0.5,0.1")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--clean-seeds", default="0,1,2", help="seeds of the clean pairs")
    parser.add_argument("--rounds", type=int, help="override the demo preset's rounds")
    parser.add_argument("--samples", type=int, default=1000, help="samples per side for diagnose")
    parser.add_argument("--select", choices=tuple(SELECTION_PAIRS), default="random",
                        help="images: T1 GANs on every user (random: A clean, B with the fault), T4 pairs (A the "
                             "high-accuracy users' GAN, B the low-accuracy users'), or T2 pairs (A the correctly "
                             "classified examples' GAN, B the misclassified ones'), both on the data with the fault")
    parser.add_argument("--vocab", help="text: the LMs' vocabulary (file:PATH, public:SPEC or dp; default: the "
                                        "data's, as train-lm chooses)")
    parser.add_argument("--sharp", action="store_true", help="images: GANs with --cycle-client-data --gen-ema 0.9 "
                        "--gen-upsample bilinear (legible letters on real FEMNIST; calibrated by gan-sharp-replicate)")
    parser.add_argument("--gen-ema", type=float, default=0.0, metavar="DECAY",
                        help="images: GANs with an EMA generator alone (--gen-ema 0.9: calibrated by gan-ema-replicate)")
    parser.add_argument("--primary", metavar="MODEL", help="images: the users' own model (train-gan --primary: a Keras "
                        "file or SavedModel directory, [0, 1] white-paper input) for every run; default: each run trains "
                        "the stand-in CNN")
    parser.add_argument("--train-only", action="store_true", help="train the runs, diagnose nothing")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.sharp and args.gen_ema:
        parser.error("--sharp already sets --gen-ema 0.9; give one of them")
    runtime.install_shutdown_hooks()
    from fedgen_debug.device.catalog import bug_names

    data = args.data or DEFAULT_DATA[args.modality]
    faults = args.faults.split(",") if args.faults else list(bug_names(args.modality))
    unlimited_budget(data)
    tag = args.modality if args.modality == "images" else args.kind

    def arm(name: str, bug: str | None, seed: int, select: str = "random") -> Arm:
        label = "clean" if bug is None else bug.replace(":", "-").replace(",", "-")
        side = "" if select == "random" else f"-{select.rsplit(':', 1)[-1]}"
        return Arm(name, os.path.join(args.out, f"{tag}-{label}-seed{seed}{side}"),
                   run_config(args.modality, args.kind, data, bug, seed, args.rounds, select, args.vocab,
                              args.sharp, args.gen_ema, args.primary))

    def pair(bug: str | None, s: int) -> tuple[Arm, Arm]:
        if SELECTION_PAIRS[args.select]:   # the paper's pairs: both sides on the data with the fault
            side_a, side_b = SELECTION_PAIRS[args.select]
            return arm("a", bug, 2 * s, side_a), arm("b", bug, 2 * s + 1, side_b)
        return arm("a", None, 2 * s), arm("b", bug, 2 * s + 1)

    clean_seeds = [int(x) for x in args.clean_seeds.split(",") if x]
    seeds = [int(x) for x in args.seeds.split(",") if x]
    comparisons = [Comparison(f"clean-seed{s}", pair(None, s), {"fault": "clean", "fraction": 0.0, "seed": s})
                   for s in clean_seeds]
    comparisons += [Comparison(f"{fault}-{fraction}-seed{s}", pair(f"{fault}:{fraction}", s),
                               {"fault": fault, "fraction": float(fraction), "seed": s})
                    for fault in faults for fraction in args.fractions.split(",") for s in seeds]

    def analyze(comparison) -> dict:
        if args.train_only:
            return comparison.about
        dirs = comparison.run_dirs
        out = row(comparison, diagnose(dirs["a"], dirs["b"], samples=args.samples))
        print(json.dumps(out), flush=True)
        return out

    rows = Sweep(comparisons).collect(analyze)
    write_json(os.path.join(args.out, "summary.json"), {"modality": args.modality, "kind": args.kind, "data": data,
                                                        "rounds": args.rounds, "samples": args.samples, "rows": rows})


if __name__ == "__main__":
    main()
