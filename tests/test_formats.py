"""npz / JSONL / TFF-sqlite contracts: exact round trips, TFF's own loaders, and bad input."""

import collections
import json
import os
import sqlite3

import numpy as np
import pytest
import tensorflow_federated as tff

from conftest import hand_built_images, hand_built_text
from fedgen_debug.data import DataError, client_data as cd, jsonl, npz, spec, tff_sqlite


def _assert_same_clients(actual, expected: dict):
    assert sorted(actual.client_ids) == sorted(expected)
    for cid, arrays in expected.items():
        got = cd.client_numpy(actual, cid)
        assert list(got) == list(arrays)
        for key in arrays:
            if arrays[key].dtype == object:
                assert list(got[key]) == list(arrays[key])
            else:
                np.testing.assert_allclose(got[key], arrays[key], atol=1e-6)
                assert got[key].dtype == arrays[key].dtype


def _listdir(path):
    return sorted(os.listdir(path))


# ---- npz ---------------------------------------------------------------------------------------

def test_npz_round_trip_is_exact(tmp_path, image_client_data):
    path = str(tmp_path / "images.npz")
    assert npz.write_npz(image_client_data, path) == 6
    with np.load(path) as f:
        assert f["pixels"].dtype == np.uint8 and f["pixels"].shape == (6, 28, 28)
    _assert_same_clients(npz.read_npz(path), hand_built_images())


def _save(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return str(path)


def test_npz_accepts_float_pixels_and_black_background(tmp_path):
    pixels = np.zeros((2, 28, 28), np.float32)
    pixels[1] = 0.25
    path = _save(tmp_path / "f.npz", pixels=pixels, labels=np.array([1, 2]), client_ids=np.array(["a", "b"]))
    white = npz.read_npz(path)
    black = npz.read_npz(path, background="black")
    np.testing.assert_allclose(white.client_arrays("b")["pixels"], 0.25)
    np.testing.assert_allclose(black.client_arrays("b")["pixels"], 0.75)
    np.testing.assert_allclose(black.client_arrays("a")["pixels"], 1.0)


GOOD = dict(pixels=np.full((2, 28, 28), 255, np.uint8), labels=np.array([0, 1]), client_ids=np.array(["a", "b"]))


@pytest.mark.parametrize("change, problem", [
    (dict(labels=None), r"missing key\(s\) \['labels'\]"),
    (dict(pixels=np.zeros((2, 28, 27), np.uint8)), r"'pixels' must have shape \[N, 28, 28\] \(.*\). Found \[2, 28, 27\]"),
    (dict(pixels=np.where(np.arange(2 * 784).reshape(2, 28, 28) == 900, np.nan, 0.5)),
     r"NaN or infinite values \(first at example 1\)"),
    (dict(pixels=np.full((2, 28, 28), 2.0)), r"float 'pixels' must lie in \[0, 1\]"),
    (dict(labels=np.array([0, 62])), r"'labels' must lie in \[0, 61\]"),
    (dict(labels=np.array([0.0, 1.5])), r"'labels' must be integers. Found dtype float64 with fractional values"),
    (dict(client_ids=np.array(["a", "b"], dtype=object)), r"object array.*np.asarray\(ids, dtype=str\)"),
    (dict(pixels=np.zeros((2, 783), np.uint8)), r"\[N, 784\] are read too\). Found \[2, 783\]"),
    (dict(client_ids=np.array(["a"])), r"'client_ids' must have shape \[2\]"),
    (dict(client_ids=np.array(["a", ""])), r"empty id\(s\) \(first at example 1\)"),
    (dict(pixels=np.zeros((0, 28, 28), np.uint8), labels=np.zeros(0, int), client_ids=np.array([], str)),
     "contains no examples"),
])
def test_npz_bad_input_gives_one_clear_error(tmp_path, change, problem):
    arrays = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = _save(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DataError, match=problem) as info:
        npz.read_npz(path)
    assert info.value.source == path


def test_npz_layouts_modelers_save_read_as_the_contract(tmp_path):
    """Pixels flattened row by row or with a channel, labels as a column or as whole-number floats: the same
    client data as the contract's own layout."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (6, 28, 28)).astype(np.uint8)
    labels, ids = np.array([0, 1, 2, 3, 4, 61]), np.array(["a", "b", "a", "c", "b", "a"])
    expected = npz.read_npz(_save(tmp_path / "contract.npz", pixels=pixels, labels=labels, client_ids=ids))
    for name, arrays in {"flat": dict(pixels=pixels.reshape(6, 784)),
                         "channel": dict(pixels=pixels[..., None]),
                         "column": dict(labels=labels[:, None]),
                         "float labels": dict(labels=labels.astype(np.float32))}.items():
        data = npz.read_npz(_save(tmp_path / f"{name}.npz", **{"pixels": pixels, "labels": labels, "client_ids": ids,
                                                                **arrays}))
        assert data.client_ids == expected.client_ids, name
        for cid in data.client_ids:
            got, want = cd.client_numpy(data, cid), cd.client_numpy(expected, cid)
            np.testing.assert_array_equal(got["pixels"], want["pixels"], err_msg=name)
            np.testing.assert_array_equal(got["label"], want["label"], err_msg=name)


def test_a_jsonl_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"client_id": "a", "text": "x y"}\r\n{"client_id": "b", "text": "z"}\r\n')
    data = jsonl.read_jsonl(str(path))
    assert data.client_ids == ["a", "b"] and data.num_examples("a") == 1


def test_npz_not_a_zip_and_missing_file(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match="not a readable .npz file"):
        npz.read_npz(str(garbage))
    with pytest.raises(DataError, match="file not found"):
        npz.read_npz(str(tmp_path / "nope.npz"))
    text = tmp_path / "text.npz"   # numpy reads it as a pickle: the error spoke of object arrays
    text.write_text("hello world\n")
    with pytest.raises(DataError, match=r"not a .npz file: a .npz is a zip archive .* begins b'hell'"):
        npz.read_npz(str(text))
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(DataError, match=r"not a .npz file.*begins b'\\x93NUM'"):
        npz.read_npz(str(tmp_path / "one.npy"))


class _FailingClientData(tff.simulation.datasets.ClientData):
    """Fails on its second client, like a crash halfway through a write."""

    def __init__(self, inner):
        self._inner = inner

    client_ids = property(lambda self: self._inner.client_ids)
    element_type_structure = property(lambda self: self._inner.element_type_structure)

    @property
    def serializable_dataset_fn(self):
        def fn(cid):
            if cid == self._inner.client_ids[1]:
                raise RuntimeError("device went away")
            return self._inner.create_tf_dataset_for_client(cid)
        return fn


@pytest.mark.parametrize("writer, name", [
    (npz.write_npz, "out.npz"),
    (jsonl.write_jsonl, "out.jsonl"),
])
def test_a_failed_write_leaves_nothing_behind(tmp_path, image_client_data, text_client_data, writer, name):
    source = image_client_data if writer is npz.write_npz else text_client_data
    with pytest.raises(RuntimeError, match="device went away"):
        writer(_FailingClientData(source), str(tmp_path / name))
    assert _listdir(tmp_path) == []


def test_a_failed_sqlite_write_leaves_nothing_behind(tmp_path, image_client_data):
    with pytest.raises(RuntimeError, match="device went away"):
        tff_sqlite.write_emnist_sqlite(_FailingClientData(image_client_data), str(tmp_path))
    assert _listdir(tmp_path) == []


# ---- JSONL -------------------------------------------------------------------------------------

def test_jsonl_round_trip_is_exact(tmp_path, text_client_data):
    path = str(tmp_path / "text.jsonl")
    assert jsonl.write_jsonl(text_client_data, path) == 6
    first = json.loads(open(path, encoding="utf-8").readline())
    assert first == {"client_id": "u1", "text": "I have a problem."}
    _assert_same_clients(jsonl.read_jsonl(path), hand_built_text())


def test_jsonl_integer_client_ids_and_blank_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"client_id": 7, "text": "a b"}\n\n{"client_id": "7", "text": "c"}\n')
    data = jsonl.read_jsonl(str(path))
    assert data.client_ids == ["7"] and data.num_examples("7") == 2


def test_jsonl_skips_empty_messages_of_a_client_that_wrote_something(tmp_path):
    path = tmp_path / "posts.jsonl"
    path.write_text('{"client_id": "a", "text": ""}\n{"client_id": "a", "text": "hi there"}\n'
                    '{"client_id": "a", "text": null}\n{"client_id": "b", "text": " \\n "}\n{"client_id": "b", "text": "ok"}\n')
    data = jsonl.read_jsonl(str(path))
    assert data.client_ids == ["a", "b"]
    assert [t.decode() for t in cd.client_numpy(data, "a")["text"]] == ["hi there"]
    assert [t.decode() for t in cd.client_numpy(data, "b")["text"]] == ["ok"]


@pytest.mark.parametrize("content, problem", [
    (b'{"client_id": "a", "text": "ok"}\n{"client_id": "a", "text": \n', r"line 2: not valid JSON"),
    (b'{"text": "no id"}\n', r"line 1: missing 'client_id'"),
    (b'{"user_id": "a", "text": "ok"}\n', r"line 1: missing 'client_id' \(found keys: 'text', 'user_id'\)"),
    (b'{"client_id": "a", "text": "ok"}\n{"client_id": "b", "text": "caf\xe9"}\n', r"line 2: invalid UTF-8 at byte 31"),
    (b'{"client_id": "a", "text": "   "}\n{"client_id": "b", "text": null}\n', r"contains no examples"),
    (b'{"client_id": "a", "text": "ok"}\n{"client_id": "b", "text": ""}\n{"client_id": "c", "text": null}\n',
     r"client 'b' \(line 2\) has only empty texts, and 1 more client: every client needs"),
    (b'{"client_id": "a"}\n', r"line 1: missing 'text' \(found keys: 'client_id'\)"),
    (b'{"client_id": "", "text": "x"}\n', r"line 1: 'client_id' must be a non-empty string"),
    (b'{"client_id": "a", "text": 5}\n', r"line 1: 'text' must be a string \(or null\)"),
    (b'["a", "b"]\n', r"line 1: expected an object"),
    (b'{"client_id": "a", "text": "ok"}\n{"client_id": "a", "text": "a \\ud83d b"}\n',
     r"line 2: 'text' holds a lone surrogate escape \(\\ud800-\\udfff\), not text"),
    (b'{"client_id": "\\udc00", "text": "ok"}\n', r"line 1: 'client_id' holds a lone surrogate"),
    (b'\n\n', r"contains no examples"),
])
def test_jsonl_bad_input_gives_one_clear_error(tmp_path, content, problem):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(DataError, match=problem) as info:
        jsonl.read_jsonl(str(path))
    assert info.value.source == str(path)


# ---- TFF sqlite, read by TFF's own loaders -------------------------------------------------------

def _split(expected: dict, split_index: int, num_holdout_splits: int = 1) -> dict:
    """The examples of each client that `holdout_split` puts into split `split_index`."""
    out = {}
    for cid, arrays in expected.items():
        n = len(next(iter(arrays.values())))
        keep = np.array(tff_sqlite.holdout_split(n, 0.1, num_holdout_splits)) == split_index
        if keep.any():
            out[cid] = collections.OrderedDict((k, v[keep]) for k, v in arrays.items())
    return out


@pytest.mark.parametrize("n, fraction, splits, expected", [
    (1, 0.1, 1, [0]),
    (2, 0.1, 1, [0, 1]),
    (20, 0.1, 1, [0] * 18 + [1] * 2),
    (3, 0.1, 2, [0, 1, 2]),
    (2, 0.1, 2, [0, 2]),
    (4, 0.0, 2, [0, 0, 0, 0]),
])
def test_holdout_split_is_exact(n, fraction, splits, expected):
    assert tff_sqlite.holdout_split(n, fraction, splits) == expected


def test_tff_emnist_load_data_reads_generated_sqlite(tmp_path, image_client_data):
    path = tff_sqlite.write_emnist_sqlite(image_client_data, str(tmp_path))
    assert os.path.basename(path) == "emnist_all.sqlite"
    expected = hand_built_images()
    train, test = tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=str(tmp_path))
    _assert_same_clients(train, _split(expected, 0))
    _assert_same_clients(test, _split(expected, 1))
    assert sorted(test.client_ids) == ["alice", "carol"]  # bob's single example stays in train
    # Digits-only splits: each client's digit examples (labels 0-9) only.
    digits_train, digits_test = tff.simulation.datasets.emnist.load_data(only_digits=True, cache_dir=str(tmp_path))
    assert digits_train.client_ids == ["alice"]
    np.testing.assert_array_equal(cd.client_numpy(digits_train, "alice")["label"], [0, 1])
    assert digits_test.client_ids == ["alice", "carol"]
    # The same file through the data spec, with sizes from client_metadata.
    loaded = spec.load_client_data(f"tff-emnist:{tmp_path}")
    assert cd.client_sizes(loaded) == {"alice": 2, "bob": 1, "carol": 1}


def test_tff_stackoverflow_load_data_reads_generated_sqlite(tmp_path, text_client_data):
    tff_sqlite.write_stackoverflow_sqlite(text_client_data, str(tmp_path))
    train, heldout, test = tff.simulation.datasets.stackoverflow.load_data(cache_dir=str(tmp_path))
    assert sorted(train.client_ids) == ["u1", "u2", "u3"]
    element = next(iter(train.create_tf_dataset_for_client("u2")))
    assert sorted(element) == ["creation_date", "score", "tags", "title", "tokens", "type"]
    assert element["tokens"].numpy().decode() == "Is there a way to use regex in Python?"
    assert heldout.client_ids == ["u1"] and sorted(test.client_ids) == ["u1", "u3"]
    expected = hand_built_text()
    _assert_same_clients(spec.load_client_data(f"tff-stackoverflow:{tmp_path}"), _split(expected, 0, 2))


def test_sqlite_writer_refuses_data_too_small_for_tff_splits(tmp_path):
    one_each = cd.ArrayClientData({"a": cd.text_examples(["only one"])})
    with pytest.raises(ValueError, match=r"\['heldout', 'test'\] would be empty"):
        tff_sqlite.write_stackoverflow_sqlite(one_each, str(tmp_path))
    assert _listdir(tmp_path) == []


def test_missing_tff_cache_is_a_clear_error_without_download(tmp_path):
    with pytest.raises(DataError, match=r"emnist_all.sqlite.*never downloads.*Put the decompressed"):
        spec.load_client_data(f"tff-emnist:{tmp_path}")
    with pytest.raises(DataError, match=r"stackoverflow.sqlite.*never downloads"):
        spec.load_client_data(f"tff-stackoverflow:{tmp_path}")
    assert _listdir(tmp_path) == []


def test_truncated_sqlite_is_a_clear_error(tmp_path, image_client_data):
    path = tff_sqlite.write_emnist_sqlite(image_client_data, str(tmp_path))
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(DataError, match="corrupt or truncated") as info:
        spec.load_client_data(f"tff-emnist:{tmp_path}")
    assert info.value.source == path


def test_sqlite_with_an_empty_client_is_a_clear_error(tmp_path, image_client_data):
    path = tff_sqlite.write_emnist_sqlite(image_client_data, str(tmp_path))
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO client_metadata VALUES ('ghost', 'all_train', 0)")
    with pytest.raises(DataError, match="client 'ghost' has no examples in split 'all_train'"):
        spec.load_client_data(f"tff-emnist:{tmp_path}")


# ---- specs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("synthetic-images", "synthetic-images"),
    ("synthetic-images:seed=2,writers=10", "synthetic-images:seed=2,writers=10"),
    ("synthetic-text:users=5", "synthetic-text:users=5"),
    ("npz:/d/x.npz,background=black", "npz:/d/x.npz,background=black"),
    ("jsonl:x.jsonl", "jsonl:x.jsonl"),
    ("tff-emnist", "tff-emnist"),
    ("tff-stackoverflow:/cache", "tff-stackoverflow:/cache"),
])
def test_spec_parsing_round_trips(text, expected):
    assert str(spec.parse_data_spec(text)) == expected


@pytest.mark.parametrize("text, problem", [
    ("emnist", r"(?s)Unknown data source 'emnist'.*valid data specs:.*synthetic-images"),
    ("synthetic-images:writers=0", r"writers must be >= 1. Found 0."),
    ("synthetic-images:writers=ten", r"option writers must be an integer. Found 'ten'"),
    ("synthetic-text:writers=3", r"unexpected 'writers=3'"),
    ("npz", r"npz needs a path"),
    ("npz:x.npz,background=grey", r"background must be white or black"),
    ("synthetic-text:users=3,users=4", r"users is given twice"),
    ("npz:a.npz,b.npz", r"unexpected 'b.npz'"),
])
def test_bad_specs_are_clear_errors(text, problem):
    with pytest.raises(ValueError, match=problem):
        spec.parse_data_spec(text)
