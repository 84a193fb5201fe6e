"""A verdict in plain words: the statistic, its value for each run, the test's z against its threshold,
and what that means, from a released analysis.json (LM or GAN)."""

from __future__ import annotations

import os

from fedgen_debug.stats import indistinguishable_from_empty

DEFAULT_Z_THRESHOLD = 3.0  # `fedgen_debug.stats.Z_THRESHOLD`, for analyses from before it was recorded


def _name(part: dict | None, fallback: str) -> str:
    """A run's directory name (e.g. with_bug-low-accuracy) from its part of the analysis."""
    run_dir = (part or {}).get("run_dir")
    return f"`{os.path.basename(os.path.normpath(run_dir))}`" if isinstance(run_dir, str) else fallback


def _share(part: dict | None) -> str:
    return "–" if not part else f"{part['share']:.0%} ({part['dark']}/{part['samples']})"


def gan_evidence(analysis: dict) -> dict:
    evidence = analysis["evidence"]
    z, threshold = evidence["z"], evidence.get("z_threshold", DEFAULT_Z_THRESHOLD)
    now, base = evidence["current"], evidence.get("reference")
    path = evidence.get("training_path") or {}   # analyses from before the path was tested have none
    names = {"current": _name(analysis.get("current"), "this GAN"), "reference": _name(analysis.get("compare"),
                                                                                       "the compared GAN")}
    against = (f"{names['reference']}: {_share(base)}" if base else "a 5% noise floor")
    if analysis.get("inconclusive"):
        why = ", ".join(f"{names[who]} draws mostly blanks" for who in evidence.get("mostly_blank", [])) or \
            ", ".join(f"{names[who]} draws mostly noise" for who in evidence.get("mostly_noise", [])) or \
            ", ".join(f"{names[who]} draws mostly textures without a background"
                      for who in evidence.get("mostly_no_background", []))
        meaning = f"Inconclusive: {why}; a GAN that did not learn its data says nothing about backgrounds."
        population = (analysis.get("current") or {}).get("population") or {}
        if "users" in population and indistinguishable_from_empty(population["users"], population["users_stddev"]):
            meaning += (f" Its selection cannot be told from an empty one (DP count ≈{population['users']:.0f} ± "
                        f"{population['users_stddev']:.0f} users): likely nobody is below the cut; a broader one "
                        "selects more.")
    elif analysis["pixel_inversion_suspected"] and not z > threshold and path.get("suspected"):
        # The final samples show the clean mode; the released snapshots along training did not.
        meaning = (f"Pixel inversion suspected along training: the snapshots after rounds "
                   f"{', '.join(map(str, path['dark_rounds']))} look white-on-black far more often (largest z = "
                   f"{path['max_z']:.2f} > {path['z_threshold']:.2f}, the threshold for {path['rounds_tested']} "
                   f"snapshots); the final samples show the other mode. Look at the round slider.")
    elif analysis["pixel_inversion_suspected"]:
        meaning = "Pixel inversion suspected: this population's images look white-on-black far more often."
    else:
        meaning = "No sign of pixel inversion: dark backgrounds are not significantly more frequent."
    return {"statistic": "dark-background share", "value": _share(now), "against": against, "z": z,
            "threshold": threshold,
            "sentence": f"{names['current']}: {_share(now)} of samples have a dark background; {against}. z = {z:.2f} "
                        f"{'>' if z > threshold else '≤'} {threshold:g}. {meaning}"}


def lm_evidence(analysis: dict) -> dict:
    evidence = analysis["evidence"]
    z, threshold = evidence["z"], evidence.get("z_threshold", DEFAULT_Z_THRESHOLD)
    current, baseline = analysis["current"], analysis.get("baseline")
    name, base_name = _name(current, "this LM"), _name(baseline, "the baseline")
    if evidence["statistic"] == "space_mass":
        value = f"{name}: {current['space_mass']:.1%} of sampled words contain a space"
        against = f"{base_name}: {baseline['space_mass']:.1%}" if baseline else "a noise floor"
        meaning = ("Tokenization bug suspected: the model generates words glued across a space."
                   if analysis["tokenization_bug_suspected"] else "No sign of words glued across a space.")
    else:
        first = current["oov_by_position"][0]
        value = f"{name}: position 1 OOV in {first['oov']}/{first['tokens']} sampled phrases"
        against = f"{base_name}'s position-1 share of OOV" if baseline else "positions 2-8"
        meaning = ("Tokenization bug suspected: first words of sentences are out of vocabulary unusually often."
                   if analysis["tokenization_bug_suspected"] else "No excess of out-of-vocabulary first words.")
        if analysis.get("inconclusive"):
            meaning = f"Inconclusive: {evidence['why']}."
    return {"statistic": evidence["statistic"].replace("_", " "), "value": value, "against": against, "z": z,
            "threshold": threshold,
            "sentence": f"{value}; {against}. z = {z:.2f} {'>' if z > threshold else '≤'} {threshold:g}. {meaning}"}


def explain(analysis: dict | None) -> dict | None:
    """The evidence of a GAN or LM analysis, or None when there is none to explain."""
    if not analysis or "evidence" not in analysis:
        return None
    try:
        return gan_evidence(analysis) if "pixel_inversion_suspected" in analysis else lm_evidence(analysis)
    except (KeyError, TypeError, IndexError, ZeroDivisionError):
        return None
