"""The vectorized client updates equal the reference `client_discriminator_update` client by client:
conv and MLP critics, clients with no batch, fewer batches than n, and a short last batch; G's batch
statistics per client batch; a non-finite client zeroed; unsupported models detected."""

import dataclasses
import functools

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.models import gan
from fedgen_debug.training import dp_fedavg_gan as dpgan, presets
from fedgen_debug.training import vectorized_gan as vg

import test_gan_core as fixtures

TEST_GAN = presets.gan_model_config("test")


def client(images, seed, batch):
    """A client's real batches of `batch` from `images`, and one step seed per batch."""
    steps = -(-len(images) // batch)
    seeds = np.random.default_rng(seed).integers(0, 2**62, size=(steps, 2), dtype=np.int64)
    return tf.data.Dataset.from_tensor_slices(images).batch(batch), seeds


def reference_updates(gen_fn, disc_fn, clients, disc_weights, gen_weights, lr, steps, penalty):
    gen, disc = gen_fn(), disc_fn()
    update = tf.function(lambda ds: dpgan.client_discriminator_update(
        disc, gen, ds, disc_weights, gen_weights, lr, steps, penalty).update)
    return [[u.numpy() for u in update(dpgan.with_step_seeds(ds, seeds))] for ds, seeds in clients]


def vectorized_updates(gen_fn, disc_fn, clients, disc_weights, gen_weights, lr, steps, penalty, batch):
    gen, disc = gen_fn(), disc_fn()
    assert vg.supports(gen, disc)
    real, mask, seeds = vg.pack_clients([ds for ds, _ in clients], steps, batch, [s for _, s in clients],
                                        disc.input_shape[1:])
    stacked = tf.function(vg.vectorized_client_updates)(gen, disc, real, mask, seeds, disc_weights, gen_weights,
                                                        lr, penalty)
    return [[u[i].numpy() for u in stacked] for i in range(len(clients))]


def weights_of(model_fn):
    model = model_fn()
    return [tf.identity(v) for v in model.trainable_variables]


# Clients with fewer batches than others take fewer steps (each step computes the clients with a batch
# there only); with 4 steps, nobody has more than 2 batches: the loop stops after the second. A critic
# with a large weight decay moves on any step taken, with or without a batch.
@pytest.mark.parametrize("sizes, upsample, steps, weight_decay", [
    ((20, 0, 8, 13), "transpose", 2, None), ((3, 16, 1), "transpose", 2, None), ((3, 16, 1), "bilinear", 2, None),
    ((3, 16, 9), "transpose", 4, 0.5)])
def test_conv_critic_updates_equal_the_reference_client_by_client(sizes, upsample, steps, weight_decay):
    batch, lr, penalty = 8, 0.05, 10.0
    gen_fn = functools.partial(gan.build_generator, dataclasses.replace(TEST_GAN, gen_upsample=upsample), 1)
    critic = TEST_GAN if weight_decay is None else dataclasses.replace(TEST_GAN, weight_decay=weight_decay)
    disc_fn = functools.partial(gan.build_discriminator, critic, 2)
    rng = np.random.default_rng(5)
    datasets = [client(rng.uniform(-1, 1, size=(n, 28, 28, 1)).astype(np.float32), 10 + i, batch)
                for i, n in enumerate(sizes)]
    # Moved weights, so the critic's scores are not near zero everywhere.
    disc_weights = [w + 0.05 * tf.random.stateless_normal(w.shape, seed=[i, 1]) for i, w in enumerate(weights_of(disc_fn))]
    gen_weights = weights_of(gen_fn)
    want = reference_updates(gen_fn, disc_fn, datasets, disc_weights, gen_weights, lr, steps, penalty)
    got = vectorized_updates(gen_fn, disc_fn, datasets, disc_weights, gen_weights, lr, steps, penalty, batch)
    for n, w, g in zip(sizes, want, got):
        assert (np.abs(np.concatenate([x.ravel() for x in w])).max() > 0) == (n > 0)
        for x, y in zip(w, g):
            np.testing.assert_allclose(y, x, rtol=2e-4, atol=2e-6)


def test_mlp_critic_on_1d_data_equals_the_reference():
    batch, steps, lr, penalty = 16, 8, 0.1, 1.0
    datasets = [client(fixtures.CLIENTS[c][:n], i, batch) for i, (c, n) in enumerate(zip(sorted(fixtures.CLIENTS), (64, 40, 7)))]
    disc_weights, gen_weights = weights_of(fixtures.TINY_D), weights_of(fixtures.TINY_G)
    want = reference_updates(fixtures.TINY_G, fixtures.TINY_D, datasets, disc_weights, gen_weights, lr, steps, penalty)
    got = vectorized_updates(fixtures.TINY_G, fixtures.TINY_D, datasets, disc_weights, gen_weights, lr, steps, penalty,
                             batch)
    for w, g in zip(want, got):
        for x, y in zip(w, g):
            np.testing.assert_allclose(y, x, rtol=2e-4, atol=2e-6)


def test_stateless_draws_for_a_padded_batch_start_with_the_short_batch_draws():
    """What lets a short batch draw its noise for the padded size: the first b rows are the same."""
    seed = tf.constant([3, 7], tf.int64)
    for rows in (1, 5, 31):
        np.testing.assert_array_equal(tf.random.stateless_normal([rows, 8], seed=seed),
                                      tf.random.stateless_normal([32, 8], seed=seed)[:rows])
        np.testing.assert_array_equal(tf.random.stateless_uniform([rows], seed=seed),
                                      tf.random.stateless_uniform([32], seed=seed)[:rows])


def test_generator_batch_statistics_are_per_client_batch():
    gen = gan.build_generator(TEST_GAN, 1)
    noise = tf.random.stateless_normal([3, 5, TEST_GAN.noise_dim], seed=[1, 2])
    mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], tf.float32)
    grouped = vg.gen_forward_grouped(gen, noise, mask)
    for g, rows in enumerate((5, 2, 4)):
        np.testing.assert_allclose(grouped[g, :rows], gen(noise[g, :rows], training=True), rtol=1e-4, atol=1e-5)
    # One BN over all 15 rows (what a plain batched call would do) is a different G output.
    assert not np.allclose(grouped[1, :2], gen(tf.reshape(noise, [15, -1]), training=True)[5:7], atol=1e-3)


def test_a_client_whose_update_overflows_sends_zeros():
    batch, steps = 8, 1
    gen_fn = functools.partial(gan.build_generator, TEST_GAN, 1)
    disc_fn = functools.partial(gan.build_discriminator, TEST_GAN, 2)
    images = np.zeros((8, 28, 28, 1), np.float32)
    datasets = [client(images, 1, batch), client(images + 1e30, 2, batch)]  # the second diverges
    got = vectorized_updates(gen_fn, disc_fn, datasets, weights_of(disc_fn), weights_of(gen_fn), 0.05, steps, 10.0,
                             batch)
    assert np.abs(np.concatenate([x.ravel() for x in got[0]])).max() > 0
    assert all(not x.any() for x in got[1])


def test_rows_to_compute_keeps_every_client_with_a_batch_and_rounds_up():
    mask = np.zeros((20, 2, 4), np.float32)
    mask[[3, 7, 11], 0, :2] = 1
    rows = vg.rows_to_compute(mask, multiple=4)
    assert list(rows[:3]) == [3, 7, 11] and len(rows) == 4 and not mask[rows[3]].any()
    mask[:, 1, 0] = 1  # everyone has a batch
    assert sorted(vg.rows_to_compute(mask, multiple=8)) == list(range(20))
    assert len(vg.rows_to_compute(np.zeros((5, 1, 1), np.float32), multiple=8)) == 5


def test_models_it_cannot_vectorize_are_detected():
    gen, disc = gan.build_generator(TEST_GAN, 1), gan.build_discriminator(TEST_GAN, 2)
    assert vg.supports(gen, disc)
    pooled = tf.keras.Sequential([tf.keras.Input((28, 28, 1)), tf.keras.layers.MaxPool2D(), tf.keras.layers.Flatten(),
                                  tf.keras.layers.Dense(1)])
    assert not vg.supports(gen, pooled)
    dilated = tf.keras.Sequential([tf.keras.Input((28, 28, 1)), tf.keras.layers.Conv2D(2, 3, dilation_rate=2),
                                   tf.keras.layers.Flatten(), tf.keras.layers.Dense(1)])
    assert not vg.supports(gen, dilated)


def test_a_client_handed_over_as_an_array_packs_as_its_batched_dataset():
    """The GAN scenario hands each client's examples over as an array (no tf.data pipeline per client):
    the same first n batches of B, the same masks, including an empty client and a short last batch."""
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=(n, 4, 4, 1)).astype(np.float32) for n in (0, 5, 20, 9)]
    seeds = [np.arange(6).reshape(3, 2) + i for i in range(len(arrays))]
    as_datasets = vg.pack_clients([tf.data.Dataset.from_tensor_slices(a).batch(8) for a in arrays], 2, 8, seeds,
                                  (4, 4, 1))
    as_arrays = vg.pack_clients(arrays, 2, 8, seeds, (4, 4, 1))
    for x, y in zip(as_datasets, as_arrays):
        np.testing.assert_array_equal(x, y)
    assert as_arrays[1].sum(axis=(1, 2)).tolist() == [0, 5, 16, 9]   # 20 examples: 2 batches of 8 used


def test_a_client_short_of_n_batches_cycles_through_its_examples_to_take_n_full_steps():
    """`cycle`: a writer with 30 images and n = 6, B = 32 takes 6 full steps over its images in order,
    again and again (not 1 short step); a client with n·B or more, or none, is as without it; a
    dataset packs as the array of its examples does."""
    rng = np.random.default_rng(4)
    arrays = [rng.normal(size=(n, 2, 2, 1)).astype(np.float32) for n in (0, 30, 200)]
    seeds = [np.arange(12).reshape(6, 2) + i for i in range(len(arrays))]
    real, mask, packed_seeds = vg.pack_clients(arrays, 6, 32, seeds, (2, 2, 1), cycle=True)
    assert mask.sum(axis=(1, 2)).tolist() == [0, 192, 192]
    np.testing.assert_array_equal(real[1].reshape(192, 2, 2, 1), np.concatenate([arrays[1]] * 7)[:192])
    np.testing.assert_array_equal(packed_seeds[1], seeds[1])
    one_pass = vg.pack_clients(arrays, 6, 32, seeds, (2, 2, 1))
    assert one_pass[1].sum(axis=(1, 2)).tolist() == [0, 30, 192]
    for cycled, plain in zip((real, mask, packed_seeds), one_pass):
        np.testing.assert_array_equal(cycled[[0, 2]], plain[[0, 2]])
    as_datasets = vg.pack_clients([tf.data.Dataset.from_tensor_slices(a).batch(8) for a in arrays], 6, 32, seeds,
                                  (2, 2, 1), cycle=True)
    for x, y in zip(as_datasets, (real, mask, packed_seeds)):
        np.testing.assert_array_equal(x, y)


def test_a_cpu_without_grouped_conv_gradients_runs_the_gan_clients_one_by_one(monkeypatch, caplog):
    """TF's own CPU kernels cannot differentiate a grouped convolution; oneDNN's can, and TF turns
    oneDNN on by itself only on some CPUs (on an AMD EPYC without AVX-512 the vectorized round crashed
    with "Gradients for grouped convolutions are not supported on CPU")."""
    from fedgen_debug.training import tf_backend
    from fedgen_debug.runs.secret import RunSecret

    # The package's import turned oneDNN on before TF's: here the fast path is available.
    assert vg.grouped_conv_gradients()
    gen_fn = functools.partial(gan.build_generator, TEST_GAN, 1)
    disc_fn = functools.partial(gan.build_discriminator, TEST_GAN, 2)
    assert vg.runs_here(disc_fn())
    monkeypatch.setattr(vg, "grouped_conv_gradients", lambda: False)
    assert not vg.runs_here(disc_fn()) and "cannot differentiate grouped convolutions" in caplog.text
    assert vg.runs_here(fixtures.TINY_D())  # no convolution: vectorized anyway
    config = fixtures.tiny_config(1.0, 0.5, rounds=1)
    rounds = tf_backend.GANRounds(gen_fn, disc_fn, config, RunSecret(5))
    assert rounds._vectorized is None and rounds._clients is not None


def test_with_onednn_off_tf_cannot_differentiate_grouped_convolutions_and_the_probe_says_so():
    """The probe on the real condition, in a process where the user turned oneDNN off."""
    import os
    import subprocess
    import sys

    code = "from fedgen_debug.training import vectorized_gan as vg; print(vg.grouped_conv_gradients())"
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                            cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("strides, padding, shape, kernel_size", [
    ((2, 2), "same", (28, 28), (4, 4)),  # the demo critic's: the patches' gradient by `subpixel_conv`
    ((2, 2), "same", (28, 28), (4, 3)), ((1, 1), "valid", (9, 7), (4, 3))])  # TF's gradient
def test_single_channel_convolution_equals_keras_per_client_and_the_grouped_one_twice_differentiated(
        strides, padding, shape, kernel_size):
    clients, batch, filters = 3, 4, 5
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(clients, batch, *shape, 1)), tf.float32)
    kernels = tf.constant(rng.normal(size=(clients, *kernel_size, 1, filters)), tf.float32)
    layer = tf.keras.layers.Conv2D(filters, kernel_size, strides=strides, padding=padding, use_bias=False)
    layer.build((None, *shape, 1))
    per_client = []
    for c in range(clients):
        layer.kernel.assign(kernels[c])
        per_client.append(layer(x[c]))
    got = vg._single_channel_conv_per_client(x, kernels, layer)
    np.testing.assert_allclose(got, tf.stack(per_client), rtol=1e-5, atol=1e-5)

    def penalty_gradient(conv):  # the gradient penalty's path: d/dkernel of |d out / d x|²
        with tf.GradientTape() as outer:
            outer.watch(kernels)
            with tf.GradientTape() as inner:
                inner.watch(x)
                out = tf.reduce_sum(tf.nn.leaky_relu(conv(x, kernels, layer)) ** 2)
            penalty = tf.reduce_sum(inner.gradient(out, x) ** 2)
        return outer.gradient(penalty, kernels)

    want = penalty_gradient(vg._grouped_conv_per_client)
    np.testing.assert_allclose(penalty_gradient(vg._single_channel_conv_per_client), want,
                               rtol=1e-4, atol=1e-4 * float(tf.reduce_max(tf.abs(want))))


def _traced_round_ops(clients: int, steps: int) -> list[str]:
    gen, disc = gan.build_generator(TEST_GAN, 1), gan.build_discriminator(TEST_GAN, 2)
    real = tf.TensorSpec([clients, steps, 4, 28, 28, 1], tf.float32)
    mask, seeds = tf.TensorSpec([clients, steps, 4], tf.float32), tf.TensorSpec([clients, steps, 2], tf.int64)
    disc_weights = [tf.TensorSpec(v.shape, v.dtype) for v in disc.trainable_variables]
    gen_weights = [tf.TensorSpec(v.shape, v.dtype) for v in gen.trainable_variables]
    traced = tf.function(lambda r, m, s, d, g: vg.vectorized_client_updates(gen, disc, r, m, s, d, g, 0.1, 10.0))
    graph = traced.get_concrete_function(real, mask, seeds, disc_weights, gen_weights).graph
    # Constants aside: TF materializes a zero tensor as a Const or a Fill depending on its size.
    return [op.type for op in graph.get_operations() if op.type not in ("Const", "Fill")]


def test_the_traced_round_does_not_grow_with_clients_or_steps():
    # A round's graph holds its local steps as one loop and draws every client's noise in one loop:
    # unrolled, it grew by a copy of the double backprop per step and by draws per client and step
    # (~19 s of tracing at 32 clients, once per padded client count of a run).
    small, large = _traced_round_ops(2, 1), _traced_round_ops(40, 6)
    assert len(small) == len(large)
    assert "While" in small or "StatelessWhile" in small


def test_the_generator_takes_the_fast_layers_and_computes_what_keras_computes():
    # The demo G's BN + ReLU pairs run as one XLA-compiled function and its image convolution (one
    # filter) as a depthwise one: ~30% of G's time, which is ~45% of a round. Checked on a G with an
    # unfused ReLU (a cap), a strided one-filter convolution with a bias, and masked rows.
    gen = tf.keras.Sequential([
        tf.keras.Input((6,)), tf.keras.layers.Dense(4 * 4 * 3), tf.keras.layers.BatchNormalization(scale=True),
        tf.keras.layers.ReLU(), tf.keras.layers.Reshape((4, 4, 3)), tf.keras.layers.BatchNormalization(),
        tf.keras.layers.ReLU(max_value=0.5), tf.keras.layers.Conv2D(1, 3, strides=2, padding="same", activation="tanh")])
    for layer in gen.layers:  # non-trivial BN scale and offset, conv bias
        for weight in layer.trainable_weights:
            weight.assign(tf.random.stateless_normal(weight.shape, seed=[len(weight.name), 7]))
    noise = tf.random.stateless_normal([3, 5, 6], seed=[3, 4])
    mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], tf.float32)
    grouped = vg.gen_forward_grouped(gen, noise, mask)
    for g, rows in enumerate((5, 2, 4)):
        np.testing.assert_allclose(grouped[g, :rows], gen(noise[g, :rows], training=True), rtol=1e-4, atol=1e-5)
    demo = gan.build_generator(presets.gan_model_config("demo"), 0)
    graph = tf.function(lambda z, m: vg.gen_forward_grouped(demo, z, m)).get_concrete_function(
        tf.TensorSpec([4, 8, demo.input_shape[-1]]), tf.TensorSpec([4, 8])).graph.as_graph_def()
    ops = {node.op for node in graph.node} | {node.op for f in graph.library.function for node in f.node_def}
    assert "DepthwiseConv2dNative" in ops and "Conv2D" not in ops
    compiled = [f for f in graph.library.function if f.attr["_XlaMustCompile"].b]
    batch_norms = sum(isinstance(layer, tf.keras.layers.BatchNormalization) for layer in demo.layers)
    assert len(compiled) == batch_norms == 4  # each BN with the ReLU after it: one compiled function
    assert all("Relu" in {node.op for node in f.node_def} for f in compiled)
