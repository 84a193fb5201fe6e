"""In-memory federated datasets as TFF `ClientData`, and the element formats every loader yields.

Element formats (shared by every data source, matching TFF's own datasets):
- images: `OrderedDict(label=int32[], pixels=float32[28, 28])`, pixels in [0, 1], 1.0 = white
  background, exactly like `tff.simulation.datasets.emnist`.
- text: `OrderedDict(text=string[])`, one sentence or post per element.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug.data.spec import IMAGES, TEXT  # noqa: F401 - re-exported; defined where parsing needs them

IMAGE_SIZE = 28
NUM_IMAGE_CLASSES = 62


class ArrayClientData(tff.simulation.datasets.ClientData):
    """A `ClientData` whose clients' examples are numpy arrays held in memory.

    Unlike `tff.simulation.datasets.TestClientData` it never bakes the whole dataset into a TF graph,
    so it scales to thousands of clients. Its dataset function therefore takes a concrete client id
    (a Python string or an eager string tensor); write the data as TFF sqlite
    (`fedgen_debug.data.tff_sqlite`) when a graph-traceable `dataset_computation` is needed.
    """

    def __init__(self, examples_by_client: Mapping[str, Mapping[str, np.ndarray]]):
        if not examples_by_client:
            raise ValueError("ArrayClientData needs at least one client.")
        self._arrays: dict[str, collections.OrderedDict] = {}
        keys = None
        for client_id in sorted(examples_by_client):
            features = collections.OrderedDict(sorted(examples_by_client[client_id].items()))
            if keys is None:
                keys = tuple(features)
            elif tuple(features) != keys:
                raise ValueError(
                    f"Client {client_id!r} has features {tuple(features)}; expected {keys}."
                )
            lengths = {len(v) for v in features.values()}
            if len(lengths) != 1 or 0 in lengths:
                raise ValueError(
                    f"Client {client_id!r} must have the same non-zero number of examples in "
                    f"every feature. Found {sorted(lengths)}."
                )
            self._arrays[client_id] = features
        self._client_ids = list(self._arrays)
        self._element_spec = self._make_dataset(self._client_ids[0]).element_spec

    @property
    def client_ids(self) -> list[str]:
        return list(self._client_ids)

    def num_examples(self, client_id: str) -> int:
        return len(next(iter(self._arrays[client_id].values())))

    def client_arrays(self, client_id: str) -> collections.OrderedDict:
        """The client's examples as numpy arrays (read-only views; do not mutate)."""
        return self._arrays[client_id]

    def _make_dataset(self, client_id) -> tf.data.Dataset:
        if tf.is_tensor(client_id):
            client_id = client_id.numpy()
        if isinstance(client_id, bytes):
            client_id = client_id.decode()
        return tf.data.Dataset.from_tensor_slices(self._arrays[client_id])

    @property
    def serializable_dataset_fn(self):
        return self._make_dataset

    @property
    def element_type_structure(self):
        return self._element_spec


def image_examples(pixels: np.ndarray, labels: np.ndarray) -> collections.OrderedDict:
    """One client's images in the canonical element format (float32 pixels, int32 labels)."""
    return collections.OrderedDict(
        label=np.asarray(labels, dtype=np.int32),
        pixels=np.asarray(pixels, dtype=np.float32),
    )


def text_examples(sentences) -> collections.OrderedDict:
    return collections.OrderedDict(text=np.asarray([s.encode("utf-8") for s in sentences], dtype=object))


def group_by_client(client_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Example indices of each client, in the original example order."""
    order = np.argsort(client_ids, kind="stable")
    ids_sorted = client_ids[order]
    boundaries = np.flatnonzero(ids_sorted[1:] != ids_sorted[:-1]) + 1
    groups = np.split(order, boundaries)
    return {str(client_ids[g[0]]): g for g in groups if len(g)}


def modality(client_data: tff.simulation.datasets.ClientData) -> str:
    """`IMAGES` or `TEXT`, from the element structure; raises for any other structure."""
    spec = client_data.element_type_structure
    if isinstance(spec, Mapping):
        if "pixels" in spec and "label" in spec:
            return IMAGES
        if "text" in spec:
            return TEXT
    raise ValueError(f"Unsupported element structure {spec}; expected the image or text format.")


def num_examples(client_data: tff.simulation.datasets.ClientData, client_id: str) -> int:
    """Number of examples of one client (a count only; examples never leave this function)."""
    sizes_of = getattr(client_data, "num_examples", None)
    if sizes_of is not None:
        return int(sizes_of(client_id))
    return int(client_data.create_tf_dataset_for_client(client_id).reduce(0, lambda n, _: n + 1))


def client_sizes(client_data: tff.simulation.datasets.ClientData) -> dict[str, int]:
    return {cid: num_examples(client_data, cid) for cid in client_data.client_ids}


class DevicePreprocessedClientData(tff.simulation.datasets.ClientData):
    """`source` seen through per-client, device-side preprocessing.

    `dataset_fn(client_id)` builds the client's dataset as its device would (e.g. with a buggy app
    update applied). Preprocessing must keep the number of examples. `arrays_fn(client_id, arrays)`,
    when given, is the same preprocessing on the source's numpy arrays: `client_numpy` then skips
    tf.data. Why: device-side passes over every client (T4's accuracies, selection) through a dataset
    iterator cost minutes on tens of thousands of writers, and little on arrays (docs/performance.md).
    """

    def __init__(self, source: tff.simulation.datasets.ClientData, dataset_fn, arrays_fn=None):
        self._source = source
        self._dataset_fn = dataset_fn
        if arrays_fn is not None and hasattr(source, "client_arrays"):
            self.client_arrays = lambda client_id: arrays_fn(client_id, source.client_arrays(client_id))

    client_ids = property(lambda self: self._source.client_ids)
    serializable_dataset_fn = property(lambda self: self._dataset_fn)
    element_type_structure = property(lambda self: self._source.element_type_structure)

    def num_examples(self, client_id: str) -> int:
        return num_examples(self._source, client_id)


def client_numpy(client_data: tff.simulation.datasets.ClientData, client_id: str) -> collections.OrderedDict:
    """One client's examples as numpy arrays, from any `ClientData` in the canonical format.

    This is "on-device" access: the simulation uses it to run device-side code (selection, bug
    injection, metrics) on one client's data at a time.
    """
    arrays_of = getattr(client_data, "client_arrays", None)
    if arrays_of is not None:
        return arrays_of(client_id)
    ds = client_data.create_tf_dataset_for_client(client_id)
    batches = list(ds.batch(4096).as_numpy_iterator())
    return collections.OrderedDict(
        (k, np.concatenate([b[k] for b in batches])) for k in client_data.element_type_structure
    )
