"""Which of the primary model's classes the users hold, as a DP count (the K of `analysis.primary_fit`).

Each device reports which of the primary model's classes it holds (a 0/1 vector, on the
device), the server releases the noised number of devices per class (`LABELS_PRESENT_NOISE` at 100
devices, scaled with their number: `aggregates.scaled_noise`; one Gaussian release charged to the
ledger), and a class counts as present when its noised count is over `PRESENT_SDS` standard deviations (a class nobody holds is counted with probability 0.13%). With
too few devices for the noise (fewer than 12·√K), K is the primary model's number of outputs,
and the report says so.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug.device import gan_data
from fedgen_debug.privacy import aggregates
from fedgen_debug.validation import check_at_least

LABELS_PRESENT_NOISE = 4.0
PRESENT_SDS = 3.0


def labels_present_spec(classes: int, devices: int) -> aggregates.BoundedSum:
    """The DP release of how many of `devices` devices hold each of the model's `classes` labels."""
    check_at_least("classes", classes, 2)
    return aggregates.BoundedSum("labels-present", (1.0,) * classes,
                                 aggregates.scaled_noise(LABELS_PRESENT_NOISE, devices))


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
    2·`PRESENT_SDS` σ = 12·√K at z = 4, the same share of them at any number): a partial count would
    understate K and so overstate chance."""
    counts, stddev = np.asarray(noised_counts, np.float64), np.broadcast_to(stddev, np.shape(noised_counts))
    if devices < 2 * PRESENT_SDS * float(np.max(stddev)):
        return None
    return max(2, int(np.sum(counts > PRESENT_SDS * stddev)))
