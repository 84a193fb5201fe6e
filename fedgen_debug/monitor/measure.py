"""The signals of one period's auxiliary (issue 14), measured on its released model only.

Each auxiliary kind has its verdict statistic (the analyses' own, on `samples` generated samples with
the plan's public seed) and, for drift, what the period's samples look like as a whole:

| kind    | verdict statistic                      | drift input                                          |
|---------|----------------------------------------|------------------------------------------------------|
| gan     | dark-background share of the samples   | the samples' features in the primary CNN (Dense-128) |
| char-lm | space mass of the sampled OOV words    | –                                                    |
| word-lm | position 1's share of the sampled OOV   | –                                                    |

The char-LM had a drift signal until 2026-11-29: the Jensen-Shannon divergence of the sampled OOV words
from the clean periods'. It is not computed any more, because it could not alert on anything but noise
(`evaluation/monitor_fleet.py` and `monitor_replay.py`): on synthetic text its clean values sat under its
absolute floor, so the space mass carried every detection; on real text (Tiny Shakespeare, speakers as a
fleet) the OOV words move with who is present (names come and go), and it alerted in 6 of 27 clean periods
against the last clean periods (10 of 27 against the calibration periods), never during a 10% glued-words
rollout, and twice after its fix; the space mass alerted in none of the 27 and within a period of the
rollout.

The word-LM's signal is the analyses' verdict statistic: of the OOV tokens sampled at positions 1-8,
the share at position 1 (glued first tokens raise position 1 alone). Not the raw OOV rate at position 1:
how much OOV a word-LM samples overall moves with the DP noise from one period's model to the next
(measured on one training: 5.8% of tokens at round 50, 2.7% at round 60), and that rate moves with it:
on one monitor's models it read 0.017, 0.062, 0.026 in three clean periods and missed a 10% bug the
share flagged one period after it began (docs/monitoring.md).

A GAN whose samples are mostly blank, noise or without a background has not learned its data
(`problem`, the analyses' own `inconclusive` rule): its signals say little, and a warm start from it
stays stuck (seen: a GAN saturated to white after a fix stayed blank for every later period), so when
it went bad after a warm start from a healthy period the runner retrains it from scratch in the next
one (`runner`).

The drift signals themselves compare periods (`drift`). Everything here is post-processing of the
period's DP release (generated samples), so it costs no ε; the analyses write their usual files
(analysis.json, samples.png, top_oov_words.csv) into the period's run, which the app shows.
"""

from __future__ import annotations

import os

import numpy as np

from fedgen_debug.runs import store

# Per kind: (signal name, is a share of the samples: its calibration is floored at the sampling sd).
SIGNALS = {"gan": (("dark_background_share", True), ("frechet_drift", False)),
           "char-lm": (("space_mass", True),),
           "word-lm": (("position_1_share_of_oov", True),)}
DRIFT = {"gan": "frechet_drift"}


def signal_names(auxiliary) -> list[str]:
    """"AUXILIARY/SIGNAL" names of one auxiliary, in a fixed order."""
    return [f"{auxiliary.name}/{name}" for name, _ in SIGNALS[auxiliary.kind]]


def measure(kind: str, run_dir: str, samples: int, seed: int) -> dict:
    """{"signals": {name: value}, "thumbnail": {...}, **drift input} of a finished period run."""
    return {"gan": _measure_gan, "char-lm": _measure_char, "word-lm": _measure_word}[kind](run_dir, samples, seed)


def _measure_gan(run_dir: str, samples: int, seed: int) -> dict:
    from fedgen_debug.analysis.gan_report import analyze_gan

    report = analyze_gan(run_dir, samples=samples, seed=seed)
    current, evidence = report["current"], report["evidence"]
    return {"signals": {"dark_background_share": current["dark_background"]["share"]},
            "quality": {"frechet_distance_to_clean": current["quality"]["frechet_distance"],
                        "blank_share": evidence["blank"]["current"]["share"],
                        "noise_share": evidence["noise"]["current"]["share"],
                        "no_background_share": evidence["no_background"]["current"]["share"]},
            "thumbnail": {"samples_png": os.path.relpath(store.released(run_dir, store.SAMPLES_PNG), run_dir)},
            "samples": samples}


def problem(kind: str, measured: dict) -> str | None:
    """Why an auxiliary's period output shows it has not learned its data (None: it looks healthy)."""
    from fedgen_debug.analysis.gan_analysis import INCONCLUSIVE_SHARE

    quality = measured.get("quality", {}) if kind == "gan" else {}
    for what, key in (("blank", "blank_share"), ("noise", "noise_share"),
                      ("without a background", "no_background_share")):
        share = quality.get(key, 0.0)
        if share > INCONCLUSIVE_SHARE:
            return f"{share:.0%} of its samples were {what} (it had not learned its data)"
    return None


def gan_features(run_dir: str) -> np.ndarray:
    """The primary CNN's features of the samples `_measure_gan` drew (re-read from the release)."""
    from fedgen_debug.models import cnn
    from fedgen_debug.models.gan import to_unit
    from fedgen_debug.training import primary_cnn

    (images,) = store.load_arrays(store.released(run_dir, store.SAMPLES_NPZ))
    primary = primary_cnn.load_primary_cnn(store.released(run_dir, store.PRIMARY))
    return cnn.features(primary, to_unit(images))


def _measure_char(run_dir: str, samples: int, seed: int) -> dict:
    from fedgen_debug.analysis.lm_analysis import analyze_lm

    report = analyze_lm(run_dir, samples=samples, seed=seed)
    top = [{"word": t["word"], "probability": t["probability"]} for t in report["current"]["top_k"][:10]]
    return {**verdict_signals("char-lm", report["current"]), "thumbnail": {"top_oov_words": top}}


def _measure_word(run_dir: str, samples: int, seed: int) -> dict:
    from fedgen_debug.analysis.lm_analysis import analyze_lm

    report = analyze_lm(run_dir, samples=samples, seed=seed)
    return {**verdict_signals("word-lm", report["current"]),
            "thumbnail": {"phrases_with_unk": report["current"]["phrases_with_unk"][:5]}}


def verdict_signals(kind: str, body: dict) -> dict:
    """{"signals": {name: value}, "samples": n} of an LM's analysis body (`lm_analysis.analyze_model`):
    its verdict statistic and the draws that share is of, which the threshold's sampling sd counts
    (char-LM: the sampled words; word-LM: the OOV tokens sampled at positions 1-8)."""
    from fedgen_debug.analysis.lm_analysis import position_one_share

    if kind == "char-lm":
        return {"signals": {"space_mass": body["space_mass"]}, "samples": body["samples"]}
    first, oov = position_one_share(body)
    return {"signals": {"position_1_share_of_oov": first / max(oov, 1)}, "samples": max(oov, 1)}
