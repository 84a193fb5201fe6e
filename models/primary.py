"""The modeler's own primary model (`train-gan --primary model.keras`): its contract, checked on load, and
the adapter that makes it answer as the tool's CNN does (`models.cnn`).

T2 and T4 must run the model the users really run: a stand-in trained on other handwriting may sit near
chance on the users' data, and then "low-accuracy users" are just users. The contract of a model file
(`.keras`, `.h5`, or a Keras SavedModel directory):

- **input**: one grayscale 28×28 image, shape [n, 28, 28], [n, 28, 28, 1] or flattened [n, 784] (row by
  row, as an MLP on MNIST takes it);
- **pixels** (`PrimaryContract`): `background` "white" (1.0 is paper, dark ink: FEMNIST as TFF stores it,
  and the tool's images) or "black" (0 is paper: MNIST's convention); `scale` 1 (pixels in [0, 1]) or 255;
- **output**: [n, K] class scores, K ≥ 2, as `logits` or `probabilities` (`auto`: probabilities when the
  last layer ends in a softmax).

`adapted` wraps the model so that it takes the tool's images ([n, 28, 28, 1] in [0, 1], 1.0 = white) and
returns logits (log-probabilities for a softmax model: the same argmax and softmax), with a `features`
layer, the input of the model's last layer, for the Fréchet distance (`models.cnn.features`). The wrapper
converts pixels only; an inversion bug upstream still reaches the model unchanged.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from fedgen_debug.models import cnn

BACKGROUNDS = ("white", "black")
OUTPUTS = ("auto", "logits", "probabilities")
SCALES = (1.0, 255.0)
MODEL_SUFFIXES = (".keras", ".h5")
INPUT_SHAPES = ((28, 28), (28, 28, 1), (784,))   # the last: flattened row by row (row-major, as numpy reshapes)


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
        return tf.reshape(pixels * self.scale, (-1, *self.target_shape))

    def get_config(self):
        return {**super().get_config(), "background": self.background, "scale": self.scale,
                "target_shape": list(self.target_shape)}


class _LogProbabilities(tf.keras.layers.Layer):
    def call(self, probabilities):
        return tf.math.log(tf.clip_by_value(probabilities, 1e-12, 1.0))


def _ends_in_softmax(model: tf.keras.Model) -> bool:
    last = model.layers[-1]
    activation = getattr(last, "activation", None)
    return isinstance(last, tf.keras.layers.Softmax) or getattr(activation, "__name__", "") == "softmax"


def check_contract(model: tf.keras.Model, path: str) -> None:
    """The model takes one 28×28 grayscale image and returns [n, K ≥ 2] class scores; else a clear error."""
    where = f"{path}: the primary model"
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"{where} must take one input and return one output. Found {len(model.inputs)} inputs, "
                         f"{len(model.outputs)} outputs.")
    shape = tuple(model.input_shape[1:])
    if shape not in INPUT_SHAPES:
        raise ValueError(f"{where} must take 28×28 grayscale images, shape [n, 28, 28], [n, 28, 28, 1] or "
                         f"[n, 784]. Found input shape {list(shape)}.")
    out = tuple(model.output_shape[1:])
    if len(out) != 1 or out[0] is None or out[0] < 2:
        raise ValueError(f"{where} must return [n, K] class scores with K >= 2. Found output shape {list(out)}.")


def adapted(model: tf.keras.Model, contract: PrimaryContract) -> tf.keras.Model:
    """`model` behind the tool's interface: tool images in, logits out, a `features` layer (`models.cnn`)."""
    images = tf.keras.Input(shape=(28, 28, 1))
    pixels = _ToModelPixels(contract.background, contract.scale, model.input_shape[1:])(images)
    inner = tf.keras.Model(model.inputs, [model.layers[-1].input, model.outputs[0]])
    penultimate, scores = inner(pixels)
    features = tf.keras.layers.Flatten(name=cnn.FEATURES_LAYER)(penultimate)
    probabilities = contract.output == "probabilities" or (contract.output == "auto" and _ends_in_softmax(model))
    logits = _LogProbabilities(name="logits")(scores) if probabilities else \
        tf.keras.layers.Activation("linear", name="logits")(scores)
    wrapper = tf.keras.Model(images, logits, name="primary")
    wrapper.features_model = tf.keras.Model(images, features)   # `models.cnn.features` reads it
    return wrapper


def load_model_file(path: str, contract: PrimaryContract) -> tf.keras.Model:
    """The model at `path`, checked against the contract and adapted."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such primary model file or directory.")
    try:
        model = tf.keras.models.load_model(path, compile=False)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a Keras model fedgen-debug can load ({error}).") from None
    check_contract(model, path)
    return adapted(model, contract)
