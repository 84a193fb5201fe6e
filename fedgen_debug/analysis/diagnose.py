"""`fedgen-debug diagnose RUN_A RUN_B`: how two auxiliaries' samples differ, ranked, with the samples to
look at (issue 55). RUN_A is the reference (before the update, high-accuracy or correctly classified
users), RUN_B the one under suspicion; every effect is B's against A's.

Reads released artefacts only: each run's released model (rebuilt by its loader), its released primary
model, and what the two named checks (`analyze_gan`, `analyze_lm`) release. Sampling is post-processing
of DP releases: no ε.

1. **Health.** An auxiliary whose samples are mostly blank, noise or without a background (GAN), or mostly
   empty (LM), has not learned its data: its differences are no evidence about the data, and the report
   says so instead of listing them as a data change.
2. **How they differ, ranked.** Every interpretable property of the samples (`image_properties`,
   `text_properties`; for images also the primary model's class mix and confidence) on both sides,
   compared and ranked by `differences` (Cliff's delta with its standard error, a Mann–Whitney z, the
   direction in words, the family from a fixed vocabulary). For text, the most distinctive words and
   character n-grams of each side (log-odds with an informative prior).
3. **Do they differ?** Two trainings of the same users with other secrets also differ, by far more than
   the samples' noise: each property's difference is set against that training noise, measured on clean
   replicate (or selection) pairs at the runs' training settings (`calibration`, `calibration_store`;
   `fedgen-debug calibrate`), and is significant beyond the Bonferroni threshold over all properties.
   Without a calibration for the runs' settings, against the samples' noise only, and the report says
   so (`calibration.calibrated: false`). The answer (`answer`): "yes" when a named check found its bug
   or, calibrated, a property is significant; "cannot tell" when an auxiliary is unhealthy or,
   uncalibrated, properties exceed only the samples' noise (clean pairs of trainings do that too), or a
   selection pair is calibrated by replicate pairs only (two selections differ more); else "no". `differ`
   is `answer == "yes"`.
4. **Named checks.** The two verdicts the tool had (`pixel_inversion_suspected`, `tokenization_bug_suspected`)
   with their own statistics and thresholds, unchanged. Each asks whether the suspect side shows its bug:
   B, except in a GAN pair of a side where the primary model fails and one where it works, given with
   its failing side first (`suspect_side`): the calibrated properties answer the same in either order.
5. **Evidence.** The samples of each side most unlike the other, along the significant properties (a
   grid for images, a list for text), and the effects drawn as a chart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from fedgen_debug.analysis import calibration as calibration_module
from fedgen_debug.analysis import differences, gan_analysis, image_properties, text_properties
from fedgen_debug.analysis.diagnosis_summary import found_its_bug
from fedgen_debug.runs import store

SCHEMA = "fedgen-debug/diagnosis/3"
# The report's JSON Schema (draft 2020-12), shipped with the package for whoever reads diagnosis.json.
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "diagnosis.schema.json")
EVIDENCE_SAMPLES = 16     # per side
UNHEALTHY_SHARE = gan_analysis.INCONCLUSIVE_SHARE


def run_kind(run_dir: str) -> str:
    """"gan", "char" or "word": what the run trained (from its released config)."""
    config = store.released_config(run_dir)
    if "gan" in config:
        return "gan"
    if "lm" in config:
        return config["lm"]["kind"]
    raise ValueError(f"{run_dir}: neither a GAN nor an LM run; diagnose compares two auxiliaries.")


def check_comparable(run_a: str, run_b: str) -> str:
    kinds = run_kind(run_a), run_kind(run_b)
    if kinds[0] != kinds[1]:
        raise ValueError(f"{run_a} is a {kinds[0]} run and {run_b} a {kinds[1]} run: diagnose compares two "
                         "auxiliaries of one kind.")
    return kinds[0]


# ---- samples -------------------------------------------------------------------------------------------
def released_samples(run_dir: str) -> np.ndarray:
    """The samples `analyze_gan` drew from the run and released (`samples.npz`), in [0, 1]: the named
    check draws them, so the properties are measured on the same images instead of drawing them again."""
    from fedgen_debug.models.gan import to_unit

    return to_unit(store.load_arrays(store.released(run_dir, store.SAMPLES_NPZ))[0])


def lm_samples(run_dir: str, samples: int, seed: int) -> list[str]:
    """char-LM: generated words; word-LM: generated sentences, out-of-vocabulary ids as "UNK"
    (`lm_analysis.sample_texts`). The named check (`analyze_lm`) draws the same samples and releases them:
    read, not drawn again, when they are these (`lm_analysis.released_texts`)."""
    from fedgen_debug.analysis import lm_analysis
    from fedgen_debug.training.lm_run import load_lm

    texts = lm_analysis.released_texts(run_dir, samples, seed)
    return texts if texts is not None else lm_analysis.sample_texts(*load_lm(run_dir), samples, seed)


def _primary_logits(run_dir: str, images: np.ndarray) -> np.ndarray | None:
    from fedgen_debug.models import cnn
    from fedgen_debug.training import primary_cnn

    path = store.released(run_dir, store.PRIMARY)
    if not os.path.exists(primary_cnn.info_path(path)):
        return None
    return cnn.logits(primary_cnn.load_primary_cnn(path), images)   # the tool's images: [0, 1], 1.0 = paper


# ---- health --------------------------------------------------------------------------------------------
def image_health(images: np.ndarray, trend: dict | None = None) -> dict:
    """Mostly blank, noise or background-less samples make an auxiliary unhealthy. A "blank" sample has ink
    on under 1% of its pixels at half contrast; of those, the faint ones (`faint` share) hold ink at
    `FAINT_INK_CONTRAST`, and the reason says so, because the samples cannot tell the two causes apart:
    a GAN still learning draws faint blobs (the evaluation's T4 GANs at rounds 30-40 of 150: 99-100% of
    samples faint), and so does one of data whose strokes were thinned (T4 on eroded digits after 150
    rounds: 69% blank, 49% faint; trained to 300 rounds, still 70-89% blank). Counting faint ink as drawn
    would call 141 of 205 such blank snapshots healthy, so the decision stays at half contrast; the
    modeler learns which kind of blank it is, and, given the run's `gan_analysis.training_trend`, whether
    the GAN was still changing (learning or diverging: train it longer, and see whether it settles on faint
    marks) or had settled (then a clean GAN stuck on faint marks and one of faint data still look alike)."""
    generator_range = 2.0 * images - 1.0   # gan_analysis reads the generator's range
    shares = {"blank": gan_analysis.blank_samples(generator_range)["share"],
              "noise": gan_analysis.noise_samples(generator_range)["share"],
              "no_background": gan_analysis.no_background_samples(generator_range)["share"]}
    bad = [name for name, share in shares.items() if share > UNHEALTHY_SHARE]
    half_ink, faint_ink = (gan_analysis.blank_samples(generator_range, contrast)
                           for contrast in (gan_analysis.INK_CONTRAST, gan_analysis.FAINT_INK_CONTRAST))
    no_ink, shares["faint"] = faint_ink["share"], (half_ink["blank"] - faint_ink["blank"]) / len(images)
    reason = f"mostly {' and '.join(n.replace('_', ' ') for n in bad)} samples" if bad else None
    if "blank" in bad and shares["faint"] > 0:
        reason += f" ({no_ink:.0%} without ink, {shares['faint']:.0%} with faint ink only: " + (
            "a GAN still learning draws faint samples, and so does one of data whose strokes are faint or thin)"
            if trend is None else _trend_words(trend) + ")")
    return {"healthy": not bad, "shares": shares, "reason": reason,
            **({} if trend is None else {"trend": trend})}


def _trend_words(trend: dict) -> str:
    first, last = trend["rounds"][0], trend["rounds"][-1]
    moves = (f"blank share {trend['blank_share'][0]:.0%} to {trend['blank_share'][-1]:.0%}, peak darkness "
             f"{trend['peak_darkness'][0]:.2f} to {trend['peak_darkness'][-1]:.2f}, pixels changing by up to "
             f"{max(trend['pixel_change']):.3f} per snapshot")
    if trend["still_changing"]:
        return (f"the GAN was still changing over rounds {first}-{last} ({moves}): train it longer; if it then "
                "settles on faint marks, its data's strokes may be faint or thin")
    return (f"the GAN had settled over rounds {first}-{last} ({moves}): faint or thin strokes in its data, "
            "or a GAN stuck on faint marks, which its samples cannot tell apart")


def run_trend(run_dir: str) -> dict | None:
    """`gan_analysis.training_trend` of a GAN run's released sample snapshots (None without enough)."""
    from fedgen_debug.analysis import gan_report

    return gan_analysis.training_trend(gan_report.snapshots(run_dir, last=gan_analysis.TREND_SNAPSHOTS))


def health(kind: str, samples) -> dict:
    """`image_health` of a GAN's images or `text_health` of an LM's texts (`kind`: "gan", "char", "word")."""
    return image_health(samples) if kind == "gan" else text_health(samples)


def text_health(samples: list[str]) -> dict:
    empty = float(np.mean([not s.strip() for s in samples])) if samples else 1.0
    bad = empty > UNHEALTHY_SHARE
    return {"healthy": not bad, "shares": {"empty": empty}, "reason": "mostly empty samples" if bad else None}


# ---- properties and differences ------------------------------------------------------------------------
def image_values(images: np.ndarray, logits: np.ndarray | None = None) -> dict:
    """Each image property's value per sample, each image's "ink_mass" (`image_properties.ink_masses`, not a
    property: what `compare_values` files the ink's level and width by), and, given the primary model's
    logits, the class it sees ("predicted_class", categorical) and its confidence."""
    values = {**image_properties.image_properties(images), "ink_mass": image_properties.ink_masses(images)}
    if logits is not None:
        seen = image_properties.classifier_properties(logits)
        values = {**values, "predicted_class": seen["predicted_class"], "confidence": seen["confidence"]}
    return values


def text_values(samples: list[str], kind: str | None = None, vocabulary: list[str] | None = None) -> dict:
    """Each text property's value per sample; given the LM's `kind`, samples its sampler cut at the length
    cap are known as such (`text_properties.cut_by_sampler`); given its run's `vocabulary` (a char-LM's),
    also the properties read against it (`text_properties.VOCABULARY_PROPERTIES`)."""
    if kind is None:
        return text_properties.text_properties(samples, vocabulary=vocabulary)
    from fedgen_debug.training.lm_run import MAX_LENGTH

    cut = text_properties.cut_by_sampler(samples, kind, MAX_LENGTH[kind])
    return text_properties.text_properties(samples, cut, vocabulary)


def run_vocabulary(kind: str, run_dir: str) -> list[str] | None:
    """A char-LM run's released vocabulary (most frequent first), which its words are read against; None for
    other runs or a run without one."""
    path = store.released(run_dir, store.VOCAB)
    return list(store.read_json(path)["words"]) if kind == "char" and os.path.exists(path) else None


def compare_values(kind: str, values_a: dict, values_b: dict) -> list[dict]:
    """Every property of B against A (`differences.compare`), not yet ranked; the primary model's class mix
    and confidence only when both sides have them."""
    if kind != "gan":   # "char", "word", or "text" (samples of no known LM)
        optional = {p.name for p in text_properties.VOCABULARY_PROPERTIES}   # measured given both vocabularies
        properties = [p for p in text_properties.properties_for(kind)
                      if p.name not in optional or (p.name in values_a and p.name in values_b)]
        return differences.compare_properties(properties, values_a, values_b)
    compared = differences.compare_properties(image_properties.IMAGE_PROPERTIES, values_a, values_b)
    paper_moved = image_properties.level_family(values_a, values_b) == "brightness"
    for row in compared:   # the mean of paper and ink is brightness only when the paper moved with it
        if row["property"] == "mid_level" and not paper_moved:
            row["family"] = "contrast"
            row["description"] += "; filed under contrast for this pair: the paper did not move, the ink's level did"
        # the ink's level and the strokes' width are sharpness when they moved and the ink's total stayed
        if row["family"] in ("contrast", "stroke") and image_properties.ink_spread(values_a, values_b, row["property"]):
            row["description"] += (f"; filed under sharpness for this pair, not {row['family']}: the ink's total "
                                   f"darkness stayed (the same ink spread or gathered: a blur or a resize, not a "
                                   f"fading or other strokes)")
            row["family"] = "sharpness"
    if "predicted_class" in values_a and "predicted_class" in values_b:
        mix, confidence = image_properties.CLASSIFIER_PROPERTIES
        compared.append({"property": mix.name, "family": mix.family, "description": mix.description,
                         **differences.compare_categories(values_a["predicted_class"], values_b["predicted_class"])})
        compared.append({"property": confidence.name, "family": confidence.family,
                         "description": confidence.description,
                         **differences.compare(values_a["confidence"], values_b["confidence"], confidence.lower,
                                               confidence.higher)})
    return compared


def rank(compared: list[dict], calibration) -> list[dict]:
    """Ranked by the calibrated z when there is a calibration, else by the samples' z (`differences.rank`)."""
    return differences.rank(compared) if calibration is None else calibration_module.apply(compared, calibration)


def image_differences(images_a, images_b, logits_a=None, logits_b=None, calibration=None):
    """(ranked comparisons, the values of each side by property) of two image sets."""
    values_a, values_b = image_values(images_a, logits_a), image_values(images_b, logits_b)
    return rank(compare_values("gan", values_a, values_b), calibration), values_a, values_b


def text_differences(samples_a: list[str], samples_b: list[str], calibration=None, kind: str | None = None,
                     vocabularies: tuple[list[str] | None, list[str] | None] = (None, None)):
    """(ranked comparisons, the values of each side by property) of two LMs' samples (`kind`: their LM's;
    `vocabularies`: each side's run's, `run_vocabulary`)."""
    values_a, values_b = (text_values(s, kind, v) for s, v in zip((samples_a, samples_b), vocabularies))
    return rank(compare_values(kind or "text", values_a, values_b), calibration), values_a, values_b


def run_values(kind: str, run_dir: str, samples: int, seed: int) -> tuple[dict, object]:
    """(property values, the samples) of one run, drawn as `diagnose` draws them: a GAN's `samples` images
    from the latent seed `seed` (what `analyze_gan` draws and releases), an LM's `samples` samples."""
    if kind == "gan":
        from fedgen_debug.models.gan import to_unit
        from fedgen_debug.training.gan_run import generate, load_generator

        generator, _ = load_generator(run_dir)
        images = to_unit(generate(generator, samples, seed))
        return image_values(images, _primary_logits(run_dir, images)), images
    texts = lm_samples(run_dir, samples, seed)
    return text_values(texts, kind, run_vocabulary(kind, run_dir)), texts


# ---- evidence ------------------------------------------------------------------------------------------
def unlike_scores(ranked: list[dict], values_a: dict, values_b: dict, top: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Per sample of each side, how far it lies towards B along the `top` significant numeric properties
    (each standardized by the pooled spread, signed by the direction of the difference): B's samples most
    unlike A have the highest scores, A's most unlike B the lowest."""
    used = [c for c in ranked if c["significant"] and c["property"] in values_a and c.get("kind") != "categories"][:top]
    n_a, n_b = len(next(iter(values_a.values()))), len(next(iter(values_b.values())))
    score_a, score_b = np.zeros(n_a), np.zeros(n_b)
    for c in used:
        a, b = np.asarray(values_a[c["property"]], float), np.asarray(values_b[c["property"]], float)
        pooled = np.concatenate([a, b])
        centre, spread = np.nanmedian(pooled), max(float(np.nanstd(pooled)), 1e-9)
        sign = 1.0 if c["effect"] > 0 else -1.0
        score_a += np.nan_to_num(sign * (a - centre) / spread)
        score_b += np.nan_to_num(sign * (b - centre) / spread)
    return score_a, score_b


def evidence_indices(score_a: np.ndarray, score_b: np.ndarray, count: int = EVIDENCE_SAMPLES):
    return np.argsort(score_a, kind="stable")[:count], np.argsort(-score_b, kind="stable")[:count]


def _chart(ranked: list[dict], path: str, top: int = 12) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedgen_debug.data.atomic import atomic_path

    rows = ranked[:top][::-1]
    families = sorted({c["family"] for c in rows})
    colours = {f: plt.cm.tab20(i % 20) for i, f in enumerate(families)}
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    calibrated = any(c.get("calibrated_z") is not None for c in rows)
    if calibrated:   # how far beyond the training noise, the threshold drawn
        ax.barh(range(len(rows)), [c.get("calibrated_z") or 0.0 for c in rows], color=[colours[c["family"]] for c in rows],
                edgecolor=["black" if c["significant"] else "none" for c in rows])
        threshold = rows[0]["z_threshold"] if rows else 0.0
        for x in (-threshold, threshold):
            ax.axvline(x, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xlabel("B vs A in units of the training noise (calibrated z)\ndashed: threshold; outlined: significant")
    else:
        ax.barh(range(len(rows)), [c["effect"] for c in rows], xerr=[1.96 * c["standard_error"] for c in rows],
                color=[colours[c["family"]] for c in rows],
                edgecolor=["black" if c["significant"] else "none" for c in rows])
        ax.set_xlim(-1.05, 1.05)
        ax.set_xlabel("effect of B vs A (Cliff's delta, 95% interval; samples' noise only)\noutlined: significant")
    ax.set_yticks(range(len(rows)), [f"{c['property']} ({c['family']})" for c in rows], fontsize=8)
    ax.axvline(0.0, color="gray", linewidth=0.8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


# ---- the report ----------------------------------------------------------------------------------------
def _check_named_report(report: dict, reference: str, suspect: str, samples: int, other: str, count) -> None:
    """A named check's report given to `diagnose` must be of this pair, the suspect analysed against the
    reference, with as many samples (the seed is not in the report: the caller's word)."""
    def same(x, y) -> bool:
        return x is not None and os.path.realpath(x) == os.path.realpath(y)

    current, compared = report.get("current", {}).get("run_dir"), report.get(other, {}).get("run_dir")
    if not (same(current, suspect) and same(compared, reference)):
        raise ValueError(f"named_report analyses {current} against {compared}; diagnose's named check analyses "
                         f"{suspect} against {reference}.")
    if count != samples:
        raise ValueError(f"named_report drew {count} samples a model; diagnose draws {samples}.")


def suspect_side(kind: str, run_a: str, run_b: str) -> str:
    """The side a named check reads as the suspect: "a" for a GAN pair whose A gathers where the primary
    model fails and B where it works (`diagnose LOW HIGH`, T2's misclassified first), else "b" (A the
    reference, B the suspect). The calibrated properties answer the same in either order
    (`calibration_store.in_order`); without this, the named check of a reversed pair asked whether the
    well-classified users' backgrounds were the dark ones."""
    from fedgen_debug.analysis.calibration_store import selections
    from fedgen_debug.selectors.registry import failing_then_working

    sides = selections(run_a, run_b) if kind == "gan" else None
    return "a" if sides and None not in sides and failing_then_working(*sides) else "b"


def _named_check(kind: str, run_a: str, run_b: str, samples: int, seed: int, named_report: dict | None = None) -> dict:
    """The named check's verdict on the suspect side (`suspect_side`) against the other; `named_report`: its
    report (`analyze_gan(suspect, reference)`, `analyze_lm(run_b, run_a)`) with these samples and seed, if the
    caller has just made it (the demo), else made here."""
    suspect = suspect_side(kind, run_a, run_b)
    current, reference = (run_a, run_b) if suspect == "a" else (run_b, run_a)
    if kind == "gan":
        from fedgen_debug.analysis.gan_report import analyze_gan

        if named_report is None:
            report = analyze_gan(current, reference, samples=samples, seed=seed)
        else:
            report = named_report
            _check_named_report(report, reference, current, samples, "compare",
                                report["evidence"]["current"]["samples"])
        evidence = report["evidence"]
        return {"name": "pixel_inversion_suspected", "family": "polarity", "suspect": suspect,
                "suspected": bool(report["pixel_inversion_suspected"]), "inconclusive": bool(report["inconclusive"]),
                "z": evidence["z"], "z_threshold": evidence["z_threshold"], "statistic": evidence["statistic"]}
    from fedgen_debug.analysis.lm_analysis import analyze_lm

    if named_report is None:
        report = analyze_lm(current, reference, samples=samples, seed=seed)
    else:
        report = named_report
        _check_named_report(report, reference, current, samples, "baseline", report["current"]["samples"])
    evidence = report["evidence"]
    return {"name": "tokenization_bug_suspected", "family": "spacing", "suspect": suspect,
            "suspected": bool(evidence["suspected"]), "inconclusive": bool(evidence.get("inconclusive")),
            "z": evidence["z"], "z_threshold": evidence["z_threshold"], "statistic": evidence["statistic"]}


def report_families(checks: list[dict], ranked: list[dict]) -> list[str]:
    """The families B differs in: first those of the named checks that found their bug (conclusively), then
    those of the significant properties, most significant first. A named check keeps its own statistic
    and threshold (nothing that worked before gets weaker): the word-LM's, the share of UNK at position 1
    among all UNK, is a ratio the training noise of the UNK rate cancels out of."""
    found = [c["family"] for c in checks if found_its_bug(c)]
    return list(dict.fromkeys(found + differences.significant_families(ranked)))


# What a named check's statistic reads beyond the bug it is named for. The word-LM's is UNK at position 1: glued
# first words raise it, and so does markup at the start of each line (docs/analysis.md, 2026-12-06: three
# text faults outside the catalog), or any prefix the vocabulary does not hold.
NAMED_CHECK_READS = {
    "position_1_share_of_oov": "its statistic is UNK at position 1: glued first words, or anything else new at the "
                               "start of sentences (markup, a prefix); a char-LM's samples show which",
}


def answer(checks: list[dict], ranked: list[dict], healthy: bool, calibrated: bool,
           replicate_for_selection: bool = False, within_tails: Sequence[str] = ()) -> tuple[str, str]:
    """("yes" | "no" | "cannot tell", why). A named check keeps its own statistic and threshold, so it
    answers without a calibration. A property beyond the samples' noise alone is no answer: two trainings
    of the same users with other secrets differ by more than that (both clean pairs of the real-ε runs of
    issue 56 were "different" by it), so uncalibrated, it says "cannot tell" and leaves the ranking as
    candidates; nothing beyond even the samples' noise is a "no" either way.
    `replicate_for_selection`: a selection pair (two sets of users) calibrated by replicate pairs only, for
    want of clean pairs of its selections at its settings. Two selections differ without a bug by more than
    that: at the demo preset the training noise of clean T4 pairs is 1.0-4.9× (median 2.2×) that of replicate
    pairs, about offsets of up to 1.9 replicate noises (`gan-demo-t4` against `gan-demo-replicate`), so a
    property beyond the replicate noise is a candidate, "cannot tell", as uncalibrated.
    `within_tails`: properties beyond Bonferroni's threshold but not beyond the calibration's, raised to its
    clean pairs' own (`calibration.clean_pairs_threshold`): clean pairs of this type get there more often
    than 1 in 20, so they are candidates, "cannot tell", not a "no"."""
    if not healthy:
        return "cannot tell", "an auxiliary is unhealthy: its samples are no evidence about the data"
    found = [c for c in checks if found_its_bug(c)]
    if found:
        reads = "".join(f" ({NAMED_CHECK_READS[c['statistic']]})" for c in found
                        if c.get("statistic") in NAMED_CHECK_READS)
        return "yes", f"the named check {', '.join(c['name'] for c in found)} found its bug{reads}"
    significant = [c["property"] for c in ranked if c["significant"]]
    if not significant and within_tails:
        return "cannot tell", (f"{len(within_tails)} properties beyond Bonferroni's threshold but within the "
                               f"largest differences clean pairs of this type reach ({', '.join(within_tails)})")
    if not significant:
        return "no", "no property beyond the threshold and no named check found its bug"
    if calibrated and replicate_for_selection:
        return "cannot tell", (f"{len(significant)} properties beyond the training noise of clean replicate pairs, "
                               "but these are two selections of users, which differ without a bug by more than that "
                               "(at the demo preset by a median 2.2x); calibrate clean pairs of these selections "
                               "(`fedgen-debug calibrate --pairs A:B A:B A:B ...`)")
    if calibrated:
        return "yes", f"{len(significant)} properties beyond the training noise of clean pairs"
    return "cannot tell", (f"{len(significant)} properties beyond the samples' noise, but clean pairs of "
                           "trainings differ that much too and no calibration covers these runs "
                           "(`fedgen-debug calibrate`)")


def _within_tails(ranked: list[dict], calibration) -> list[str]:
    """The properties beyond Bonferroni's threshold over the calibration's properties but not beyond its own
    (raised to its clean pairs' tails: `calibration.threshold_with_clean_pairs`)."""
    if calibration is None:
        return []
    bonferroni = calibration_module.threshold_for(len(calibration.properties))
    return [c["property"] for c in ranked if not c["significant"] and c.get("calibrated_z") is not None
            and abs(c["calibrated_z"]) > bonferroni]


def pair_type(kind: str, run_a: str, run_b: str) -> str:
    """"selection" when the two sides are different users by construction (a GAN pair of two selections,
    e.g. T4 low vs high accuracy), else "replicate" (before vs after, two populations of one kind)."""
    if kind != "gan":
        return "replicate"
    selections = {store.read_config(d)["gan"]["select"] for d in (run_a, run_b)}
    return "replicate" if len(selections) == 1 else "selection"


def _calibration_report(calibration, pair: str, note: str | None, threshold: float | None,
                        ranked: list[dict] = ()) -> dict:
    if calibration is None:
        return {"calibrated": False, "name": None, "pair_type": pair, "against": "sampling noise of the two sample sets",
                "clean_pairs": 0, "z_threshold": threshold, "false_alarms": None,
                "note": note or "two trainings of the same users with other secrets also differ; no calibration "
                                "for these runs"}
    alarms = calibration.false_alarms
    sources = calibration.source.get("sources", [])
    noise_of = (f", on {calibration.source['used']}" if calibration.source.get("used")
                else f", the widest of {len(sources)} sources" if len(sources) > 1 else "")
    if calibration.other_data:
        noise_of += ", widened to the samples' spread for data it did not measure"
    left_out = calibration.source.get("transfer", {}).get("left_out", [])   # said in the transfer's note
    unknown = [c["property"] for c in ranked if c["property"] not in calibration.properties
               and c["property"] not in left_out]
    if unknown:   # measured, shown, never called: a calibration older than these properties
        note = "; ".join(filter(None, [note, f"not in calibration {calibration.name}, so never called: "
                                       f"{', '.join(unknown)} (`fedgen-debug calibrate CLEAN_RUNS ... --supplement "
                                       f"{calibration.name}` adds them)"]))
    return {"calibrated": True, "name": calibration.name, "pair_type": calibration.pair_type,
            "against": f"training noise of clean {calibration.pair_type} pairs ({calibration.name}{noise_of})",
            "clean_pairs": next(iter(calibration.properties.values())).pairs,
            "degrees_of_freedom": calibration.degrees_of_freedom, "z_threshold": calibration.z_threshold,
            "false_alarms": None if alarms is None else {k: alarms[k] for k in ("pairs", "alarms", "rate_upper_95")},
            "note": note}


def diagnose(run_a: str, run_b: str, samples: int = 1000, seed: int = 0, calibration: str | None = None,
             named_report: dict | None = None) -> dict:
    """The diagnosis of B against A (module docstring), written to B's `released/diagnosis.json` (and its
    evidence and chart PNGs); returns it. `calibration`: a calibration file (`fedgen-debug calibrate`),
    "none" for the samples' noise only, or None for the calibration shipped for these runs, if any.
    `named_report`: the named check's report of this pair with these samples and seed (`analyze_gan(run_b,
    run_a)` or `analyze_lm(run_b, run_a)`, A and B swapped when A is the suspect: `suspect_side`), if the
    caller has just made it: not made again."""
    from fedgen_debug.analysis import calibration_store

    if samples < 20:
        raise ValueError(f"samples must be >= 20. Found {samples}.")
    kind = check_comparable(run_a, run_b)
    pair = pair_type(kind, run_a, run_b)
    chosen, note = calibration_store.choose(calibration, kind, pair, run_a, run_b)
    report = {"schema": SCHEMA, "kind": kind, "runs": {"a": run_a, "b": run_b}, "samples": samples, "seed": seed}
    checks = [_named_check(kind, run_a, run_b, samples, seed, named_report)]
    if kind == "gan":
        images = {side: released_samples(d) for side, d in (("a", run_a), ("b", run_b))}
        health = {side: image_health(images[side], run_trend(d)) for side, d in (("a", run_a), ("b", run_b))}
        logits = {side: _primary_logits(d, images[side]) for side, d in (("a", run_a), ("b", run_b))}
        ranked, values_a, values_b = image_differences(images["a"], images["b"], logits["a"], logits["b"], chosen)
    else:
        texts = {side: lm_samples(d, samples, seed) for side, d in (("a", run_a), ("b", run_b))}
        health = {side: text_health(t) for side, t in texts.items()}
        ranked, values_a, values_b = text_differences(texts["a"], texts["b"], chosen, kind,
                                                      (run_vocabulary(kind, run_a), run_vocabulary(kind, run_b)))
        report["distinctive_terms"] = text_properties.distinctive_terms(texts["a"], texts["b"], top=10)
    healthy = all(h["healthy"] for h in health.values())
    families = report_families(checks, ranked)
    said, why = answer(checks, ranked, healthy, chosen is not None,
                       replicate_for_selection=chosen is not None and chosen.pair_type != pair,
                       within_tails=_within_tails(ranked, chosen))
    report.update(
        health=health,
        calibration=_calibration_report(chosen, pair, note, ranked[0]["z_threshold"] if ranked else None, ranked),
        answer=said,
        answer_reason=why,
        differ=said == "yes",
        families=families,
        differences=ranked,
        checks=checks)
    if not healthy:
        report["unhealthy"] = {side: h["reason"] for side, h in health.items() if not h["healthy"]}
    score_a, score_b = unlike_scores(ranked, values_a, values_b)
    pick_a, pick_b = evidence_indices(score_a, score_b)
    if kind == "gan":
        gan_analysis.sample_grid_png(2.0 * images["a"][pick_a] - 1.0, store.released(run_b, store.DIAGNOSIS_A_PNG),
                                     rows=2, cols=EVIDENCE_SAMPLES // 2)
        gan_analysis.sample_grid_png(2.0 * images["b"][pick_b] - 1.0, store.released(run_b, store.DIAGNOSIS_B_PNG),
                                     rows=2, cols=EVIDENCE_SAMPLES // 2)
        report["evidence"] = {"a_png": store.released(run_b, store.DIAGNOSIS_A_PNG),
                              "b_png": store.released(run_b, store.DIAGNOSIS_B_PNG)}
    else:
        report["evidence"] = {"a": [texts["a"][i] for i in pick_a], "b": [texts["b"][i] for i in pick_b]}
    _chart(ranked, store.released(run_b, store.DIAGNOSIS_PNG))
    report["evidence"]["chart_png"] = store.released(run_b, store.DIAGNOSIS_PNG)
    store.write_json(store.released(run_b, store.DIAGNOSIS), report)
    return report
