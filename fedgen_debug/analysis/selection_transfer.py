"""A selection pair's training noise where no clean pairs of its selections were measured for its primary
model or data: the replicate noise of its runs' data and generator, scaled by how much more clean selection
pairs vary than replicate pairs where both were measured.

Why. A T4 pair (the high- against the low-accuracy users' GAN) differs without a bug: other users, another
class mix, and GANs on fewer users vary more from training to training; so does a T2 pair (the correctly
classified against the misclassified examples' GAN). The shipped selection calibrations (`gan-demo-t4`,
`gan-demo-t2`) measured that for the tool's stand-in CNN on its synthetic writers, and their offsets belong to
that model and data (`calibration_store.selection_mismatch`). A modeler's own model on their own data had no
calibration at all, so `diagnose` answered "cannot tell" for the paper's own pair (docs/analysis.md,
2026-12-06). Measured at the demo preset on the synthetic writers, clean T4 pairs vary 0.7-4.1× as much as
replicate pairs, property by property, about offsets of up to 2.1 replicate noises.

The transfer, property by property (`selection_from_replicate`):
- noise: the runs' replicate noise (their data's own, or widened for data none of its sources is) times
  `selection τ_upper / reference τ_upper`, at least 1 (a GAN on some of the users varies no less than one on
  all of them; a ratio under 1 is the estimates' own noise);
- offset: 0, its size counted as noise instead (`offset_error` = |μ| and its error, in reference noises, on
  the runs' replicate noise): another model or other data may move it either way, or not at all;
- what the primary model reads (`MODEL_READ`: the class mix, the confidence) is left out, never called: how
  the users one model chose differ in the class mix another sees is not a training noise of anything measured.
The threshold is the selection calibration's (its clean pairs' own tails), at least Bonferroni's.

Measured (docs/analysis.md, 2026-12-07, later) on real FEMNIST with a Keras model the tool did not build, T4 at
150 rounds: 1 false alarm in 23 clean pairs with healthy GANs (replicate noise alone: 12 of 19), a ruled line on
half the writers found with its family first; a rotation and a blur of half the writers stay under it, which a
calibration of the model's own clean pairs (`fedgen-debug calibrate --pairs`) finds. On scikit-learn's digits,
whose low-accuracy side held 7-14 users, it alarmed on 4 of 4 clean pairs: `calibration_store.transfer` needs 20
users a side.
"""

from __future__ import annotations

import dataclasses
import math

from fedgen_debug.analysis.calibration import Calibration, PropertyNoise, threshold_for
from fedgen_debug.analysis.image_properties import CLASSIFIER_PROPERTIES

MODEL_READ = tuple(p.name for p in CLASSIFIER_PROPERTIES)   # what the primary model sees: class mix, confidence


def noise_ratio(selection: PropertyNoise, reference: PropertyNoise) -> float:
    """How many reference (replicate) noises one selection noise is, at least 1; 1 where neither varies."""
    if reference.training_noise_upper <= 0.0:
        return 1.0 if selection.training_noise_upper <= 0.0 else math.inf
    return max(1.0, selection.training_noise_upper / reference.training_noise_upper)


def offset_in_noises(selection: PropertyNoise, reference: PropertyNoise) -> float:
    """The selection pairs' offset and its standard error, together, in reference noises (0 where neither
    varies)."""
    size = math.hypot(selection.offset, selection.offset_error)
    if reference.training_noise_upper <= 0.0:
        return 0.0 if size == 0.0 else math.inf
    return size / reference.training_noise_upper


def selection_from_replicate(selection: Calibration, reference: Calibration, replicate: Calibration) -> Calibration:
    """The selection noise for runs calibrated by `replicate` (their data's replicate noise, already narrowed or
    widened for their data: `Calibration.for_data`), from `selection` (clean selection pairs) and `reference`
    (replicate pairs of the same data and settings as `selection`'s, up to the rounds: the noise `selection`
    is a multiple of). Module docstring. Properties any of the three lacks, or whose ratio is unbounded, are
    left out (never called)."""
    properties = {}
    for name, own in replicate.properties.items():
        if name in MODEL_READ or name not in selection.properties or name not in reference.properties:
            continue
        ratio = noise_ratio(selection.properties[name], reference.properties[name])
        offset = offset_in_noises(selection.properties[name], reference.properties[name])
        if not (math.isfinite(ratio) and math.isfinite(offset)):
            continue
        properties[name] = PropertyNoise(
            offset=0.0, training_noise=own.training_noise * ratio,
            training_noise_upper=own.training_noise_upper * ratio,
            pairs=min(own.pairs, selection.properties[name].pairs), offset_error=offset * own.training_noise_upper,
            relative_noise=None if own.relative_noise is None else own.relative_noise * ratio)
    if not properties:
        raise ValueError(f"{selection.name}, {reference.name} and {replicate.name} share no property to transfer.")
    return dataclasses.replace(
        replicate, name=f"{selection.name} via {replicate.name}", pair_type="selection", properties=properties,
        degrees_of_freedom=min(selection.degrees_of_freedom, replicate.degrees_of_freedom),
        z_threshold=max(selection.z_threshold, threshold_for(len(properties))), false_alarms=None, by_source=None,
        source={**replicate.source, "selections": selection.source.get("selections"),
                "transfer": {"selection": selection.name, "reference": reference.name, "replicate": replicate.name,
                             "left_out": [n for n in MODEL_READ if n in replicate.properties]}})
