"""The pixel-inversion bug of paper §6: an app update flips pixel intensities on some devices.

Exactly `round(fraction * N)` devices are affected, chosen by `seed` among the sorted client ids;
on those devices every image becomes `1 - pixels` inside the device's own data pipeline, before the
primary model (or anything else) sees it.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug.bugs._validation import check_fraction
from fedgen_debug.data import client_data as cd


def _invert(example):
    out = collections.OrderedDict(example)
    out["pixels"] = 1.0 - example["pixels"]
    return out


@dataclasses.dataclass(frozen=True)
class PixelInversionBug:
    fraction: float
    seed: int = 0
    fixed: bool = False

    def __post_init__(self):
        check_fraction(self.fraction)

    def as_fixed(self) -> "PixelInversionBug":
        return dataclasses.replace(self, fixed=True)

    def affected_clients(self, client_ids) -> frozenset[str]:
        """Ground truth: the devices running the buggy update (evaluation only)."""
        if self.fixed:
            return frozenset()
        ids = sorted(client_ids)
        count = int(round(self.fraction * len(ids)))
        chosen = np.random.default_rng([self.seed, 0x1A7]).permutation(len(ids))[:count]
        return frozenset(ids[i] for i in chosen)

    def apply(self, client_data: tff.simulation.datasets.ClientData) -> tff.simulation.datasets.ClientData:
        """`client_data` as the devices see it after the update."""
        affected = self.affected_clients(client_data.client_ids)
        source = client_data

        def dataset_fn(client_id) -> tf.data.Dataset:
            if tf.is_tensor(client_id):
                client_id = client_id.numpy().decode()
            ds = source.create_tf_dataset_for_client(client_id)
            return ds.map(_invert) if client_id in affected else ds

        def arrays_fn(client_id: str, arrays) -> collections.OrderedDict:
            return _invert(arrays) if client_id in affected else arrays

        return cd.DevicePreprocessedClientData(source, dataset_fn, arrays_fn)

