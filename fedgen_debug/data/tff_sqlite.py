"""TFF's sqlite cache format, and TFF's own loaders reading it offline.

`tff.simulation.datasets.emnist.load_data(cache_dir=D)` and `.stackoverflow.load_data(cache_dir=D)`
download `*.sqlite.lzma` unless `D/emnist_all.sqlite` / `D/stackoverflow.sqlite` already exist. The
files hold two tables: `examples(split_name, client_id, serialized_example_proto)` with one serialized
`tf.train.Example` per row, and `client_metadata(client_id, split_name, num_examples)`.

`write_*` produce such files, so tests and offline users exercise the real TFF loaders. As in TFF's
EMNIST, each client's examples are split: the last `holdout_fraction` (at least one example of every
client with two or more) go to the evaluation split(s), the rest to train; TFF's loaders need every
split to have clients. fedgen-debug itself reads the train split; `load_tff_*` check the file before TFF sees it, so a
missing or truncated cache gives one clear `DataError` instead of a download attempt or a traceback.
"""

from __future__ import annotations

import collections
import os
import sqlite3

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from fedgen_debug.progress import progress

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.atomic import atomic_path
from fedgen_debug.data.errors import DataError

EMNIST_FILENAME = "emnist_all.sqlite"
STACKOVERFLOW_FILENAME = "stackoverflow.sqlite"
EMNIST_SPLITS = ("all_train", "all_test", "digits_only_train", "digits_only_test")
STACKOVERFLOW_SPLITS = ("train", "heldout", "test")
DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".tff")

_SCHEMA = """
CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL,
                       serialized_example_proto BLOB NOT NULL);
CREATE INDEX examples_client_id ON examples (client_id);
CREATE INDEX examples_client_id_split ON examples (split_name, client_id);
CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL,
                              num_examples INTEGER NOT NULL);
"""


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _bytes_feature(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _emnist_example(pixels: np.ndarray, label: int) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        "pixels": _float_feature(pixels.reshape(-1).tolist()),
        "label": _int_feature([int(label)]),
    })).SerializeToString()


def _stackoverflow_example(text: bytes) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        "creation_date": _bytes_feature([b""]),
        "score": _int_feature([0]),
        "tags": _bytes_feature([b""]),
        "title": _bytes_feature([b""]),
        "tokens": _bytes_feature([text]),
        "type": _bytes_feature([b"answer"]),
    })).SerializeToString()


def holdout_split(n: int, holdout_fraction: float, num_holdout_splits: int = 1) -> list[int]:
    """Split index of each of a client's n examples: 0 = train, 1.. = the evaluation splits."""
    if not 0.0 <= holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in [0, 1). Found {holdout_fraction}.")
    k = max(1, int(round(holdout_fraction * n))) if holdout_fraction > 0 else 0
    assignment = [0] * n
    position = n
    for split in range(num_holdout_splits, 0, -1):
        take = min(k, position - 1)  # train always keeps at least one example
        for i in range(position - take, position):
            assignment[i] = split
        position -= take
    return assignment


def _write(path: str, rows_by_client, split_names, required_splits: int) -> None:
    """rows_by_client yields (client_id, [(split_index, proto), ...]).

    The first `required_splits` splits must get clients (TFF's loaders fail on an empty split).
    """
    clients_per_split = [0] * len(split_names)
    with atomic_path(path) as tmp:
        os.remove(tmp)  # sqlite creates the file itself
        connection = sqlite3.connect(tmp)
        try:
            connection.executescript(_SCHEMA)
            for client_id, rows in rows_by_client:
                for split_index, split in enumerate(split_names):
                    protos = [p for s, p in rows if s == split_index]
                    if not protos:
                        continue
                    clients_per_split[split_index] += 1
                    connection.executemany(
                        "INSERT INTO examples VALUES (?, ?, ?)", ((split, client_id, p) for p in protos)
                    )
                    connection.execute(
                        "INSERT INTO client_metadata VALUES (?, ?, ?)", (client_id, split, len(protos))
                    )
            connection.commit()
        finally:
            connection.close()
        empty = [name for name, n in zip(split_names[:required_splits], clients_per_split) if n == 0]
        if empty:
            raise ValueError(f"too few examples for TFF's splits: {empty} would be empty (TFF's loaders "
                             "need clients in every split; use clients with at least 2-3 examples).")


def write_emnist_sqlite(client_data: tff.simulation.datasets.ClientData, directory: str,
                        holdout_fraction: float = 0.1) -> str:
    """Writes image `client_data` as `directory/emnist_all.sqlite`. Returns the path.

    The digits-only splits hold each client's digit examples (labels 0-9), as in TFF's file.
    """

    def rows():
        for cid in progress(client_data.client_ids, desc="writing emnist sqlite", unit="client"):
            arrays = cd.client_numpy(client_data, cid)
            splits = holdout_split(len(arrays["label"]), holdout_fraction)
            protos = [_emnist_example(p, l) for p, l in zip(arrays["pixels"], arrays["label"])]
            digits = arrays["label"] < 10
            # split indices: 0 all_train, 1 all_test, 2 digits_only_train, 3 digits_only_test
            yield cid, [(s, p) for s, p in zip(splits, protos)] + [
                (s + 2, p) for s, p, d in zip(splits, protos, digits) if d
            ]

    path = os.path.join(directory, EMNIST_FILENAME)
    _write(path, rows(), EMNIST_SPLITS, required_splits=2)  # the digits-only splits may be empty
    return path


def write_stackoverflow_sqlite(client_data: tff.simulation.datasets.ClientData, directory: str,
                               holdout_fraction: float = 0.1) -> str:
    """Writes text `client_data` as `directory/stackoverflow.sqlite`. Returns the path."""

    def rows():
        for cid in progress(client_data.client_ids, desc="writing stackoverflow sqlite", unit="client"):
            texts = cd.client_numpy(client_data, cid)["text"]
            splits = holdout_split(len(texts), holdout_fraction, num_holdout_splits=2)
            yield cid, [(s, _stackoverflow_example(t)) for s, t in zip(splits, texts)]

    path = os.path.join(directory, STACKOVERFLOW_FILENAME)
    _write(path, rows(), STACKOVERFLOW_SPLITS, required_splits=3)
    return path


def check_sqlite(path: str, split: str) -> None:
    """Raises `DataError` unless `path` is an intact TFF sqlite file with clients in `split`."""
    if not os.path.isfile(path):
        raise DataError(path, "not found.")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            status = connection.execute("PRAGMA quick_check;").fetchone()[0]
            if status != "ok":
                raise DataError(path, f"the sqlite file is corrupt or truncated ({status}).")
            tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            missing = {"examples", "client_metadata"} - tables
            if missing:
                raise DataError(path, f"missing table(s) {sorted(missing)}; not a TFF dataset file.")
            empty = connection.execute(
                "SELECT client_id FROM client_metadata WHERE split_name = ? AND num_examples < 1 LIMIT 1",
                (split,),
            ).fetchone()
            if empty:
                raise DataError(path, f"client {empty[0]!r} has no examples in split {split!r}.")
            (n_clients,) = connection.execute(
                "SELECT COUNT(*) FROM client_metadata WHERE split_name = ?", (split,)
            ).fetchone()
            if n_clients == 0:
                raise DataError(path, f"split {split!r} has no clients.")
        finally:
            connection.close()
    except sqlite3.DatabaseError as e:
        raise DataError(path, f"the sqlite file is corrupt or truncated ({e}).") from None


def _cached_file(cache_dir: str | None, filename: str, dataset: str) -> tuple[str, str]:
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
    path = os.path.join(cache_dir, filename)
    if not os.path.isfile(path):
        raise DataError(
            path,
            f"TFF {dataset} cache not found, and fedgen-debug never downloads. Put the decompressed "
            f"{filename} (from {filename}.lzma) in {cache_dir}, or write a synthetic one with "
            f"`fedgen-debug data make ... --format tff-sqlite --out {cache_dir}`.",
        )
    return cache_dir, path


class _SizedClientData(tff.simulation.datasets.ClientData):
    """Wraps a TFF sqlite `ClientData` and answers `num_examples` from `client_metadata`."""

    def __init__(self, inner, path: str, split: str):
        self._inner = inner
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            self._sizes = dict(connection.execute(
                "SELECT client_id, num_examples FROM client_metadata WHERE split_name = ?", (split,)
            ))
        finally:
            connection.close()

    client_ids = property(lambda self: self._inner.client_ids)
    serializable_dataset_fn = property(lambda self: self._inner.serializable_dataset_fn)
    element_type_structure = property(lambda self: self._inner.element_type_structure)

    def num_examples(self, client_id: str) -> int:
        return int(self._sizes[client_id])


def load_tff_emnist(cache_dir: str | None = None) -> tff.simulation.datasets.ClientData:
    """The 62-class Federated EMNIST train split through TFF's own loader, strictly offline."""
    cache_dir, path = _cached_file(cache_dir, EMNIST_FILENAME, "EMNIST")
    check_sqlite(path, "all_train")
    train, _ = tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=cache_dir)
    return _SizedClientData(train, path, "all_train")


def _tokens_as_text(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(lambda x: collections.OrderedDict(text=x["tokens"]))


def load_tff_stackoverflow(cache_dir: str | None = None) -> tff.simulation.datasets.ClientData:
    """The Stack Overflow train split through TFF's own loader, strictly offline, as text elements."""
    cache_dir, path = _cached_file(cache_dir, STACKOVERFLOW_FILENAME, "Stack Overflow")
    check_sqlite(path, "train")
    train, _, _ = tff.simulation.datasets.stackoverflow.load_data(cache_dir=cache_dir)
    return _SizedClientData(train.preprocess(_tokens_as_text), path, "train")
