"""On-device data preparation for the GAN scenario (paper §6, App. C.3 and C.4).

Each device runs the shipped primary CNN on its own (possibly buggy) images: per-example
correctness and confidence, and the user's accuracy (the share classified correctly). A selector
(T4 `ByUserMetric` on accuracy, T2 `ByExampleCorrectness`, T1 `RandomExamples`, ...) then decides on
the device which images train the auxiliary GAN. Under strict selection the server learns nothing of
it: a sampled device that does not qualify trains on nothing; the subpopulation's size is released
only as DP counts (`experiments.gan.selection_counts`).

T4 thresholds: the modeler's, or DP quantiles of the users' accuracies measured *without* the bug
(paper: 25th/75th percentile, Table 10; `fedgen_debug.privacy.quantile`, charged to the ledger).

The app only classifies characters in the CNN's label set: a digits-only CNN (10 classes) sees a
device's digits, and letters never enter its metrics or the GAN's data.

GAN images are `2 * pixels - 1`, float32 [n, 28, 28, 1] in [-1, 1] (the generator's tanh range),
with +1 = white background as in the canonical format: a dark background still means "inverted".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from fedgen_debug.data import client_data as cd
from fedgen_debug.kept import KeptArrays
from fedgen_debug.models import cnn
from fedgen_debug.progress import progress
from fedgen_debug.selectors.base import Selector
from fedgen_debug.selectors.population import Population


def to_gan_range(pixels) -> np.ndarray:
    """Canonical pixels [n, 28, 28(, 1)] in [0, 1] → float32 [n, 28, 28, 1] in [-1, 1]."""
    return 2.0 * cnn.as_input(pixels) - 1.0


def device_examples(client_data, client_id: str, classes: int) -> dict:
    """The client's examples the app classifies (labels in 0..classes-1), as its device sees them."""
    arrays = cd.client_numpy(client_data, client_id)
    known = (arrays["label"] >= 0) & (arrays["label"] < classes)
    return {"pixels": np.asarray(arrays["pixels"])[known], "label": np.asarray(arrays["label"])[known]}


def device_outputs(model, examples: Mapping[str, np.ndarray]) -> dict:
    """The primary CNN's outputs on one device's examples: `correct` (bool [n]), `confidence` ([n])."""
    labels = np.asarray(examples["label"])
    logits = cnn.logits(model, examples["pixels"]).astype(np.float64) if len(labels) else np.zeros((0, 1))
    # The top-class softmax probability is 1 / sum(exp(logits - max logit)).
    confidence = 1.0 / np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)
    return {"correct": np.argmax(logits, axis=1) == labels, "confidence": confidence}


# Outputs kept per (model weights, device examples) within a process, at most this many bytes. Why: a
# GAN run measures T4's accuracies on the clean data and selects on the app's data, both with the primary
# CNN on every device (compute-bound, ~24 MFLOP an image), and the demo's four GAN runs do it on the same
# two versions of the same devices: 8 passes over 20K images where 2 give every answer.
DEVICE_OUTPUTS_CACHE_BYTES = 64 << 20
_outputs = KeptArrays(lambda: DEVICE_OUTPUTS_CACHE_BYTES)


def weights_key(model) -> bytes:
    """A digest of what the model computes: its class, each layer's class and configuration (names
    left out: Keras numbers them per process, so every load of the same file gets new ones), and its
    weights' shapes, dtypes and values, in order."""
    digest = hashlib.blake2b(type(model).__qualname__.encode(), digest_size=16)
    for layer in getattr(model, "layers", ()):
        config = {k: v for k, v in layer.get_config().items() if k != "name"}
        digest.update(json.dumps([type(layer).__qualname__, config], sort_keys=True, default=str).encode())
    for weight in getattr(model, "weights", ()):
        value = np.ascontiguousarray(weight.numpy())
        digest.update(repr((value.shape, value.dtype.str)).encode())
        digest.update(value.tobytes())
    return digest.digest()


def _examples_key(examples: Mapping[str, np.ndarray]) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for name in ("pixels", "label"):
        value = np.ascontiguousarray(examples[name])
        digest.update(repr((name, value.shape, value.dtype.str)).encode())
        digest.update(value.tobytes())
    return digest.digest()


def kept_device_outputs(model, model_key: bytes, examples: Mapping[str, np.ndarray]) -> dict:
    """`device_outputs(model, examples)` (read-only arrays), computed once per process for the same
    weights (`model_key = weights_key(model)`) and examples, within `DEVICE_OUTPUTS_CACHE_BYTES`."""
    return _outputs.get((model_key, _examples_key(examples)), lambda: device_outputs(model, examples))


def user_accuracy(outputs: Mapping[str, np.ndarray]) -> float | None:
    """The share of the user's examples classified correctly; None without examples."""
    correct = np.asarray(outputs["correct"], bool)
    return float(correct.mean()) if len(correct) else None


def user_accuracies(client_data, model) -> dict[str, float]:
    """Each user's accuracy, computed on their device (clients with no classified examples omitted).

    The input of `dp_quantile` for T4 thresholds, and of the paper's accuracy histogram (Fig. 5).
    """
    classes, model_key = cnn.num_classes(model), weights_key(model)
    out = {}
    for cid in progress(client_data.client_ids, desc="on-device accuracy", unit="client"):
        value = user_accuracy(kept_device_outputs(model, model_key, device_examples(client_data, cid, classes)))
        if value is not None:
            out[cid] = value
    return out


def accuracy_percentiles(accuracies: Mapping[str, float], percentiles=(25, 75)) -> dict[str, float]:
    """Exact percentiles of users' accuracies (paper Table 10). Not DP: simulation ground truth only."""
    if not accuracies:
        raise ValueError("no user accuracies.")
    values = np.fromiter(accuracies.values(), float)
    return {f"p{p:g}": float(np.percentile(values, p)) for p in percentiles}


# Selected images kept in memory between rounds, at most this many bytes (then recomputed per round).
SELECTED_IMAGES_CACHE_BYTES = 512 << 20


@dataclasses.dataclass(frozen=True)
class GanData:
    """What the devices selected. `masks` is device-side state in the simulation (each device remembers
    which of its examples it selected); `population` (ids and counts) is what the server would learn
    under the paper's subpopulation mode, and is never released.
    """

    client_data: object
    classes: int
    population: Population
    masks: Mapping[str, np.ndarray]
    # Why: a device's images are rebuilt from the data source (synthetic ones rendered, the bug applied)
    # on every read, about half of a demo GAN round (docs/performance.md); a device keeps its selected
    # images instead.
    _images: KeptArrays = dataclasses.field(default_factory=lambda: KeptArrays(lambda: SELECTED_IMAGES_CACHE_BYTES),
                                            init=False, repr=False, compare=False)

    @property
    def client_ids(self) -> tuple[str, ...]:
        return self.population.client_ids

    def sizes(self) -> dict:
        """Subpopulation sizes (paper Tables 11/12): users selected, of all, and examples kept."""
        return {"users": self.population.size, "users_total": self.population.clients_total,
                "examples": self.population.examples_kept, "selector": self.population.selector}

    def kept_per_client(self) -> dict[str, int]:
        """Images kept by each device that qualified (device-side; only DP sums of it are released)."""
        return {cid: int(mask.sum()) for cid, mask in self.masks.items()}

    def client_images(self, client_id: str) -> np.ndarray:
        """The selected images of one device, float32 [k, 28, 28, 1] in [-1, 1]; none if it did not qualify."""
        if client_id not in self.masks:
            return np.zeros((0, 28, 28, 1), np.float32)
        return self._images.get(client_id, lambda: to_gan_range(
            device_examples(self.client_data, client_id, self.classes)["pixels"][self.masks[client_id]]))

    def client_dataset(self, client_id: str) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices(self.client_images(client_id))


def select_gan_data(client_data, model, selector: Selector) -> GanData:
    """Runs the CNN and `selector` on every device; clients that opt out are not in the population."""
    classes, model_key = cnn.num_classes(model), weights_key(model)
    masks, kept = {}, 0
    ids = list(client_data.client_ids)
    for cid in progress(ids, desc=f"selecting GAN data ({selector.name})", unit="client"):
        examples = device_examples(client_data, cid, classes)
        mask = selector(cid, examples, kept_device_outputs(model, model_key, examples))
        if mask is not None:
            masks[cid] = mask
            kept += int(mask.sum())
    population = Population(selector.describe(), tuple(masks), kept, len(ids))
    return GanData(client_data, classes, population, masks)
