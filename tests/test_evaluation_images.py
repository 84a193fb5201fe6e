"""The image evaluation helpers: many small synthetic writers as an `.npz`
(`evaluation/synthetic_writers_npz.py`), read back through the data contract."""

import importlib.util
import os
import sys

import numpy as np

from fedgen_debug.data import npz
from fedgen_debug.data import synthetic_images as si

_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation",
                       "synthetic_writers_npz.py")


def _load():
    spec = importlib.util.spec_from_file_location("synthetic_writers_npz", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_file_holds_each_writer_of_the_generator_with_its_characters(tmp_path, monkeypatch):
    script = _load()
    out = str(tmp_path / "writers.npz")
    monkeypatch.setattr(sys, "argv", ["x", "--writers", "3", "--seed", "5", "--median-examples", "4",
                                      "--min-examples", "2", "--max-examples", "6", "--processes", "1",
                                      "--out", out])
    script.main()
    data = npz.read_npz(out)
    assert sorted(data.client_ids) == [si.writer_id(w) for w in range(3)]
    config = si.SyntheticImagesConfig(3, 5, 2, 6, 4.0)
    for w in range(3):
        pixels, labels = si.generate_writer(5, w, config)
        arrays = data.client_arrays(si.writer_id(w))
        assert 2 <= len(labels) <= 6
        np.testing.assert_array_equal(arrays["label"], labels)
        # uint8 storage: each pixel within half a grey level of the generator's float.
        np.testing.assert_allclose(arrays["pixels"], pixels, atol=0.5 / 255 + 1e-6)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".partial")]
