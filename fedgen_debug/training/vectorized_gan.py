"""DP-FedAvg-GAN's client discriminator updates for a whole round at once: the `tf` backend's fast path.

A demo round is launch-bound: 50 clients × 6 WGAN-GP steps of a 15K-parameter critic are thousands of
tiny ops each (`benchmarks/gan_round.py`). Here every op works on all the round's clients together,
which is the same algorithm (`dp_fedavg_gan.client_discriminator_update`, the reference) computed
differently:

- D is rebuilt functionally from the Keras model, with a leading client axis on every weight ([C, ...]):
  Dense as an einsum, Conv2D as one grouped convolution with the clients folded into channels (TF's
  own kernels, twice differentiable for the gradient penalty; an im2col of strided slices was several
  times slower), except on one input channel, where one shared convolution takes the patches and an einsum
  applies each client's kernel (oneDNN's grouped input gradient is slow with one channel per group; the
  patches' own input gradient runs as a stride-1 convolution, `subpixel_conv`).
  Each client's loss depends only on its own weights, so the gradient of the summed loss is each
  client's own gradient.
- G (fixed during a round) runs through its own Keras layers on all clients' noise at once, except
  BatchNormalization, whose training-mode statistics are taken per client batch (masked), as each
  client's G call takes them over its own batch.
- Clients with fewer than n batches, or a smaller last batch, are padded and masked: a step is
  computed for the clients with a batch there only (the others' weights stay), and padded examples
  enter no mean. Noise and interpolation coefficients are drawn for the padded batch from the client's
  per-step seed; stateless draws are prefix-stable, so the first b rows are the reference's (checked
  in the tests). The client axis needs no static size, so a run can trace its round once.

`vectorized_client_updates` returns one update per client, zeroed as `usable_update` zeroes it. Which
models it supports is decided by `supports(gen, disc)`: Sequential models of
Dense / Conv2D (no dilation or groups) / LeakyReLU / ReLU / Activation / Flatten / Reshape /
Conv2DTranspose / UpSampling2D / BatchNormalization layers; anything else runs client by client. So does a critic
with convolutions where TF cannot differentiate a grouped convolution twice (`runs_here`: TF's own CPU
kernels cannot; oneDNN's and the GPU's can, see `fedgen_debug/__init__.py`).
"""

from __future__ import annotations

import functools
import logging
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.training import dp_fedavg_gan, subpixel_conv

logger = logging.getLogger(__name__)
_ELEMENTWISE = (tf.keras.layers.LeakyReLU, tf.keras.layers.ReLU, tf.keras.layers.Activation)
_DISC_LAYERS = (tf.keras.layers.Dense, tf.keras.layers.Conv2D, tf.keras.layers.Flatten, *_ELEMENTWISE)
_GEN_LAYERS = (tf.keras.layers.Dense, tf.keras.layers.Conv2D, tf.keras.layers.Conv2DTranspose,
               tf.keras.layers.UpSampling2D, tf.keras.layers.BatchNormalization, tf.keras.layers.Reshape,
               *_ELEMENTWISE)


def _plain_conv(layer) -> bool:
    return (tuple(layer.dilation_rate) == (1, 1) and getattr(layer, "groups", 1) == 1
            and layer.data_format == "channels_last" and layer.padding in ("same", "valid"))


def supports(gen: tf.keras.Model, disc: tf.keras.Model) -> bool:
    def ok(model, kinds, conv_types):
        return isinstance(model, tf.keras.Sequential) and all(
            isinstance(layer, kinds) and (not isinstance(layer, conv_types) or _plain_conv(layer))
            for layer in model.layers)
    disc_ok = ok(disc, _DISC_LAYERS, (tf.keras.layers.Conv2D,)) and not any(
        isinstance(layer, tf.keras.layers.Conv2DTranspose) for layer in disc.layers)
    gen_ok = ok(gen, _GEN_LAYERS, (tf.keras.layers.Conv2D,)) and all(
        layer.axis in ([-1], [len(layer.input_shape) - 1]) for layer in gen.layers
        if isinstance(layer, tf.keras.layers.BatchNormalization))
    return disc_ok and gen_ok


@functools.lru_cache(maxsize=None)
def grouped_conv_gradients() -> bool:
    """Whether TF, here, differentiates a grouped convolution twice (the critic's gradient penalty
    differentiates its gradient): a probe on a 4×4 image, once per process."""
    images = tf.ones([1, 4, 4, 2])
    kernel = tf.ones([3, 3, 1, 2])  # 2 groups of 1 input channel
    try:
        with tf.GradientTape() as outer:
            outer.watch(kernel)
            with tf.GradientTape() as inner:
                inner.watch(images)
                out = tf.reduce_sum(tf.nn.conv2d(images, kernel, 1, "SAME") ** 2)
            penalty = tf.reduce_sum(inner.gradient(out, images) ** 2)
        outer.gradient(penalty, kernel)
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        return False
    return True


def runs_here(disc: tf.keras.Model) -> bool:
    """Whether `vectorized_client_updates` can run on this machine for a `supports`-ed critic: one
    without convolutions always; one with them where grouped convolutions are twice differentiable."""
    if not any(isinstance(layer, tf.keras.layers.Conv2D) for layer in disc.layers) or grouped_conv_gradients():
        return True
    logger.warning(
        "TensorFlow cannot differentiate grouped convolutions on this CPU (oneDNN is off: "
        "TF_ENABLE_ONEDNN_OPTS=%s): the GAN's clients run one by one, slower; leave TF_ENABLE_ONEDNN_OPTS "
        "unset (fedgen_debug sets it to 1 when imported before TensorFlow) for the vectorized round",
        os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"))
    return False


# ---- D with a client axis ------------------------------------------------------------------------

def _conv_per_client(x, kernel, layer):
    """x [C, B, H, W, cin], kernel [C, kh, kw, cin, cout] → [C, B, oh, ow, cout] (Keras' Conv2D per
    client), by whichever formulation is faster for `cin` on oneDNN; both are TF's own kernels, twice
    differentiable for the gradient penalty."""
    if x.shape[-1] == 1:
        return _single_channel_conv_per_client(x, kernel, layer)
    return _grouped_conv_per_client(x, kernel, layer)


def _grouped_conv_per_client(x, kernel, layer):
    """The clients folded into channels and one grouped convolution."""
    clients, cin, cout = tf.shape(x)[0], x.shape[-1], kernel.shape[-1]
    batch, height, width = tf.shape(x)[1], x.shape[2], x.shape[3]
    folded = tf.reshape(tf.transpose(x, [1, 2, 3, 0, 4]), [batch, height, width, clients * cin])
    filters = tf.reshape(tf.transpose(kernel, [1, 2, 3, 0, 4]), [*kernel.shape[1:4], clients * cout])
    y = tf.nn.conv2d(folded, filters, strides=layer.strides, padding=layer.padding.upper())
    y = tf.reshape(y, [batch, y.shape[1], y.shape[2], clients, cout])
    return tf.transpose(y, [3, 0, 1, 2, 4])


def _single_channel_conv_per_client(x, kernel, layer):
    """One input channel (the critic's first layer on grayscale images): every kh×kw patch taken by one
    ordinary convolution with a one-hot filter shared by all clients, then each client's kernel applied
    to its patches by an einsum. Why not the grouped convolution: with one channel per group, oneDNN's
    input gradient (the gradient penalty's) was a large share of a demo step, and patches take this
    layer's forward, gradient and penalty gradient in a fraction of the time. With 8 channels the grouped
    one is faster than patches, so it stays there (timings: docs/performance.md)."""
    clients, batch = tf.shape(x)[0], tf.shape(x)[1]
    kh, kw, _, cout = kernel.shape[1:]
    images = tf.reshape(x, [-1, *x.shape[2:]])
    if subpixel_conv.supported((kh, kw), layer.strides, layer.padding):
        # Its input gradient (the penalty's) as a stride-1 convolution: oneDNN's strided kernel is slow
        # without AVX-512 (`subpixel_conv`).
        patches = subpixel_conv.patches((kh, kw), layer.strides[0], tuple(x.shape[2:4]))(images)
    else:
        patches = tf.nn.conv2d(images, subpixel_conv.one_hot_patch_filter((kh, kw), x.dtype), strides=layer.strides,
                               padding=layer.padding.upper())
    patches = tf.reshape(patches, [clients, batch, patches.shape[1], patches.shape[2], kh * kw])
    return tf.einsum("cbhwp,cpo->cbhwo", patches, tf.reshape(kernel, [clients, kh * kw, cout]))


def _activation(layer, x):
    if isinstance(layer, tf.keras.layers.LeakyReLU):
        return tf.nn.leaky_relu(x, alpha=float(layer.alpha))
    return layer(x) if isinstance(layer, _ELEMENTWISE) else layer.activation(x)


def disc_forward(disc: tf.keras.Sequential, weights: dict, x):
    """D(x) per client: x [C, B, *image], `weights` {variable ref: [C, *shape]} → scores [C, B, 1]."""
    for layer in disc.layers:
        if isinstance(layer, tf.keras.layers.Dense):
            x = tf.einsum("cbi,cio->cbo", x, weights[layer.kernel.ref()])
        elif isinstance(layer, tf.keras.layers.Conv2D):
            x = _conv_per_client(x, weights[layer.kernel.ref()], layer)
        elif isinstance(layer, tf.keras.layers.Flatten):
            x = tf.reshape(x, [tf.shape(x)[0], tf.shape(x)[1], -1])
            continue
        else:
            x = _activation(layer, x)
            continue
        if layer.use_bias:
            bias = weights[layer.bias.ref()]
            x = x + tf.reshape(bias, [tf.shape(bias)[0], 1] + [1] * (len(x.shape) - 3) + [-1])
        x = _activation(layer, x)
    return x


def _regularization(disc: tf.keras.Sequential, weights: dict):
    """Σ over clients of each client's Keras regularization losses (L2 sums split by client)."""
    total = tf.constant(0.0)
    for layer in disc.layers:
        for name in ("kernel", "bias"):
            regularizer = getattr(layer, f"{name}_regularizer", None)
            if regularizer is not None and getattr(layer, name, None) is not None:
                total += regularizer(weights[getattr(layer, name).ref()])
    return total


# ---- G on all clients' noise, batch statistics per client batch -----------------------------------

def gen_forward_grouped(gen: tf.keras.Sequential, noise, mask):
    """G(noise) in training mode for groups of batches: noise [G, B, dim], mask [G, B] (1 = a real row).
    Every layer but BatchNormalization runs on all rows; BN normalizes each group by its own masked
    batch mean and (biased) variance, as a training-mode BN call on that group's rows alone does.
    G's forward pass is a large share of a demo round (6 × 1,024 fakes at 32 clients), so two layers
    take a faster route to the same values: BN with the ReLU after it as one XLA-compiled function (its
    elementwise passes fused), and a convolution with one output channel (the image) as a depthwise
    convolution summed over channels (oneDNN's convolution with one filter ran at a fraction of the
    transposed ones' rate). Timings: docs/performance.md."""
    groups, batch = tf.shape(noise)[0], tf.shape(noise)[1]
    x = tf.reshape(noise, [groups * batch, noise.shape[-1]])
    layers = list(gen.layers)
    i = 0
    while i < len(layers):
        layer = layers[i]
        i += 1
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            relu = i < len(layers) and _plain_relu(layers[i])
            i += relu
            x = _grouped_batch_norm(x, mask, layer.gamma if layer.scale else None,
                                    layer.beta if layer.center else None, float(layer.epsilon), relu)
        elif _one_filter_conv(layer):
            x = _one_filter_conv_forward(layer, x)
        else:  # per example: all rows at once
            x = layer(x, training=True)
    return tf.reshape(x, tf.concat([[groups, batch], tf.shape(x)[1:]], 0))


def _plain_relu(layer) -> bool:
    return (isinstance(layer, tf.keras.layers.ReLU) and layer.max_value is None
            and float(layer.negative_slope) == 0.0 and float(layer.threshold) == 0.0)


@tf.function(jit_compile=True)
def _grouped_batch_norm(x, mask, gamma, beta, epsilon: float, relu: bool):
    """x [G·B, ...] normalized per group of B rows by the group's masked mean and biased variance
    (mask [G, B]), then scaled and shifted as Keras' BN, then ReLU'd if `relu`."""
    grouped = tf.reshape(x, tf.concat([tf.shape(mask), tf.shape(x)[1:]], 0))
    weights = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([len(x.shape) - 1], tf.int32)], 0))
    axes = list(range(1, len(x.shape)))
    count = tf.reduce_sum(weights * tf.ones_like(grouped), axis=axes, keepdims=True)
    mean = tf.reduce_sum(weights * grouped, axis=axes, keepdims=True) / tf.maximum(count, 1.0)
    variance = tf.reduce_sum(weights * tf.square(grouped - mean), axis=axes, keepdims=True) / tf.maximum(count, 1.0)
    normalized = (grouped - mean) * tf.math.rsqrt(variance + epsilon)
    if gamma is not None:
        normalized *= gamma
    if beta is not None:
        normalized += beta
    if relu:
        normalized = tf.nn.relu(normalized)
    return tf.reshape(normalized, tf.shape(x))


def _one_filter_conv(layer) -> bool:
    return (isinstance(layer, tf.keras.layers.Conv2D) and not isinstance(layer, tf.keras.layers.Conv2DTranspose)
            and layer.filters == 1 and layer.strides[0] == layer.strides[1])


def _one_filter_conv_forward(layer, x):
    """Keras' Conv2D with one filter: per channel (depthwise), then summed over the channels."""
    kernel = layer.kernel  # [kh, kw, cin, 1]: as a depthwise kernel, channel multiplier 1
    y = tf.reduce_sum(tf.nn.depthwise_conv2d(x, kernel, [1, *layer.strides, 1], layer.padding.upper()),
                      axis=-1, keepdims=True)
    if layer.use_bias:
        y += layer.bias
    return layer.activation(y)


# ---- the round's client updates ------------------------------------------------------------------

def _masked_mean(values, mask):
    return tf.reduce_sum(values * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def vectorized_client_updates(gen, disc, real, example_mask, seeds, disc_weights, gen_weights, learning_rate: float,
                              gradient_penalty_weight: float):
    """All clients' D updates θ_D⁰ − θ_D. real [C, n, B, *image]; example_mask [C, n, B]; seeds [C, n, 2]
    (each client step's stateless seed, as `client_step_seeds`); a step whose mask row is all zero is not
    taken, and each client's batches are its first steps (as `pack_clients` packs them). C may be
    unknown when traced. Returns a list like `disc_weights`, each [C, *shape]."""
    for variable, value in zip(gen.trainable_variables, gen_weights):
        variable.assign(value)
    clients, batch = tf.shape(real)[0], real.shape[2]
    noise_dim = gen.input_shape[-1]
    refs = [v.ref() for v in disc.trainable_variables]
    initial = [tf.tile(w[None], [clients] + [1] * len(w.shape)) for w in disc_weights]
    has_batch = tf.reduce_any(example_mask > 0, axis=2)  # [C, n]: a client's batches are its first steps

    def step(t, current):
        # Step t is computed for the clients with a batch there only (a client holding fewer than n·B
        # examples has fewer steps: ~10% of a demo round's client steps), the others' weights stay.
        active = tf.where(has_batch[:, t])[:, 0]
        mask = tf.gather(example_mask[:, t], active)
        # Each client's draws from its step seed, as the reference draws them; a loop in the graph, not
        # C ops per step (unrolled, the graph and its tracing time grew with clients and steps).
        noise, alpha = tf.map_fn(lambda seed: dp_fedavg_gan.client_step_draws(seed, batch, noise_dim),
                                 tf.gather(seeds[:, t], active), fn_output_signature=(tf.float32, tf.float32))
        fake = gen_forward_grouped(gen, noise, mask)
        x = tf.gather(real[:, t], active)
        per_example = [-1, batch] + [1] * (len(x.shape) - 2)
        interpolates = x + tf.reshape(alpha, per_example) * (fake - x)
        own = [tf.gather(w, active) for w in current]
        with tf.GradientTape() as tape:
            tape.watch(own)
            weights = dict(zip(refs, own))
            # Real and fake rows through D in one call (D has no batch statistics: each row's score is
            # its own), half the launches of two calls.
            real_scores, fake_scores = tf.split(disc_forward(disc, weights, tf.concat([x, fake], 1))[..., 0], 2, axis=1)
            wasserstein = _masked_mean(fake_scores, mask) - _masked_mean(real_scores, mask)
            with tf.GradientTape() as inner:
                inner.watch(interpolates)
                scores = disc_forward(disc, weights, interpolates)
            gradients = inner.gradient(scores, interpolates)
            slopes = tf.sqrt(tf.reduce_sum(tf.square(gradients), axis=list(range(2, len(x.shape)))) + 1e-10)
            penalty = _masked_mean(tf.square(slopes - 1.0), mask)
            loss = tf.reduce_sum(wasserstein + gradient_penalty_weight * penalty) + _regularization(disc, weights)
        grads = tape.gradient(loss, own)
        return t + 1, [tf.tensor_scatter_nd_sub(w, active[:, None], learning_rate * g) for w, g in zip(current, grads)]

    # The steps as a graph loop: its body is traced once, where unrolled steps traced n copies of the
    # double backprop (most of a round's tracing time). It stops after the last step any client has, so
    # no step runs on no clients.
    steps = tf.reduce_max(tf.reduce_sum(tf.cast(has_batch, tf.int32), axis=1))
    _, current = tf.while_loop(lambda t, _: t < steps, step, (tf.constant(0), initial))
    updates = [w0 - w for w0, w in zip(initial, current)]
    usable = tf.map_fn(dp_fedavg_gan.usable_update, updates, fn_output_signature=tf.bool)  # per client
    return [tf.where(tf.reshape(usable, [-1] + [1] * (len(u.shape) - 1)), u, tf.zeros_like(u)) for u in updates]


def rows_to_compute(example_mask: np.ndarray, multiple: int = 8) -> np.ndarray:
    """Which clients of a packed round to compute: those with a batch first, then clients without one
    up to the next multiple of `multiple` (a few distinct shapes, so a few traces per run, for a call
    with a static client axis; `GANRounds`' has none and takes `multiple=1`). A client without a batch
    sends exactly zero, which adds nothing to the DP sum, so leaving it out changes no sum; under
    strict selection most sampled clients of a small population have no batch."""
    has_batch = example_mask.reshape(len(example_mask), -1).any(axis=1)
    order = np.concatenate([np.flatnonzero(has_batch), np.flatnonzero(~has_batch)])
    size = min(len(order), max(multiple, -(-int(has_batch.sum()) // multiple) * multiple))
    return order[:size]


def pack_clients(datasets, steps: int, batch: int, step_seeds, image_shape,
                 cycle: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(real [C, n, B, *image], example_mask [C, n, B], seeds [C, n, 2]) from the round's client data
    (tf.data datasets of real batches, or arrays of examples batched here as `client_batches` batches
    them, cycled with `cycle`) and their step seeds (one [n, 2] array per client). Missing steps and
    rows are zeros with mask 0."""
    clients = len(datasets)
    real = np.zeros((clients, steps, batch, *image_shape), np.float32)
    mask = np.zeros((clients, steps, batch), np.float32)
    seeds = np.zeros((clients, steps, 2), np.int64)
    for i, dataset in enumerate(datasets):
        if not isinstance(dataset, tf.data.Dataset):  # the client's examples: its first n batches of B
            examples = dp_fedavg_gan.client_step_examples(dataset, steps, batch, cycle)
            batches = [examples[t:t + batch] for t in range(0, len(examples), batch)]
        else:
            batches = dp_fedavg_gan.client_batches(dataset, batch, steps, cycle).as_numpy_iterator()
        for t, images in enumerate(batches):
            rows = images.shape[0]
            if rows > batch:
                raise ValueError(f"a client batch holds {rows} examples, more than the batch size {batch}.")
            real[i, t, :rows], mask[i, t, :rows], seeds[i, t] = images, 1.0, step_seeds[i][t]
    return real, mask, seeds
