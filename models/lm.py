"""The paper's language models (augenstein2020 App. B.2) built on the CIFG cell. Their presets (the
demo's and the tests' sizes) are data in `fedgen_debug.training.presets`.

- word-LM: embedding 96 → CIFG 670 with projection 96 → softmax over the vocabulary's ids
  (10K words + pad/oov/bos/eos).
- char-LM: embedding 128 → 3 × CIFG 256 with projection 128 → softmax over 258 symbols: the 256
  UTF-8 byte values plus begin- and end-of-word. Sequences are padded with end-of-word, so the model
  learns that nothing follows it and sampling stops there.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from fedgen_debug.models.cifg import CIFGCell
from fedgen_debug.validation import check_at_least


@dataclasses.dataclass(frozen=True)
class LMConfig:
    vocab_size: int            # number of output symbols (ids)
    embedding_dim: int
    units: int
    projection_units: int | None
    layers: int = 1

    def __post_init__(self):
        for name in ("vocab_size", "embedding_dim", "units", "layers"):
            check_at_least(name, getattr(self, name), 1)


CHAR_VOCAB = 258
BOW, EOW = 256, 257


class StaticUnrollRNN(tf.keras.layers.RNN):
    """Keras' RNN, unrolled in a traced graph whose time axis has a static length (training batches)
    and a `tf.while_loop` otherwise. Why: the LMs' sequences are short (16-20 steps) and a client's
    step is launch-bound; unrolled, a demo char-LM round is faster (the same ops in the same order;
    docs/performance.md, "Profiled on the AMD EPYC"). Eager calls (sampling) keep the loop: unrolled
    they were slower. `unroll=True` alone cannot be used: the model is built with an
    unknown time length."""

    def call(self, inputs, mask=None, training=None, initial_state=None, constants=None):
        self.unroll = inputs.shape[1] is not None and not tf.executing_eagerly()
        return super().call(inputs, mask=mask, training=training, initial_state=initial_state, constants=constants)


def build_lm(config: LMConfig, seed: int = 0) -> tf.keras.Model:
    layers = [tf.keras.layers.Embedding(config.vocab_size, config.embedding_dim,
                                        embeddings_initializer=tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed))]
    for layer in range(config.layers):
        layers.append(StaticUnrollRNN(CIFGCell(config.units, config.projection_units, seed=seed + layer),
                                      return_sequences=True))
    layers.append(tf.keras.layers.Dense(config.vocab_size,
                                        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed)))
    return tf.keras.Sequential(layers)


class TokenCrossentropy(tf.keras.losses.SparseCategoricalCrossentropy):
    """The LMs' training loss: Keras' `SparseCategoricalCrossentropy(from_logits=True)` (the mean over every
    token of −log softmax(logits)[label]), computed as logsumexp minus the label's logit. Why: TF's fused
    kernel computes the softmax's gradient in the forward pass too (a second pass over every logit and a
    tensor of their size written), and autodiff of this form takes it once: a demo word-LM client step
    is faster on CPUs without AVX-512 (docs/performance.md, "A CPU without AVX-512"), with the same
    loss and gradients to float rounding (tests/test_models.py). A subclass, so
    that what accepts the Keras loss (TFF's `from_keras_model`, `vectorized_lm.supports`) accepts it."""

    def __init__(self, reduction=tf.keras.losses.Reduction.AUTO, name: str = "token_crossentropy",
                 from_logits: bool = True, ignore_class=None):
        if not from_logits or ignore_class is not None:
            raise ValueError("TokenCrossentropy takes logits and no ignored class.")
        super().__init__(from_logits=True, reduction=reduction, name=name)

    def call(self, y_true, y_pred):
        labels = tf.cast(y_true, tf.int32)
        return tf.reduce_logsumexp(y_pred, axis=-1) - tf.gather(y_pred, labels, batch_dims=len(labels.shape))
