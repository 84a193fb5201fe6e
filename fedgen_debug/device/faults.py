"""What the on-device pipeline faults (`image_faults`, `text_faults`) share: which devices are hit, and
the `DeviceTransform` plumbing around one device's arrays.

A fault is a frozen dataclass `(fraction, seed=0, fixed=False, <public settings with defaults>)`. A device
runs the faulty pipeline when its own draw (`transform.device_draw`, on a stream of the fault's name) is
below `fraction`: shares are nested and the fault is `local` (a device's output depends on its id and data
alone). On a hit device every example goes through `device_arrays`; the other devices are untouched.

`affected_devices` is the ground truth of the contract: the hit devices whose data the fault changed (an
`entities` fault does not change a device whose sentences hold no `&'"<>`). Evaluation only.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from fedgen_debug.device.transform import device_draw, per_device
from fedgen_debug.validation import check_fraction

if TYPE_CHECKING:
    import tensorflow_federated as tff

# Fields every fault has; the others are the fault's public settings (`settings`).
COMMON_FIELDS = ("fraction", "seed", "fixed")


def fault_stream(name: str) -> int:
    """The random stream of a fault, from its name: one rule instead of a constant per fault, and two
    faults never share whose devices they hit."""
    return int.from_bytes(hashlib.sha256(f"device-fault/{name}".encode()).digest()[:4], "little")


@dataclasses.dataclass(frozen=True)
class DeviceFault:
    """Base of the catalog's faults; subclasses set `name` and `modality` and define `device_arrays`."""
    fraction: float
    seed: int = 0
    fixed: bool = False
    local: ClassVar[bool] = True
    name: ClassVar[str] = ""
    modality: ClassVar[str] = ""

    def __post_init__(self):
        check_fraction(self.fraction)

    @property
    def stream(self) -> int:
        return fault_stream(self.name)

    def settings(self) -> dict[str, object]:
        """The fault's public settings beyond fraction/seed/fixed (what `NAME:FRACTION,key=value` sets)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in COMMON_FIELDS}

    def as_fixed(self) -> "DeviceFault":
        """The same deployment after the fix: every device's pipeline is correct again."""
        return dataclasses.replace(self, fixed=True)

    def is_hit(self, client_id: str) -> bool:
        """Whether this device runs the faulty pipeline (its own draw: nested shares, local)."""
        return not self.fixed and device_draw(self.seed, client_id, self.stream) < self.fraction

    def hit_devices(self, client_ids) -> frozenset[str]:
        return frozenset(cid for cid in client_ids if self.is_hit(cid))

    def device_arrays(self, client_id: str, arrays: collections.OrderedDict) -> collections.OrderedDict:
        """One hit device's examples after the faulty pipeline (same keys, shapes and dtypes)."""
        raise NotImplementedError

    def apply(self, client_data: tff.simulation.datasets.ClientData) -> tff.simulation.datasets.ClientData:
        if self.fixed or self.fraction == 0.0:
            return client_data
        return per_device(client_data, self.device_arrays, devices=self.hit_devices(client_data.client_ids))

    def affected_devices(self, client_data: tff.simulation.datasets.ClientData) -> frozenset[str]:
        """Ground truth: the hit devices whose data changed (evaluation only)."""
        from fedgen_debug.data import client_data as cd   # TensorFlow where used (device.transform)

        changed = set()
        for client_id in self.hit_devices(client_data.client_ids):
            before = cd.client_numpy(client_data, client_id)
            after = self.device_arrays(client_id, collections.OrderedDict(before))
            if any(not np.array_equal(before[k], after[k]) for k in before):
                changed.add(client_id)
        return frozenset(changed)


def setting_types(cls: type[DeviceFault]) -> dict[str, type]:
    """The public settings of a fault class and their types (for parsing `key=value`)."""
    types = {"float": float, "int": int, "str": str}
    return {f.name: types[f.type if isinstance(f.type, str) else f.type.__name__]
            for f in dataclasses.fields(cls) if f.name not in COMMON_FIELDS}
