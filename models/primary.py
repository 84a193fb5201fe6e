"""The modeler's own primary model (`train-gan --primary model.keras`): its contract, checked on load, and
the adapter that makes it answer as the tool's CNN does (`models.cnn`).

T2 and T4 must run the model the users really run: a stand-in trained on other handwriting may sit near
chance on the users' data, and then "low-accuracy users" are just users. The contract of a model file
(`.keras`, `.h5`, or a Keras SavedModel directory):

- **input**: one grayscale 28×28 image, shape [n, 28, 28], [n, 28, 28, 1], flattened [n, 784] (row by
  row, as an MLP on MNIST takes it) or [n, 28, 28, 3] (the gray copied to each channel); a dimension the
  model leaves open (None, as a fully convolutional model does) takes the contract's size;
- **kind**: a Keras model with a layer graph (Sequential or functional, submodels nested in it), or one
  without (a subclassed Keras model, or a SavedModel of a `tf.Module` called directly or through its
  `serving_default` signature): that one is called on each shape above in turn, and the first it answers
  decides;
- **pixels** (`PrimaryContract`): `background` "white" (1.0 is paper, dark ink: FEMNIST as TFF stores it,
  and the tool's images) or "black" (0 is paper: MNIST's convention); `scale` 1 (pixels in [0, 1]) or 255;
- **output**: [n, K] class scores, K ≥ 2, as `logits` or `probabilities` (`auto`: probabilities when the
  last layer ends in a softmax).

`adapted` wraps the model so that it takes the tool's images ([n, 28, 28, 1] in [0, 1], 1.0 = white) and
returns logits (log-probabilities for a softmax model: the same argmax and softmax), with a `features`
layer for the Fréchet distance (`models.cnn.features`): the input of the model's last layer (of the last
layer of a nested last submodel), or the class scores when the model has no layer graph to read it from.
The wrapper converts pixels only; an inversion bug upstream still reaches the model unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.models import cnn

BACKGROUNDS = ("white", "black")
OUTPUTS = ("auto", "logits", "probabilities")
SCALES = (1.0, 255.0)
MODEL_SUFFIXES = (".keras", ".h5")
# The last two: flattened row by row (row-major, as numpy reshapes); the gray copied into three channels.
INPUT_SHAPES = ((28, 28), (28, 28, 1), (784,), (28, 28, 3))
_PROBE_BATCH = 2

@dataclasses.dataclass(frozen=True)
class PrimaryContract:
    background: str = "white"
    output: str = "auto"
    scale: float = 1.0

    def __post_init__(self):
        if self.background not in BACKGROUNDS:
            raise ValueError(f"background must be one of {', '.join(BACKGROUNDS)}. Found {self.background!r}.")
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}. Found {self.output!r}.")
        if float(self.scale) not in SCALES:
            raise ValueError(f"scale must be 1 or 255. Found {self.scale}.")


def is_model_file(path: str) -> bool:
    """A Keras model file or SavedModel directory (not the tool's own `.npz` CNN weights)."""
    return path.endswith(MODEL_SUFFIXES) or os.path.isfile(os.path.join(path, "saved_model.pb"))


class _ToModelPixels(tf.keras.layers.Layer):
    """The tool's pixels ([0, 1], 1.0 = white) in the model's convention and input shape."""

    def __init__(self, background: str, scale: float, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.background, self.scale, self.target_shape = background, float(scale), tuple(target_shape)

    def call(self, images):
        pixels = images if self.background == "white" else 1.0 - images
        if self.target_shape[-1] == 3:
            pixels = tf.repeat(pixels, 3, axis=-1)
        return tf.reshape(pixels * self.scale, (-1, *self.target_shape))

    def get_config(self):
        return {**super().get_config(), "background": self.background, "scale": self.scale,
                "target_shape": list(self.target_shape)}


class _LogProbabilities(tf.keras.layers.Layer):
    def call(self, probabilities):
        return tf.math.log(tf.clip_by_value(probabilities, 1e-12, 1.0))


class _Scores(tf.keras.layers.Layer):
    """A model without a layer graph (`_callable_scores`) as a layer: pixels in, float32 class scores out.
    Its configuration is a digest of its scores on fixed random pixels: what it computes, for the caches
    keyed on a model's layers' configurations and weights (`device.gan_data.weights_key`), since the loaded
    object's variables are not the layer's weights."""

    def __init__(self, scores_fn, shape, **kwargs):
        super().__init__(trainable=False, **kwargs)
        self._scores_fn = [scores_fn]   # in a list: Keras does not track the loaded object as a sublayer
        probe = tf.random.stateless_uniform((8, *shape), seed=(0, 1))
        self.scores_digest = hashlib.blake2b(np.asarray(scores_fn(probe), np.float32).tobytes(),
                                             digest_size=16).hexdigest()

    def call(self, pixels):
        return tf.cast(self._scores_fn[0](pixels), tf.float32)

    def get_config(self):
        return {**super().get_config(), "scores_digest": self.scores_digest}


def _ends_in_softmax(model) -> bool:
    if not isinstance(model, tf.keras.Model) or not model.layers:
        return False
    last = model.layers[-1]
    if isinstance(last, tf.keras.Model):
        return _ends_in_softmax(last)
    activation = getattr(last, "activation", None)
    return isinstance(last, tf.keras.layers.Softmax) or getattr(activation, "__name__", "") == "softmax"


def _contract_shape(shape) -> tuple | None:
    """The contract's input shape `shape` ([28, None, 1] and the like included) accepts, or None."""
    for allowed in INPUT_SHAPES:
        if len(shape) == len(allowed) and all(d is None or d == a for d, a in zip(shape, allowed)):
            return allowed
    return None


def _has_graph(model) -> bool:
    return isinstance(model, tf.keras.Model) and bool(getattr(model, "inputs", None))


def _callable_scores(loaded):
    """The scoring function of a model without a layer graph: the object itself when callable, else its
    `serving_default` signature with one input and one output. None: neither."""
    if callable(loaded):
        return loaded
    signature = getattr(loaded, "signatures", {}).get("serving_default")
    if signature is None:
        return None
    inputs, outputs = signature.structured_input_signature[1], signature.structured_outputs
    if len(inputs) != 1 or len(outputs) != 1:
        return None
    ((name, spec),) = inputs.items()
    (out,) = outputs.keys()
    return lambda pixels: signature(**{name: tf.cast(pixels, spec.dtype)})[out]


def _probed_shape(scores_fn) -> tuple[tuple, tuple] | None:
    """(input shape, output shape) of the first contract shape `scores_fn` answers, or None."""
    for shape in INPUT_SHAPES:
        try:
            out = scores_fn(tf.zeros((_PROBE_BATCH, *shape), tf.float32))
        except (ValueError, TypeError, tf.errors.InvalidArgumentError):
            continue
        return shape, tuple(getattr(out, "shape", ())[1:])
    return None


def check_contract(model, path: str) -> tuple:
    """The model takes one 28×28 grayscale image and returns [n, K ≥ 2] class scores; else a clear error.
    Returns the contract input shape it takes."""
    where = f"{path}: the primary model"
    if _has_graph(model):
        if len(model.inputs) != 1 or len(model.outputs) != 1:
            raise ValueError(f"{where} must take one input and return one output. Found {len(model.inputs)} "
                             f"inputs, {len(model.outputs)} outputs.")
        given = tuple(model.input_shape[1:])
        shape, out = _contract_shape(given), tuple(model.output_shape[1:])
    else:
        scores_fn = _callable_scores(model)
        if scores_fn is None:
            raise ValueError(f"{where} is neither callable nor has a serving_default signature with one "
                             f"input and one output.")
        probed = _probed_shape(scores_fn)
        given, (shape, out) = "none it answers", probed or (None, ())
    if shape is None:
        raise ValueError(f"{where} must take 28×28 grayscale images, shape [n, 28, 28], [n, 28, 28, 1], "
                         f"[n, 784] or [n, 28, 28, 3]. Found input shape "
                         f"{list(given) if isinstance(given, tuple) else given}.")
    if len(out) != 1 or out[0] is None or out[0] < 2:
        raise ValueError(f"{where} must return [n, K] class scores with K >= 2. Found output shape {list(out)}.")
    return shape


def _answers_probabilities(scores_fn, shape) -> bool:
    """`auto` for a model without a layer graph to read a softmax from: its scores on random public pixels are
    non-negative and sum to 1 in every row."""
    pixels = tf.random.stateless_uniform((8, *shape), seed=(0, 0))
    scores = tf.cast(scores_fn(pixels), tf.float64).numpy()
    return bool((scores >= 0).all() and abs(scores.sum(axis=1) - 1.0).max() < 1e-3)


def _working(extractor, shape) -> bool:
    try:
        extractor(tf.zeros((_PROBE_BATCH, *shape), tf.float32))
        return True
    except Exception:   # noqa: BLE001 -- any failure means: read the features elsewhere
        return False


def _penultimate(model, shape):
    """A Keras model from the model's input to the input of its last layer (recursing into a last layer that
    is itself a model), or None when the graph does not give one that runs."""
    if not _has_graph(model) or not model.layers:
        return None
    last = model.layers[-1]
    try:
        extractor = tf.keras.Model(model.inputs, last.input)
        if _working(extractor, shape):
            return extractor
    except Exception:   # noqa: BLE001 -- a nested or shared last layer: its .input is not in this graph
        pass
    if _has_graph(last) and len(model.layers) >= 2:
        inner = _penultimate(last, tuple(last.input_shape[1:]))
        if inner is not None:
            try:
                prefix = tf.keras.Model(model.inputs, model.layers[-2].output)
                images = tf.keras.Input(shape)
                extractor = tf.keras.Model(images, inner(prefix(images)))
                if _working(extractor, shape):
                    return extractor
            except Exception:   # noqa: BLE001
                pass
    return None


def adapted(model, contract: PrimaryContract, shape: tuple) -> tf.keras.Model:
    """`model` behind the tool's interface: tool images in, logits out, a `features` layer (`models.cnn`).
    `shape`: the contract input shape it takes (`check_contract`)."""
    images = tf.keras.Input(shape=(28, 28, 1))
    pixels = _ToModelPixels(contract.background, contract.scale, shape)(images)
    if _has_graph(model):
        scores = model(pixels)
        extractor = _penultimate(model, shape)
        penultimate = extractor(pixels) if extractor is not None else scores
        softmax = _ends_in_softmax(model)
    else:
        scores_fn = _callable_scores(model)
        scores = penultimate = _Scores(scores_fn, shape)(pixels)
        softmax = _answers_probabilities(scores_fn, shape)
    features = tf.keras.layers.Flatten(name=cnn.FEATURES_LAYER)(penultimate)
    probabilities = contract.output == "probabilities" or (contract.output == "auto" and softmax)
    logits = _LogProbabilities(name="logits")(scores) if probabilities else \
        tf.keras.layers.Activation("linear", name="logits")(scores)
    wrapper = tf.keras.Model(images, logits, name="primary")
    # `models.cnn.features` reads it. Set past Keras' attribute tracking: as a tracked sublayer its configuration
    # (with per-process layer names) would enter the digest of what the wrapper computes (`weights_key`).
    object.__setattr__(wrapper, "features_model", tf.keras.Model(images, features))
    return wrapper


def _load(path: str):
    """Keras' loader for Keras files; TF's for a SavedModel Keras did not write (no keras_metadata.pb), which
    Keras would load with a misleading warning."""
    keras_written = not os.path.isdir(path) or os.path.isfile(os.path.join(path, "keras_metadata.pb"))
    if keras_written:
        return tf.keras.models.load_model(path, compile=False)
    return tf.saved_model.load(path)


def load_model_file(path: str, contract: PrimaryContract) -> tf.keras.Model:
    """The model at `path`, checked against the contract and adapted."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such primary model file or directory.")
    try:
        model = _load(path)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a Keras model fedgen-debug can load ({error}). A model whose Python "
                         f"code Keras cannot rebuild (a subclassed model, a custom or Lambda layer) loads as a "
                         f"SavedModel directory: model.save(DIRECTORY, save_format='tf').") from None
    shape = check_contract(model, path)
    return adapted(model, contract, shape)
