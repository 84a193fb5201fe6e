"""The modeler's own primary model (`models.primary`): a Keras model the tool did not train, with its own
pixel convention (black paper, as MNIST) and softmax outputs, checked on load and used by T4."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import ledger_with_unlimited_budget, run_cli, run_main
from fedgen_debug.analysis import calibration_store
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import gan_data
from fedgen_debug.models import cnn
from fedgen_debug.models.primary import PrimaryContract, is_model_file, load_model_file
from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
from fedgen_debug.runs import store
from fedgen_debug.training import primary_cnn

DATA = "synthetic-images:writers=12,seed=3"
CLASSES = 10


def _digits(spec: str):
    data = data_spec.load_client_data(spec)
    pixels = np.concatenate([cd.client_numpy(data, c)["pixels"] for c in data.client_ids])
    labels = np.concatenate([cd.client_numpy(data, c)["label"] for c in data.client_ids])
    keep = labels < CLASSES
    return pixels[keep], labels[keep]


@pytest.fixture(scope="module")
def black_paper_model(tmp_path_factory):
    """An MLP on [n, 28, 28] pixels in [0, 255] with 0 = paper, ending in a softmax: not the tool's CNN, not
    its convention. Trained on other writers' digits, inverted and scaled to that convention."""
    pixels, labels = _digits("synthetic-images:writers=30,seed=77")
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((28, 28)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(CLASSES, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit((1.0 - pixels) * 255.0, labels, epochs=4, batch_size=64, verbose=0)
    path = str(tmp_path_factory.mktemp("model") / "digits.keras")
    model.save(path)
    return path


def _accuracy(model, pixels, labels) -> float:
    return float(np.mean(np.argmax(cnn.logits(model, pixels), axis=1) == labels))


def test_the_contract_converts_the_tools_pixels_to_the_models_convention(black_paper_model):
    pixels, labels = _digits(DATA)
    right = load_model_file(black_paper_model, PrimaryContract("black", "auto", 255.0))
    wrong = load_model_file(black_paper_model, PrimaryContract("white", "auto", 255.0))
    assert _accuracy(right, pixels, labels) > 0.6
    assert _accuracy(wrong, pixels, labels) < 0.4          # fed the tool's white paper: near chance
    logits = cnn.logits(right, pixels[:5])
    np.testing.assert_allclose(np.exp(logits).sum(axis=1), 1.0, atol=1e-4)   # softmax read as probabilities
    assert cnn.num_classes(right) == CLASSES and cnn.features(right, pixels[:3]).shape == (3, 64)


def test_an_inversion_bug_still_reaches_the_model(black_paper_model):
    """The adapter converts the convention, not the data: inverted images look wrong to the model."""
    pixels, labels = _digits(DATA)
    model = load_model_file(black_paper_model, PrimaryContract("black", "auto", 255.0))
    assert _accuracy(model, 1.0 - pixels, labels) < _accuracy(model, pixels, labels) - 0.3


def test_a_flat_input_model_reads_the_image_row_by_row(tmp_path, black_paper_model):
    """An MLP on [n, 784] (MNIST's classic input) with the same weights as one on [n, 28, 28] answers the
    same: the adapter flattens row by row, as Keras' Flatten and numpy's reshape do."""
    pixels, _ = _digits(DATA)
    shaped = tf.keras.models.load_model(black_paper_model, compile=False)
    flat = tf.keras.Sequential([tf.keras.Input((784,)), tf.keras.layers.Dense(64, activation="relu"),
                                tf.keras.layers.Dense(CLASSES, activation="softmax")])
    flat.set_weights(shaped.get_weights())
    path = str(tmp_path / "flat.keras")
    flat.save(path)
    contract = PrimaryContract("black", "auto", 255.0)
    np.testing.assert_allclose(cnn.logits(load_model_file(path, contract), pixels[:50]),
                               cnn.logits(load_model_file(black_paper_model, contract), pixels[:50]), atol=1e-5)


@pytest.mark.parametrize("layers, message", [
    ([tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)], r"28×28 grayscale.*\[n, 28, 28, 3\]. Found input shape \[32, 32, 3\]"),
    ([tf.keras.Input((28, 28)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(1)], r"K >= 2. Found output shape \[1\]"),
    ([tf.keras.Input((28, 28)), tf.keras.layers.Dense(4)], r"K >= 2. Found output shape \[28, 4\]"),
])
def test_a_model_outside_the_contract_is_refused_with_the_reason(tmp_path, layers, message):
    path = str(tmp_path / "m.keras")
    tf.keras.Sequential(layers).save(path)
    with pytest.raises(ValueError, match=message):
        load_model_file(path, PrimaryContract())


def test_bad_files_and_settings_are_refused(tmp_path):
    (tmp_path / "junk.keras").write_text("not a model")
    with pytest.raises(ValueError, match="not a Keras model"):
        load_model_file(str(tmp_path / "junk.keras"), PrimaryContract())
    with pytest.raises(FileNotFoundError):
        load_model_file(str(tmp_path / "missing.keras"), PrimaryContract())
    with pytest.raises(ValueError, match="background must be one of white, black. Found 'grey'"):
        PrimaryContract(background="grey")
    with pytest.raises(ValueError, match="scale must be 1 or 255. Found 100"):
        PrimaryContract(scale=100)
    assert is_model_file("m.keras") and is_model_file("m.h5") and not is_model_file("primary_cnn.npz")


def test_a_saved_model_directory_loads_too(tmp_path, black_paper_model):
    directory = str(tmp_path / "saved")
    tf.keras.models.load_model(black_paper_model).save(directory, save_format="tf")
    assert is_model_file(directory)
    pixels, labels = _digits(DATA)
    assert _accuracy(load_model_file(directory, PrimaryContract("black", "auto", 255.0)), pixels, labels) > 0.6


class _SubclassedMLP(tf.keras.Model):
    """The black-paper MLP as a subclassed model: no layer graph to read its input shape or softmax from."""

    def __init__(self):
        super().__init__()
        self.flat = tf.keras.layers.Flatten()
        self.hidden = tf.keras.layers.Dense(64, activation="relu")
        self.out = tf.keras.layers.Dense(CLASSES, activation="softmax")

    def call(self, images):
        return self.out(self.hidden(self.flat(images)))


class _ModuleMLP(tf.Module):
    """The same MLP as a bare `tf.Module`: callable on [n, 28, 28] and, as TF Serving exports, through a
    `serving_default` signature on [n, 784] that returns a dict."""

    def __init__(self, weights):
        super().__init__()
        self.weights = [tf.Variable(w) for w in weights]

    def probabilities(self, flat):
        w1, b1, w2, b2 = self.weights
        return tf.nn.softmax(tf.nn.relu(flat @ w1 + b1) @ w2 + b2)

    @tf.function(input_signature=[tf.TensorSpec([None, 28, 28], tf.float32)])
    def __call__(self, images):
        return self.probabilities(tf.reshape(images, (-1, 784)))

    @tf.function(input_signature=[tf.TensorSpec([None, 784], tf.float32, name="pixels")])
    def serve(self, flat):
        return {"probabilities": self.probabilities(flat)}


def _model_kinds(tmp_path, black_paper_model) -> dict[str, str]:
    """The black-paper MLP's weights in every kind of model file a modeler may bring."""
    graph = tf.keras.models.load_model(black_paper_model, compile=False)
    weights = graph.get_weights()
    paths = {}
    subclassed = _SubclassedMLP()
    subclassed(tf.zeros((1, 28, 28)))
    subclassed.set_weights(weights)
    paths["subclassed SavedModel"] = str(tmp_path / "subclassed")
    subclassed.save(paths["subclassed SavedModel"], save_format="tf")
    module = _ModuleMLP(weights)
    paths["tf.Module, callable"] = str(tmp_path / "module")
    tf.saved_model.save(module, paths["tf.Module, callable"])
    served = _ModuleMLP(weights)
    paths["tf.Module, serving signature"] = str(tmp_path / "served")
    tf.saved_model.save(served, paths["tf.Module, serving signature"], signatures={"serving_default": served.serve})
    images = tf.keras.Input((28, 28))
    paths["submodel as last layer"] = str(tmp_path / "nested.keras")
    tf.keras.Model(images, graph(images)).save(paths["submodel as last layer"])
    # Open spatial size (a fully convolutional front) and three channels: the gray copied to each.
    open_size = tf.keras.Sequential([tf.keras.Input((None, None, 1)), tf.keras.layers.Reshape((784,)), *graph.layers[1:]])
    paths["open spatial size"] = str(tmp_path / "open.keras")
    open_size.save(paths["open spatial size"])
    to_gray = tf.keras.layers.Conv2D(1, 1, use_bias=False)
    rgb = tf.keras.Sequential([tf.keras.Input((28, 28, 3)), to_gray, tf.keras.layers.Flatten(), *graph.layers[1:]])
    to_gray.set_weights([np.full((1, 1, 3, 1), 1 / 3, np.float32)])
    paths["three channels"] = str(tmp_path / "rgb.keras")
    rgb.save(paths["three channels"])
    return paths


def test_every_kind_of_model_file_answers_as_the_keras_model_with_its_weights(tmp_path, black_paper_model):
    """Subclassed, bare `tf.Module` (called or served), nested, open-size and three-channel models with the
    MLP's weights give its logits on the tool's images; without a softmax layer to see, `auto` still reads
    probabilities from the scores; features are the last layer's input where a graph gives one, else the scores."""
    pixels, _ = _digits(DATA)
    contract = PrimaryContract("black", "auto", 255.0)
    reference = load_model_file(black_paper_model, contract)
    expected = cnn.logits(reference, pixels[:50])
    for kind, path in _model_kinds(tmp_path, black_paper_model).items():
        model = load_model_file(path, contract)
        np.testing.assert_allclose(cnn.logits(model, pixels[:50]), expected, atol=1e-4, err_msg=kind)
        assert cnn.num_classes(model) == CLASSES, kind
        width = cnn.features(model, pixels[:3]).shape[1]
        graphless = kind.startswith(("subclassed", "tf.Module"))
        assert width == (CLASSES if graphless else 64), kind
    np.testing.assert_allclose(cnn.features(load_model_file(str(tmp_path / "nested.keras"), contract), pixels[:5]),
                               cnn.features(reference, pixels[:5]), atol=1e-5)


def test_a_saved_module_is_installed_into_the_run_and_reloaded_from_its_copy(tmp_path, black_paper_model):
    """A run keeps the modeler's SavedModel directory in released/ and later reads the copy, not the original."""
    pixels, _ = _digits(DATA)
    contract = PrimaryContract("black", "auto", 255.0)
    source = _model_kinds(tmp_path / "kinds", black_paper_model)["tf.Module, serving signature"]
    out = str(tmp_path / "run" / "released" / store.PRIMARY)
    os.makedirs(os.path.dirname(out))
    installed = primary_cnn.install_model_file(source, contract, out, pixels[:200])
    shutil.rmtree(source)
    reloaded = primary_cnn.load_primary_cnn(out)
    assert primary_cnn.primary_info(out)["model_file"] == "primary_model" and primary_cnn.primary_info(out)["classes"] == CLASSES
    np.testing.assert_allclose(cnn.logits(reloaded, pixels[:20]), cnn.logits(installed, pixels[:20]), atol=1e-6)
    assert primary_cnn.reference_statistics(out)[0].shape == (CLASSES,)   # the scores: no graph to read features from


def test_the_device_cache_tells_models_without_a_graph_apart_by_what_they_compute(tmp_path, black_paper_model):
    """T4's per-device outputs are cached by a digest of the model (`gan_data.weights_key`); the loaded object's
    variables are not the wrapper's weights, so the digest reads its scores: the same file twice gives one key,
    other weights another."""
    path = _model_kinds(tmp_path / "kinds", black_paper_model)["subclassed SavedModel"]
    other = _SubclassedMLP()
    other(tf.zeros((1, 28, 28)))
    other.set_weights([w * 1.01 for w in tf.keras.models.load_model(black_paper_model).get_weights()])
    other.save(str(tmp_path / "other"), save_format="tf")
    contract = PrimaryContract("black", "auto", 255.0)
    first, again = (gan_data.weights_key(load_model_file(path, contract)) for _ in range(2))
    assert first == again != gan_data.weights_key(load_model_file(str(tmp_path / "other"), contract))
    graph_keys = {gan_data.weights_key(load_model_file(black_paper_model, contract)) for _ in range(2)}
    assert len(graph_keys) == 1   # the features model is not a sublayer whose layer names change per load


def test_a_model_without_a_graph_outside_the_contract_is_refused_with_the_reason(tmp_path):
    class ColourModule(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 3], tf.float32)])
        def __call__(self, images):
            return tf.reduce_mean(images, axis=[1, 2])

    class OneScore(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.float32)])
        def __call__(self, images):
            return tf.reduce_mean(images, axis=[1, 2])

    tf.saved_model.save(ColourModule(), str(tmp_path / "colour"))
    tf.saved_model.save(OneScore(), str(tmp_path / "one"))
    with pytest.raises(ValueError, match=r"28×28 grayscale.*Found input shape none it answers"):
        load_model_file(str(tmp_path / "colour"), PrimaryContract())
    with pytest.raises(ValueError, match=r"K >= 2. Found output shape \[1\]"):
        load_model_file(str(tmp_path / "one"), PrimaryContract())
    class Unregistered(_SubclassedMLP):   # local: Keras cannot find its class again to rebuild it from the file
        pass

    subclassed = Unregistered()
    subclassed(tf.zeros((1, 28, 28)))
    subclassed.save(str(tmp_path / "subclassed.keras"))
    with pytest.raises(ValueError, match=r"not a Keras model.*loads as a SavedModel directory"):
        load_model_file(str(tmp_path / "subclassed.keras"), PrimaryContract())


def test_train_gan_runs_t4_on_the_modelers_model_and_releases_its_copy(tmp_path, black_paper_model):
    out = str(tmp_path / "run")
    result = run_cli("train-gan", "--data", DATA, "--select", "by-user-accuracy:low", "--preset", "test",
                     "--rounds", "2", "--primary", black_paper_model, "--primary-background", "black",
                     "--primary-scale", "255", "--out", out)
    assert result.returncode == 0, result.stderr
    info = store.read_json(store.released(out, store.PRIMARY_INFO))
    assert info["model_file"] == "primary_model.keras" and info["classes"] == CLASSES
    assert info["contract"] == {"background": "black", "output": "auto", "scale": 255.0}
    assert os.path.exists(store.released(out, "primary_model.keras"))
    assert os.path.exists(primary_cnn.reference_path(store.released(out, store.PRIMARY)))
    # The released copy is the model the devices ran: on each user's digits (computed here, as on the
    # devices; T4's DP quantile of these at N = 12 is too noisy to test) it is far above chance (1/10).
    released = primary_cnn.load_primary_cnn(store.released(out, store.PRIMARY))
    accuracies = gan_data.user_accuracies(data_spec.load_client_data(DATA), released)
    assert len(accuracies) == 12 and np.median(list(accuracies.values())) > 0.6, accuracies
    assert set(store.read_json(store.released(out, store.THRESHOLD))) == {"0.25"}
    # analyze-gan and the second train-gan through the CLI's main() in this process (the first train-gan
    # above ran the console script): one TensorFlow start-up instead of three.
    done = run_main("analyze-gan", out, "--samples", "200", "--json")
    assert done.returncode == 0, done.stderr
    assert "frechet_distance" in json.dumps(json.loads(done.stdout))
    # README step 3: the second GAN takes the first's primary (`--primary RUN/released/primary_cnn.npz`), which
    # holds the modeler's model file and no CNN weights; both runs then read, and are calibrated as, one model.
    high = str(tmp_path / "high")
    done = run_main("train-gan", "--data", DATA, "--select", "by-user-accuracy:high", "--preset", "test",
                    "--rounds", "1", "--primary", store.released(out, store.PRIMARY), "--out", high)
    assert done.returncode == 0, done.stderr
    copied, (pixels, _) = primary_cnn.load_primary_cnn(store.released(high, store.PRIMARY)), _digits(DATA)
    np.testing.assert_allclose(cnn.logits(copied, pixels[:20]), cnn.logits(released, pixels[:20]), atol=1e-6)
    assert calibration_store.primary_identity(high) == calibration_store.primary_identity(out) == "digits.keras"


def test_train_gan_refuses_a_model_outside_the_contract_before_training(tmp_path, monkeypatch):
    path = str(tmp_path / "rgb.keras")
    tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]).save(path)
    ledger = ledger_with_unlimited_budget(tmp_path / "ledger")   # only the model can stop the run
    monkeypatch.setenv(LEDGER_ENV, ledger)
    done = run_main("train-gan", "--data", DATA, "--select", "random", "--preset", "test", "--rounds", "1",
                    "--primary", path, "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert "28×28 grayscale" in done.stderr and "Traceback" not in done.stderr
    assert Ledger(ledger).records() == []   # refused before anything was charged
