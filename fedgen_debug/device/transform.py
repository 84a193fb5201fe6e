"""One interface for what a device does to its own data before anything leaves it.

Bugs (`pixels.PixelInversionBug`, `tokenization.TokenizationBug`), a rollout's stage
(`rollout.Rollout.at`) and canary insertion (`canaries.ThakkarInsertion`) are all `DeviceTransform`s:
a frozen dataclass of public settings (which share they hit and the seed that picks it; canaries: the
run secret) with

- `apply(client_data) -> client_data`: the data as the devices hold it afterwards. Lazy and per device
  (a device's examples are transformed when someone asks for them), same client ids, same element
  structure, same number of examples per device;
- `affected_devices(client_data) -> frozenset`: the devices whose data changed. Ground truth, for tests
  and evaluation scripts only: no modeler-facing output shows it;
- `as_fixed()`: the same deployment after the modeler's fix (the identity).

`local` says whether a device's output depends on its own id and data alone (an app update each device
draws for itself, as `rollout` does) or on the whole population (exactly round(fraction·N) devices, as
the paper's inversion bug picks them). `tests/test_device_transforms.py` is the contract every one of
them passes.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from fedgen_debug.seeding import client_rng

if TYPE_CHECKING:
    import tensorflow as tf
    import tensorflow_federated as tff

# TensorFlow and the data layer are imported inside the functions that build datasets: the catalog of bugs
# (`catalog.parse_bug`) then parses and validates `--bug` before TensorFlow loads (`cli.preflight`).

ArraysFn = Callable[[str, collections.OrderedDict], collections.OrderedDict]


class DeviceTransform(Protocol):
    local: ClassVar[bool]

    def apply(self, client_data: tff.simulation.datasets.ClientData) -> tff.simulation.datasets.ClientData: ...

    def affected_devices(self, client_data: tff.simulation.datasets.ClientData) -> frozenset[str]: ...

    def as_fixed(self) -> "DeviceTransform": ...


def exact_share(client_ids: Iterable[str], fraction: float, seed: int, stream: int) -> frozenset[str]:
    """Exactly round(fraction·N) of the devices, chosen by (seed, stream) among the sorted ids."""
    ids = sorted(client_ids)
    count = int(round(fraction * len(ids)))
    chosen = np.random.default_rng([seed, stream]).permutation(len(ids))[:count]
    return frozenset(ids[i] for i in chosen)


def device_draw(seed: int, client_id: str, stream: int) -> float:
    """The device's own uniform draw in [0, 1): a device is hit when its draw is below the fraction, so
    shares are nested (the 5% are among the 20%) and stable when devices join or leave."""
    return float(client_rng(seed, client_id, stream).random())


def per_device(source: tff.simulation.datasets.ClientData, transform_arrays: ArraysFn,
               devices: frozenset[str] | None = None) -> tff.simulation.datasets.ClientData:
    """`source` with `transform_arrays(client_id, arrays)` applied on each device (only on `devices`
    when given: the others are passed through untouched)."""

    def arrays_fn(client_id: str, arrays) -> collections.OrderedDict:
        if devices is not None and client_id not in devices:
            return arrays
        return transform_arrays(client_id, collections.OrderedDict(arrays))

    import tensorflow as tf

    from fedgen_debug.data import client_data as cd

    def dataset_fn(client_id) -> tf.data.Dataset:
        if tf.is_tensor(client_id):
            client_id = client_id.numpy().decode()
        if devices is not None and client_id not in devices:
            return source.create_tf_dataset_for_client(client_id)
        arrays = arrays_fn(client_id, cd.client_numpy(source, client_id))
        return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(arrays))

    return cd.DevicePreprocessedClientData(source, dataset_fn, arrays_fn)


def changed_devices(before: tff.simulation.datasets.ClientData,
                    after: tff.simulation.datasets.ClientData) -> frozenset[str]:
    """The devices whose arrays differ between two views of the same clients (ground truth)."""
    from fedgen_debug.data import client_data as cd

    changed = set()
    for client_id in before.client_ids:
        a, b = cd.client_numpy(before, client_id), cd.client_numpy(after, client_id)
        if any(not np.array_equal(a[k], b[k]) for k in a):
            changed.add(client_id)
    return frozenset(changed)


def text_of(arrays) -> list[str]:
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in arrays["text"]]


def with_text(arrays, sentences: list[str]) -> collections.OrderedDict:
    from fedgen_debug.data import client_data as cd

    out = collections.OrderedDict(arrays)
    out["text"] = cd.text_examples(sentences)["text"]
    return out
