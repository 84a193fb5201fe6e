"""The vectorized LM client updates equal the reference `dp_fedavg.client_update` client by client:
one- and two-layer CIFG LMs with and without projection, clients with no batch, fewer batches than
others and a short last batch, E epochs; a non-finite client zeroed; unsupported models and losses
detected; and the tf backend's char-LM rounds equal TFF's."""

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.models.lm import LMConfig, TokenCrossentropy, build_lm
from fedgen_debug.models.word_lm import build_word_lm
from fedgen_debug.training import dp_fedavg
from fedgen_debug.training import vectorized_lm as vl
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig

LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
TIME = 6


def lm_fn(config: LMConfig):
    def build():
        model = build_lm(config, seed=3)
        model.build((None, TIME))
        return model
    return build


def training_config(batch, epochs, lr=0.7):
    return TrainingConfig(rounds=1, dp=DPConfig(2, 0.0, None), client=ClientConfig(epochs, batch, lr),
                          server=ServerConfig("sgd", 1.0))


def client_examples(sizes, vocabulary, seed=0):
    rng = np.random.default_rng(seed)
    return [dp_fedavg.ClientExamples((rng.integers(0, vocabulary, (n, TIME), dtype=np.int32),
                                      rng.integers(0, vocabulary, (n, TIME), dtype=np.int32))) for n in sizes]


def moved_weights(model_fn):
    """The initial weights, moved, so updates are not those of a fresh model only."""
    return [tf.identity(v) + 0.05 * tf.random.stateless_normal(v.shape, seed=[i, 9])
            for i, v in enumerate(model_fn().trainable_variables)]


def reference_updates(model_fn, clients, weights, config):
    model = model_fn()
    lr = config.client.learning_rate
    update = tf.function(lambda ds: dp_fedavg.client_update(model, LOSS, ds, weights, lr).update)
    return [[u.numpy() for u in update(c.dataset(config))] for c in clients]


def vectorized_updates(model_fn, clients, weights, config):
    model = model_fn()
    assert vl.supports(model, LOSS)
    x, y, mask = vl.pack_clients(clients, config, TIME)
    stacked = tf.function(vl.vectorized_client_updates)(model, x, y, mask, weights, config.client.learning_rate)
    return [[u[i].numpy() for u in stacked] for i in range(len(clients))]


@pytest.mark.parametrize("config, sizes, epochs", [
    (LMConfig(11, 4, 8, 5, 2), (7, 0, 20, 3), 1),       # two layers, projection; an empty client
    (LMConfig(9, 3, 6, None, 1), (16, 5, 1), 2),         # one layer without projection, two epochs
])
def test_updates_equal_the_reference_client_by_client(config, sizes, epochs):
    training = training_config(4, epochs)
    model_fn = lm_fn(config)
    weights = moved_weights(model_fn)
    clients = client_examples(sizes, config.vocab_size)
    want = reference_updates(model_fn, clients, weights, training)
    got = vectorized_updates(model_fn, clients, weights, training)
    for client, (w, g) in enumerate(zip(want, got)):
        if sizes[client] == 0:
            assert all(not np.any(u) for u in g)   # no batch: exactly zero
            continue
        assert max(np.abs(u).max() for u in w) > 1e-3   # the client moved
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=2e-6)


def test_pack_clients_pads_steps_and_rows_with_a_zero_mask_and_batches_as_the_dataset_does():
    clients = client_examples((5, 0, 2), 7)
    config = training_config(4, 2)
    x, y, mask = vl.pack_clients(clients, config, TIME)
    assert x.shape == y.shape == (3, 4, 4, TIME) and mask.shape == (3, 4, 4)
    np.testing.assert_array_equal(mask.sum(axis=2), [[4, 1, 4, 1], [0, 0, 0, 0], [2, 2, 0, 0]])
    np.testing.assert_array_equal(x[0, 2, :4], clients[0].arrays[0][:4])   # epoch 2 starts over, in order
    np.testing.assert_array_equal(y[0, 1, :1], clients[0].arrays[1][4:])
    # The same arrays as from the client's dataset (what TFF's and the threaded processes train on).
    from_datasets = vl.pack_clients([c.dataset(config) for c in clients], config, TIME)
    for a, b in zip((x, y, mask), from_datasets):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="more than the batch size 2"):
        vl.pack_clients([c.dataset(config) for c in clients], training_config(2, 1), TIME)


def test_a_client_whose_update_is_not_finite_sends_zeros():
    model_fn = lm_fn(LMConfig(11, 4, 8, 5, 1))
    weights = moved_weights(model_fn)
    x, y, mask = vl.pack_clients(client_examples((6, 6), 11), training_config(4, 1), TIME)
    model = model_fn()
    finite = vl.vectorized_client_updates(model, x, y, mask, weights, 0.5)
    assert all(np.isfinite(u.numpy()).all() for u in finite) and all(np.any(u[c].numpy()) for u in finite[-1:]
                                                                     for c in range(2))
    # A learning rate that overflows every weight: each client's update is all zeros, not inf/NaN.
    broken = vl.vectorized_client_updates(model, x, y, mask, weights, 1e38)
    assert all(not np.any(u.numpy()) for u in broken)


def test_models_and_losses_it_cannot_compute_are_detected():
    char_lm = lm_fn(LMConfig(11, 4, 8, 5, 2))()
    assert vl.supports(char_lm, LOSS) and vl.supports(char_lm, TokenCrossentropy())   # the LM scenario's
    assert not vl.supports(char_lm, tf.keras.losses.SparseCategoricalCrossentropy())   # probabilities
    assert not vl.supports(char_lm, tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.SUM))
    assert not vl.supports(build_word_lm(11, 4, 8), LOSS)   # Keras' LSTM, not the CIFG cell
    assert not vl.supports(tf.keras.Sequential([tf.keras.layers.Dense(2)]), LOSS)
    # Supported, but faster client by client: a word-LM's large output layer.
    assert vl.worthwhile(char_lm) and not vl.worthwhile(lm_fn(LMConfig(vl.MAX_VOCABULARY + 1, 4, 8, 5, 1))())


def test_char_lm_rounds_on_the_tf_backend_are_tffs():
    """The demo's char-LM family (test size) through both backends' processes: the tf backend's rounds
    take the vectorized path and must give TFF's states."""
    from fedgen_debug.training.lm_run import LMRun, model_spec
    from fedgen_debug.training.config import DPConfig
    from fedgen_debug.privacy.sampling import sample_clients
    from fedgen_debug.training import loop, tf_backend

    from test_tf_backend import SECRET, assert_same_state

    run = LMRun("char", "synthetic-text:users=6", 0.0, "test")
    spec = model_spec(run, 0)
    config = run.training_config(6)
    config = type(config)(**{**config.__dict__, "dp": DPConfig(4, 1.0, 1.0)})
    rng = np.random.default_rng(1)
    data = {f"u{i}": dp_fedavg.ClientExamples((rng.integers(0, 258, (n, run.max_length), dtype=np.int32),
                                                rng.integers(0, 258, (n, run.max_length), dtype=np.int32)))
            for i, n in enumerate((9, 40, 0, 17, 5, 2))}
    states = {}
    for backend in ("tff", "tf"):
        process = dp_fedavg.build_process(spec, config, SECRET.tf_seed("dp-noise"), backend=backend)
        if backend == "tf":
            assert isinstance(process, tf_backend.FedAvgProcess) and process.vectorized
        state = process.initialize()
        for r in range(2):
            sampled = sample_clients(sorted(data), 4, SECRET.rng("sampling", r))
            # The arrays as the scenario hands them over: batched by TFF's dataset, packed by the tf backend.
            state = process.next(state, loop.round_datasets(process, sampled, lambda c, _: data[c], r, config)).state
        states[backend] = state
    assert_same_state(states["tff"], states["tf"], rtol=1e-4, atol=1e-5)


def test_a_round_padded_beyond_max_padding_runs_client_by_client_with_the_same_states(monkeypatch):
    """One device with many batches beside three with one: vectorized, the three would compute as many
    steps as the large one; the round goes to the client threads instead, and must not change a state."""
    from fedgen_debug.training.lm_run import LMRun, model_spec
    from fedgen_debug.training import tf_backend
    from fedgen_debug.training.config import DPConfig

    from test_tf_backend import SECRET, assert_same_state

    run = LMRun("char", "synthetic-text:users=4", 0.0, "test")
    config = run.training_config(4)
    config = type(config)(**{**config.__dict__, "dp": DPConfig(4, 1.0, 1.0)})
    rng = np.random.default_rng(2)
    clients = [dp_fedavg.ClientExamples((rng.integers(0, 258, (n, run.max_length), dtype=np.int32),
                                         rng.integers(0, 258, (n, run.max_length), dtype=np.int32)))
               for n in (100, 3, 5, 2)]
    states, processes = [], []
    for max_padding in (tf_backend.MAX_PADDING, float("inf")):
        monkeypatch.setattr(tf_backend, "MAX_PADDING", max_padding)
        process = dp_fedavg.build_process(model_spec(run, 0), config, SECRET.tf_seed("dp-noise"), backend="tf")
        state = process.initialize()
        for _ in range(2):
            state = process.next(state, clients).state
        states.append(state)
        processes.append(process)
    assert processes[0]._clients is not None and processes[1]._clients is None   # threads, then vectorized
    assert_same_state(states[0], states[1], rtol=1e-4, atol=1e-5)
