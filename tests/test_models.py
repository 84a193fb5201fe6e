"""CIFG-LSTM against a NumPy reference, LM presets, char-LM joint probability and sampling."""

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.models.char_lm import decode_symbols, encode_word, joint_log_prob, sample_words, word_sequences
from fedgen_debug.models.cifg import CIFGCell
from fedgen_debug.models.lm import BOW, CHAR_VOCAB, EOW, StaticUnrollRNN, TokenCrossentropy, build_lm
from fedgen_debug.training.presets import lm_model_config
from fedgen_debug.runs.secret import RunSecret


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_cifg(x, kernel, recurrent, bias, projection=None):
    """Greff et al.'s CIFG equations, written out once more in NumPy."""
    batch, steps, _ = x.shape
    units = bias.shape[0] // 3
    out_dim = projection.shape[1] if projection is not None else units
    c, h = np.zeros((batch, units)), np.zeros((batch, out_dim))
    outputs = []
    for t in range(steps):
        gates = x[:, t] @ kernel + h @ recurrent + bias
        i = _sigmoid(gates[:, :units])
        f = 1.0 - i  # the coupled forget gate
        z = np.tanh(gates[:, units:2 * units])
        o = _sigmoid(gates[:, 2 * units:])
        c = f * c + i * z
        m = o * np.tanh(c)
        h = m @ projection if projection is not None else m
        outputs.append(h)
    return np.stack(outputs, axis=1)


@pytest.mark.parametrize("projection_units", [None, 3])
def test_cifg_matches_the_numpy_reference(projection_units):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 4)).astype(np.float32)
    layer = tf.keras.layers.RNN(CIFGCell(6, projection_units, seed=1), return_sequences=True)
    got = layer(x).numpy()
    cell = layer.cell
    bias = rng.normal(size=cell.bias.shape).astype(np.float32)  # non-zero bias exercises every gate
    cell.bias.assign(bias)
    got = layer(x).numpy()
    expected = _numpy_cifg(x, cell.kernel.numpy(), cell.recurrent_kernel.numpy(), bias,
                           cell.projection.numpy() if projection_units else None)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert got.shape == (2, 5, projection_units or 6)
    # Coupling: 3 gate blocks, not an LSTM's 4.
    assert cell.kernel.shape == (4, 18)


def _graph_ops(function, *args) -> set[str]:
    graph = function.get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()} | {
        node.op for f in graph.as_graph_def().library.function for node in f.node_def}


def test_static_unroll_rnn_is_the_loop_unrolled_in_graphs_with_a_static_length():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 4)).astype(np.float32)
    unrolled = StaticUnrollRNN(CIFGCell(6, 3, seed=1), return_sequences=True)
    looped = tf.keras.layers.RNN(CIFGCell(6, 3, seed=1), return_sequences=True)
    unrolled.build(x.shape), looped.build(x.shape)
    unrolled.set_weights([w + 0.1 * rng.normal(size=w.shape) for w in looped.get_weights()])
    looped.set_weights(unrolled.get_weights())

    def output_and_gradients(layer):
        @tf.function
        def f(inputs):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(layer(inputs)))
            return layer(inputs), tape.gradient(loss, layer.trainable_variables)
        return f

    got, expected = output_and_gradients(unrolled)(x), output_and_gradients(looped)(x)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)
    for g, e in zip(got[1], expected[1]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unrolled(x), looped(x), rtol=1e-5, atol=1e-6)  # eager: the loop
    # Unrolled only where the length is static (a training batch), else the loop.
    assert "While" not in _graph_ops(output_and_gradients(unrolled), tf.TensorSpec([None, 5, 4]))
    assert "While" in _graph_ops(output_and_gradients(unrolled), tf.TensorSpec([None, None, 4]))
    assert "While" in _graph_ops(output_and_gradients(looped), tf.TensorSpec([None, 5, 4]))


@pytest.mark.parametrize("scale", [1.0, 300.0])  # 300: exp overflows in float32 unless the max is taken out
def test_token_crossentropy_is_keras_loss_with_the_same_gradient(scale):
    rng = np.random.default_rng(4)
    logits = tf.constant(rng.normal(size=(3, 5, 17)) * scale, tf.float32)
    labels = tf.constant(rng.integers(0, 17, (3, 5)), tf.int32)
    keras = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss_and_gradient(loss):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(labels, logits)
        return value, tape.gradient(value, logits)

    (want, want_gradient), (got, got_gradient) = loss_and_gradient(keras), loss_and_gradient(TokenCrossentropy())
    assert np.isfinite(got) and want > 0
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_gradient, want_gradient, atol=1e-7)
    # Its config round-trips, and it refuses what it does not compute.
    assert isinstance(TokenCrossentropy.from_config(TokenCrossentropy().get_config()), TokenCrossentropy)
    with pytest.raises(ValueError, match="logits"):
        TokenCrossentropy(from_logits=False)


def test_a_client_update_whose_last_batch_is_one_row_is_the_same_on_every_call():
    """65 examples in batches of 16: the last batch is one row. With the cell's bias added by `+`, its
    gradient over the unrolled steps was a view of each step's gate gradient, and TF's AddN, which reuses
    whichever input buffer is free, summed the steps in an order that depended on thread timing: 1-4
    distinct updates in 100 identical calls, in 3 of 4 processes (the 4th happened to be all alike). So
    the graph is checked too: the bias's gradient must be BiasAddGrad's own tensor."""
    from fedgen_debug.training import dp_fedavg
    model = build_lm(lm_model_config("test", "word", 204), seed=3)
    model.build((None, 20))
    rng = np.random.default_rng(65)
    x, y = (rng.integers(0, 204, (65, 20)).astype(np.int32) for _ in range(2))
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat(2)
    initial = [tf.constant(v.numpy()) for v in model.trainable_variables]
    update = tf.function(lambda ds: dp_fedavg.client_update(model, TokenCrossentropy(), ds, initial, 1.0).update)
    assert len({b"".join(u.numpy().tobytes() for u in update(dataset)) for _ in range(100)}) == 1
    cell = CIFGCell(4, seed=0)
    state = [tf.zeros((1, 4)), tf.zeros((1, 4))]

    @tf.function
    def bias_gradient(inputs):
        with tf.GradientTape() as tape:
            h, _ = cell(inputs, state)
        return tape.gradient(h, cell.bias)

    graph = bias_gradient.get_concrete_function(tf.TensorSpec((1, 3))).graph
    assert "BiasAddGrad" in {op.type for op in graph.get_operations()}


def test_cifg_validation():
    with pytest.raises(ValueError, match="units must be >= 1. Found 0."):
        CIFGCell(0)


def test_paper_presets_have_the_papers_sizes():
    word = build_lm(lm_model_config("paper", "word", 10_004))
    word.build((None, 5))
    cifg = word.layers[1].cell
    assert (word.layers[0].output_dim, cifg.units, cifg.projection_units) == (96, 670, 96)
    char = build_lm(lm_model_config("paper", "char"))
    char.build((None, 5))
    assert [type(l).__name__ for l in char.layers] == ["Embedding"] + ["StaticUnrollRNN"] * 3 + ["Dense"]
    assert char.layers[0].input_dim == CHAR_VOCAB == 258 and char.layers[0].output_dim == 128
    assert all((l.cell.units, l.cell.projection_units) == (256, 128) for l in char.layers[1:4])


def test_word_encoding_and_sequences():
    assert encode_word("hé") == [BOW, 104, 195, 169, EOW]
    assert decode_symbols([104, 195, 169, EOW]) == "hé"
    x, y = word_sequences(["ab", "i have"], 8)
    np.testing.assert_array_equal(x[0], [BOW, 97, 98, EOW, EOW, EOW, EOW, EOW])
    np.testing.assert_array_equal(y[0], [97, 98, EOW, EOW, EOW, EOW, EOW, EOW])
    assert decode_symbols(y[1]) == "i have"


def test_joint_probability_is_the_product_of_conditionals():
    model = build_lm(lm_model_config("test", "char"), seed=3)
    words = ["regex", "i am", "a"]
    joint = joint_log_prob(model, words)
    for word, value in zip(words, joint):
        symbols = encode_word(word)
        step_by_step = 0.0
        for t in range(1, len(symbols)):  # p(s_t | s_0..s_{t-1}) from the prefix alone
            logits = model(np.array([symbols[:t]], np.int32))[0, -1]
            step_by_step += float(tf.nn.log_softmax(logits)[symbols[t]])
        assert value == pytest.approx(step_by_step, abs=1e-4)
    assert (joint < 0).all()


class _SpellsThenStops(tf.keras.Model):
    """Puts all mass on 'o', 'k', then end-of-word, then 'x' forever: sampling must stop at EOW."""

    def call(self, x, training=False):
        steps = tf.shape(x)[1]
        script = tf.constant([ord("o"), ord("k"), EOW] + [ord("x")] * 20)
        targets = script[:steps]
        return tf.tile(tf.one_hot(targets, CHAR_VOCAB, on_value=50.0, off_value=-50.0)[None], [tf.shape(x)[0], 1, 1])


def test_sampling_stops_at_end_of_word():
    assert sample_words(_SpellsThenStops(), count=3, max_length=10, seed=0) == ["ok", "ok", "ok"]


def test_a_tiny_dp_fedavg_char_lm_learns_a_three_word_vocabulary(tmp_path):
    from fedgen_debug.training import dp_fedavg, loop
    from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig

    vocabulary = ["cat", "dog", "i have"]
    rng = np.random.default_rng(0)
    clients = {f"c{i}": [vocabulary[j] for j in rng.integers(3, size=30)] for i in range(6)}
    config = TrainingConfig(rounds=40, dp=DPConfig(clients_per_round=4, noise_multiplier=0.1, clip=1.0),
                            client=ClientConfig(epochs=2, batch_size=10, learning_rate=1.0),
                            server=ServerConfig("momentum", 1.0, 0.5), checkpoint_every=40)
    spec = dp_fedavg.ModelSpec(lambda: build_lm(lm_model_config("test", "char"), seed=0),
                               lambda: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                               (tf.TensorSpec([None, 8], tf.int32), tf.TensorSpec([None, 8], tf.int32)))

    def client_dataset(cid, round_num):
        return dp_fedavg.client_dataset(tf.data.Dataset.from_tensor_slices(word_sequences(clients[cid], 8)), config)

    result = loop.train(lambda secret: dp_fedavg.build_process(spec, config, secret.tf_seed("dp-noise")),
                        loop.Population("three-words", tuple(clients)), client_dataset, config, str(tmp_path / "char"),
                        secret=RunSecret(20240601))
    model = spec.keras_model_fn()
    model.build((None, 8))
    result.model_weights.assign_weights_to(model)
    samples = sample_words(model, count=300, max_length=8, seed=1)
    assert np.mean([s in vocabulary for s in samples]) > 0.9
    assert set(vocabulary) <= set(samples)
    joint = joint_log_prob(model, vocabulary + ["cot", "dag", "i hav", "have"])
    assert joint[:3].min() > joint[3:].max() + 1.0  # the learned words beat near misses by a factor > e
