"""Does the primary CNN fit the users' data? A check on the T4 thresholds before anyone trusts a verdict.

T4 selects users by the primary model's accuracy on their data, against DP quantiles of those
accuracies measured before the update (paper Table 10). If the model does not fit the data (another
script, another label set, a stand-in trained on other handwriting), every user sits near chance:
"low-accuracy users" are then just users, and a verdict, right or wrong, is not about the bug. Seen on
real FEMNIST with the synthetic stand-in: quantiles of 4-5% for 62 classes, and the DP 75th
percentile below the DP 25th. Two checks, both on released values only:

- **near chance**: a threshold's skill, (accuracy − 1/K) / (1 − 1/K), is below `NEAR_CHANCE_SKILL`
  (0 = guessing among K classes, 1 = perfect; 62 classes: accuracy below 11.5%; 10 classes: 19%).
- **crossed**: the low threshold (25th percentile, or the run's own lower quantile) is not below the
  high one (75th): the two DP estimates are noise, or everyone is the same.

K, the number of classes in the users' data, is the modeler's (`classes=`) or a DP count of the labels
present (`device.label_presence`).
"""

from __future__ import annotations

import os

from fedgen_debug.runs import store

NEAR_CHANCE_SKILL = 0.1


def skill(accuracy: float, classes: int) -> float:
    """Accuracy above chance, scaled: 0 at 1/classes, 1 at 1."""
    chance = 1.0 / classes
    return (accuracy - chance) / (1.0 - chance)


def check(thresholds: dict, classes: int, classes_source: str) -> dict:
    """The fit check of one run's or one pair's T4 thresholds {quantile: DP accuracy}; `warnings` is
    empty when the model fits."""
    if classes < 2:
        raise ValueError(f"classes must be >= 2. Found {classes}.")
    thresholds = {float(q): float(v) for q, v in thresholds.items()}
    chance = 1.0 / classes
    near = sorted(q for q, v in thresholds.items() if skill(v, classes) < NEAR_CHANCE_SKILL)
    # A lower quantile's DP value at or above a higher one's (the paper's 25th vs 75th, or a sharper cut).
    ordered = [thresholds[q] for q in sorted(thresholds)]
    crossed = any(low >= high for low, high in zip(ordered, ordered[1:]))
    named = ", ".join(f"{q:.0%} quantile {thresholds[q]:.1%}" for q in sorted(thresholds))
    warnings = []
    if near:
        warnings.append(f"the primary model is near chance on these users ({named} of user accuracy, DP; "
                        f"chance is {chance:.1%} for {classes} classes, {classes_source}): low- and high-accuracy "
                        "users are not told apart by a bug, so a verdict says little; pass the model the users "
                        "really run (--primary), and check both pixel conventions: the data's paper colour "
                        "(npz:PATH,background=black when 0 is paper) and the model's (--primary-background, "
                        "--primary-scale): one of them wrong shows every image inverted to the model")
    if crossed:
        warnings.append(f"the low-accuracy threshold is not below the high one ({named}, DP): the selection "
                        "cannot separate the users; pass the model the users really run (--primary)")
    return {"thresholds": {f"{q:g}": v for q, v in sorted(thresholds.items())}, "classes": classes,
            "classes_source": classes_source, "chance": chance, "near_chance": bool(near),
            "crossed": bool(crossed), "warnings": warnings}


def released_fit(run_dir: str) -> dict | None:
    """The run's released check (`train_gan` writes it), or None for a run without DP T4 thresholds."""
    path = store.released(run_dir, store.PRIMARY_FIT)
    return store.read_json(path) if os.path.exists(path) else None


def pair_check(current: dict | None, reference: dict | None) -> dict | None:
    """The check of two runs' fits together (e.g. low- and high-accuracy GANs, each with its own
    quantile): None when neither has one."""
    fits = [f for f in (current, reference) if f]
    if not fits:
        return None
    thresholds = {q: v for f in fits for q, v in f["thresholds"].items()}
    return check(thresholds, fits[0]["classes"], fits[0]["classes_source"])
