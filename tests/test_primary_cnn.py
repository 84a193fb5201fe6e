"""The primary CNN, its central training, and the on-device metrics and selection for the GAN scenario."""

import collections
import json

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.data import client_data as cd
from fedgen_debug.kept import KeptArrays
from fedgen_debug.data import synthetic_images as si
from fedgen_debug.models import cnn
from fedgen_debug.device import gan_data
from fedgen_debug.training import presets, primary_cnn as pc
from fedgen_debug.selectors.criteria import ByExampleCorrectness, ByUserMetric, RandomExamples


class StubCNN:
    """A 'CNN' that reads an image's class from its intensity: a flat image of value c/9 is class c.

    Inverting the image (1 - c/9) therefore turns class c into 9 - c, like a real CNN's confusion.
    """

    output_shape = (None, 10)

    def __call__(self, x, training=False):
        predicted = np.rint(np.asarray(x)[:, 0, 0, 0] * 9).astype(int)
        return np.eye(10, dtype=np.float32)[predicted] * 5.0


def _client(shown, labels):
    pixels = np.stack([np.full((28, 28), c / 9, np.float32) for c in shown])
    return collections.OrderedDict(label=np.array(labels, np.int32), pixels=pixels)


def hand_built_clients() -> cd.ArrayClientData:
    """alice: 10/10 correct; bob: 6/10; carol: 2/8 digits (and 2 letters the digit CNN never sees)."""
    return cd.ArrayClientData({
        "alice": _client(range(10), range(10)),
        "bob": _client([1, 2, 3, 4, 5, 6, 7, 7, 7, 7], [1, 2, 3, 4, 5, 6, 0, 0, 0, 0]),
        "carol": _client([0, 1, 2, 2, 2, 2, 2, 2, 3, 3], [0, 1, 5, 5, 5, 5, 5, 5, 20, 30]),
    })


def test_per_example_and_per_user_outputs_on_the_device():
    data = hand_built_clients()
    examples = gan_data.device_examples(data, "carol", classes=10)
    assert list(examples["label"]) == [0, 1, 5, 5, 5, 5, 5, 5]  # the letters are not the app's business
    outputs = gan_data.device_outputs(StubCNN(), examples)
    assert list(outputs["correct"]) == [True, True] + [False] * 6
    np.testing.assert_allclose(outputs["confidence"], np.exp(5) / (np.exp(5) + 9))
    assert gan_data.user_accuracies(data, StubCNN()) == {"alice": 1.0, "bob": 0.6, "carol": 0.25}
    assert gan_data.accuracy_percentiles({"a": 0.0, "b": 0.5, "c": 1.0}) == {"p25": 0.25, "p75": 0.75}
    # With the bug on every device, no image shows its class any more.
    inverted = PixelInversionBug(1.0).apply(data)
    assert gan_data.user_accuracies(inverted, StubCNN()) == {"alice": 0.0, "bob": 0.0, "carol": 0.0}


@pytest.mark.parametrize("selector, users, examples", [
    (ByUserMetric("low", threshold=0.6), ("bob", "carol"), 18),
    (ByUserMetric("high", threshold=0.9), ("alice",), 10),
    (ByExampleCorrectness("misclassified", min_count=5), ("carol",), 6),  # bob has only 4
    (ByExampleCorrectness("correct", min_count=5), ("alice", "bob"), 16),  # carol has only 2
    (RandomExamples(), ("alice", "bob", "carol"), 28),
])
def test_selection_and_subpopulation_sizes(selector, users, examples):
    selected = gan_data.select_gan_data(hand_built_clients(), StubCNN(), selector)
    assert selected.client_ids == users
    assert selected.sizes() == {"users": len(users), "users_total": 3, "examples": examples,
                                "selector": selector.describe()}
    images = [selected.client_images(cid) for cid in users]
    assert sum(len(i) for i in images) == examples
    assert all(i.dtype == np.float32 and i.shape[1:] == (28, 28, 1) for i in images)


@pytest.mark.parametrize("budget, reads", [(gan_data.SELECTED_IMAGES_CACHE_BYTES, 1), (0, 3)])
def test_a_device_reads_its_selected_images_once_within_the_memory_budget(monkeypatch, budget, reads):
    selected = gan_data.select_gan_data(hand_built_clients(), StubCNN(), ByExampleCorrectness("misclassified"))
    monkeypatch.setattr(gan_data, "SELECTED_IMAGES_CACHE_BYTES", budget)
    read = []
    real_client_numpy = cd.client_numpy
    monkeypatch.setattr(cd, "client_numpy", lambda data, cid: read.append(cid) or real_client_numpy(data, cid))
    rounds = [selected.client_images("carol") for _ in range(3)]
    assert read == ["carol"] * reads
    for images in rounds:
        np.testing.assert_array_equal(images, np.full((6, 28, 28, 1), 2 * 2 / 9 - 1, np.float32))
    if reads == 1:  # the kept array cannot be changed by a round that uses it
        with pytest.raises(ValueError, match="read-only"):
            rounds[0][0, 0, 0, 0] = 0.0


def test_selected_images_are_the_devices_images_in_the_gan_range():
    selected = gan_data.select_gan_data(hand_built_clients(), StubCNN(), ByExampleCorrectness("misclassified"))
    carol = selected.client_images("carol")
    # carol's misclassified digits all show a 2: pixel 2/9, i.e. 2 * 2/9 - 1 in [-1, 1].
    np.testing.assert_allclose(carol, np.full((6, 28, 28, 1), 2 * 2 / 9 - 1), rtol=1e-6)
    assert next(iter(selected.client_dataset("carol"))).shape == (28, 28, 1)
    # T4 without a threshold says what to do, on the first device it meets.
    with pytest.raises(ValueError, match="needs a threshold"):
        gan_data.select_gan_data(hand_built_clients(), StubCNN(), ByUserMetric("low"))


def test_cnn_config_and_model_shapes():
    with pytest.raises(ValueError, match="num_classes must be >= 2. Found 1."):
        cnn.CNNConfig(num_classes=1)
    with pytest.raises(ValueError, match=r"conv_dropout must be in \[0, 1\). Found 1.0."):
        cnn.CNNConfig(conv_dropout=1.0)
    paper = cnn.build_cnn(cnn.CNNConfig(), seed=0)   # TFF's EMNIST CNN
    assert paper.output_shape == (None, 62)
    assert [layer.__class__.__name__ for layer in paper.layers] == [
        "Conv2D", "Conv2D", "MaxPooling2D", "Dropout", "Flatten", "Dense", "Dropout", "Dense"]
    images = np.random.default_rng(0).random((5, 28, 28)).astype(np.float32)
    assert cnn.logits(paper, images).shape == (5, 62)
    assert cnn.features(paper, images[..., None]).shape == (5, 128)
    small = presets.primary_cnn_config("test")
    same = [cnn.build_cnn(small, seed=3).get_weights(), cnn.build_cnn(small, seed=3).get_weights()]
    other = cnn.build_cnn(small, seed=4).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(*same))
    assert not np.array_equal(same[0][0], other[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = si.generate(si.SyntheticImagesConfig(writers=24, seed=5))
    path = str(tmp_path_factory.mktemp("primary") / "primary_cnn.npz")
    model = pc.train_primary_cnn(data, presets.primary_cnn_config("test"), seed=0, epochs=4, out_path=path)
    return data, model, path


def test_primary_cnn_learns_clean_digits_and_fails_on_inverted_ones(trained):
    data, model, path = trained
    info = json.load(open(pc.info_path(path)))
    assert (info["train_writers"], info["heldout_writers"]) == (22, 2)
    assert info["heldout_accuracy"] > 0.6  # chance: 0.1
    assert info["heldout_accuracy_inverted"] < info["heldout_accuracy"] - 0.3
    # Reloaded, it is the same model.
    images = cd.client_numpy(data, data.client_ids[0])["pixels"][:20]
    np.testing.assert_allclose(cnn.logits(pc.load_primary_cnn(path), images), cnn.logits(model, images), rtol=1e-5)
    with pytest.raises(ValueError, match="epochs must be >= 1. Found 0."):
        pc.train_primary_cnn(data, presets.primary_cnn_config("test"), seed=0, epochs=0, out_path=path)


def test_bugged_devices_fill_the_low_accuracy_population(trained):
    data, model, _ = trained
    bug = PixelInversionBug(0.5, seed=1)
    accuracies = gan_data.user_accuracies(bug.apply(data), model)
    hit = bug.affected_clients(data.client_ids)
    assert max(accuracies[c] for c in hit) < min(accuracies[c] for c in accuracies if c not in hit)
    low = gan_data.select_gan_data(bug.apply(data), model, ByUserMetric("low", threshold=0.3))
    assert set(low.client_ids) == hit
    # Its images are the inverted ones: dark backgrounds in the GAN range.
    assert np.median(low.client_images(sorted(hit)[0])[:, :3, :3]) < -0.5


@pytest.mark.parametrize("budget", [gan_data.DEVICE_OUTPUTS_CACHE_BYTES, 0])
def test_each_device_runs_the_primary_once_per_model_and_images(monkeypatch, trained, budget):
    """T4's accuracies and the selection, repeated by another run with the same primary loaded again,
    run the CNN once per device and version of its images; new weights or inverted images run it again."""
    data, _, path = trained
    monkeypatch.setattr(gan_data, "_outputs", KeptArrays(lambda: gan_data.DEVICE_OUTPUTS_CACHE_BYTES))
    monkeypatch.setattr(gan_data, "DEVICE_OUTPUTS_CACHE_BYTES", budget)
    calls = collections.Counter()
    logits = cnn.logits
    monkeypatch.setattr(gan_data.cnn, "logits", lambda model, images: calls.update([id(model)]) or logits(model, images))
    devices = len(data.client_ids)
    first, second = pc.load_primary_cnn(path), pc.load_primary_cnn(path)  # two runs' copies: new layer names
    want = gan_data.user_accuracies(data, first)
    assert gan_data.user_accuracies(data, second) == want
    selected = gan_data.select_gan_data(data, second, ByUserMetric("low", threshold=0.9))
    cached = budget > 0
    assert sum(calls.values()) == (devices if cached else 3 * devices)
    assert selected.population.size == sum(a < 0.9 for a in want.values())

    bug = PixelInversionBug(0.5, seed=1)
    inverted = len(bug.affected_clients(data.client_ids))  # the other devices' images are unchanged
    gan_data.user_accuracies(bug.apply(data), second)
    assert sum(calls.values()) == (devices + inverted if cached else 4 * devices)
    other = pc.load_primary_cnn(path)
    other.set_weights([w * 0.5 for w in other.get_weights()])
    gan_data.user_accuracies(data, other)
    assert sum(calls.values()) == (2 * devices + inverted if cached else 5 * devices)

    examples = gan_data.device_examples(data, data.client_ids[0], cnn.num_classes(first))
    kept = gan_data.kept_device_outputs(first, gan_data.weights_key(first), examples)
    fresh = gan_data.device_outputs(first, examples)
    np.testing.assert_array_equal(kept["correct"], fresh["correct"])
    np.testing.assert_array_equal(kept["confidence"], fresh["confidence"])
    if cached:
        with pytest.raises(ValueError, match="read-only"):
            kept["correct"][0] = True


def test_models_that_compute_different_things_do_not_share_outputs():
    small = presets.primary_cnn_config("test")
    same = [gan_data.weights_key(cnn.build_cnn(small, seed=3)), gan_data.weights_key(cnn.build_cnn(small, seed=3))]
    assert same[0] == same[1]
    assert gan_data.weights_key(cnn.build_cnn(small, seed=4)) != same[0]
    # The same weights behind another activation compute another function.
    linear, tanh = cnn.build_cnn(small, seed=3), cnn.build_cnn(small, seed=3)
    tanh.layers[-1].activation = tf.keras.activations.tanh
    assert gan_data.weights_key(tanh) != gan_data.weights_key(linear)
