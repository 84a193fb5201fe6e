"""The pixel-inversion bug of paper §6: an app update flips pixel intensities on some devices.

Exactly `round(fraction * N)` devices are affected, chosen by `seed` among the sorted client ids;
on those devices every image becomes `1 - pixels` inside the device's own data pipeline, before the
primary model (or anything else) sees it. A `DeviceTransform` (`device.transform`).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import TYPE_CHECKING, ClassVar

from fedgen_debug import rng_streams
from fedgen_debug.device.transform import exact_share
from fedgen_debug.validation import check_fraction

if TYPE_CHECKING:
    import tensorflow_federated as tff


def invert_pixels(examples) -> collections.OrderedDict:
    """One device's examples (arrays or a tf.data element) with every image inverted."""
    out = collections.OrderedDict(examples)
    out["pixels"] = 1.0 - examples["pixels"]
    return out


def inverted_on(client_data: tff.simulation.datasets.ClientData,
                devices: frozenset[str]) -> tff.simulation.datasets.ClientData:
    """`client_data` with the images of `devices` inverted (a tf.data map for datasets: no copy)."""
    import tensorflow as tf   # where used, as in device.transform

    from fedgen_debug.data import client_data as cd

    source = client_data

    def dataset_fn(client_id) -> tf.data.Dataset:
        if tf.is_tensor(client_id):
            client_id = client_id.numpy().decode()
        ds = source.create_tf_dataset_for_client(client_id)
        return ds.map(invert_pixels) if client_id in devices else ds

    def arrays_fn(client_id: str, arrays) -> collections.OrderedDict:
        return invert_pixels(arrays) if client_id in devices else arrays

    return cd.DevicePreprocessedClientData(source, dataset_fn, arrays_fn)


@dataclasses.dataclass(frozen=True)
class PixelInversionBug:
    fraction: float
    seed: int = 0
    fixed: bool = False
    local: ClassVar[bool] = False   # exactly round(fraction·N) devices: depends on who else is there

    def __post_init__(self):
        check_fraction(self.fraction)

    def as_fixed(self) -> "PixelInversionBug":
        return dataclasses.replace(self, fixed=True)

    def affected_clients(self, client_ids) -> frozenset[str]:
        """Ground truth: the devices running the buggy update (evaluation only)."""
        return frozenset() if self.fixed else exact_share(client_ids, self.fraction, self.seed, rng_streams.PIXEL_INVERSION)

    def affected_devices(self, client_data) -> frozenset[str]:
        return self.affected_clients(client_data.client_ids)

    def apply(self, client_data: tff.simulation.datasets.ClientData) -> tff.simulation.datasets.ClientData:
        """`client_data` as the devices see it after the update."""
        return inverted_on(client_data, self.affected_clients(client_data.client_ids))
