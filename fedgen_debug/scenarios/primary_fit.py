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
present: each device reports which of the primary model's classes it holds (a 0/1 vector, on the
device), the server releases the noised number of devices per class (`LABELS_PRESENT_NOISE`, one
Gaussian release charged to the ledger), and a class counts as present when its noised count is over
`PRESENT_SDS` standard deviations (a class nobody holds is counted with probability 0.13%). With
too few devices for the noise (fewer than 12·√K), K is the primary model's number of outputs,
and the report says so.
"""

from __future__ import annotations

import os

import numpy as np

from fedgen_debug.privacy import aggregates
from fedgen_debug.runs import store
from fedgen_debug.scenarios import gan_data

NEAR_CHANCE_SKILL = 0.1
LABELS_PRESENT_NOISE = 4.0
PRESENT_SDS = 3.0


def labels_present_spec(classes: int) -> aggregates.BoundedSum:
    """The DP release of how many devices hold each of the model's `classes` labels."""
    if classes < 2:
        raise ValueError(f"classes must be >= 2. Found {classes}.")
    return aggregates.BoundedSum("labels-present", (1.0,) * classes, LABELS_PRESENT_NOISE)


def label_presence(client_data, client_ids, classes: int) -> np.ndarray:
    """On each device: [n_devices, classes] 0/1, whether the device holds an example of each class."""
    records = np.zeros((len(client_ids), classes))
    for row, cid in enumerate(client_ids):
        labels = gan_data.device_examples(client_data, cid, classes)["label"]
        records[row, np.unique(labels).astype(int)] = 1.0
    return records


def classes_present(noised_counts, stddev, devices: int) -> int | None:
    """The classes whose noised device count is over `PRESENT_SDS` standard deviations (at least 2).
    None when the noise could hide a class that every one of the `devices` holds (fewer devices than
    2·`PRESENT_SDS` σ = 12·√K at z = 4): a partial count would understate K and so overstate chance."""
    counts, stddev = np.asarray(noised_counts, np.float64), np.broadcast_to(stddev, np.shape(noised_counts))
    if devices < 2 * PRESENT_SDS * float(np.max(stddev)):
        return None
    return max(2, int(np.sum(counts > PRESENT_SDS * stddev)))


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
                        "really run (--primary)")
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
