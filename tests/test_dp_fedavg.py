"""DP-FedAvg: the DP query (exact values, clipping, noise statistics, its event), the TFF process
against the pure-TF updates, secret fixed-size sampling, config validation, the run store and exact
crash-resume."""

import collections
import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_privacy.privacy.dp_query import test_utils

from fedgen_debug.privacy.ledger import PrivacyBudgetExceeded
from fedgen_debug.runs import store
from fedgen_debug.training import dp_fedavg
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig
from fedgen_debug.training.dp_query import dp_query, round_event
from fedgen_debug.training.optimizers import NesterovSGD
from fedgen_debug.privacy.sampling import sample_clients

# ---- the DP query, without TFF -------------------------------------------------------------------

RECORDS = [tf.constant([1.0, 2.0]), tf.constant([0.5, -4.0]), tf.constant([3.0, 0.5])]


def test_no_clip_and_zero_noise_is_exactly_the_plain_mean():
    result, _ = test_utils.run_query(dp_query(DPConfig(3, 0.0, None), (0, 0)), RECORDS)
    np.testing.assert_array_equal(result.numpy(), np.array([1.5, -0.5], np.float32))  # (1+0.5+3)/3, (2-4+0.5)/3
    plain_mean = np.mean(np.stack([r.numpy() for r in RECORDS]), axis=0)
    np.testing.assert_array_equal(result.numpy(), plain_mean)


def test_clipping_matches_the_closed_form():
    records = [tf.zeros(3), tf.constant([6.0, 8.0, 0.0]), tf.constant([0.3, 0.0, -0.4])]  # norms 0, 10, 0.5
    clip = 1.0
    result, _ = test_utils.run_query(dp_query(DPConfig(4, 0.0, clip), (0, 0)), records)
    expected = (np.zeros(3) + np.array([6.0, 8.0, 0.0]) * clip / 10.0 + np.array([0.3, 0.0, -0.4])) / 4  # fixed qN=4
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


def test_noise_std_is_z_clip_over_qn_and_streams_are_seeded():
    config = DPConfig(clients_per_round=10, noise_multiplier=1.5, clip=0.2)
    query = dp_query(config, (42, 7))
    zero_records = [tf.zeros(500)] * 2
    draws, state = [], None
    for _ in range(4):  # 4 rounds x 500 coordinates = 2000 draws, the seed advancing each round
        result, state = test_utils.run_query(query, zero_records, global_state=state)
        draws.append(result.numpy())
    noise = np.concatenate(draws)
    expected_std = 1.5 * 0.2 / 10  # zS/qN = 0.03
    assert abs(noise.std() - expected_std) / expected_std < 0.10
    assert abs(noise.mean()) < 4 * expected_std / np.sqrt(noise.size)
    assert not np.allclose(draws[0], draws[1])  # fresh noise every round
    again, _ = test_utils.run_query(dp_query(config, (42, 7)), zero_records)
    np.testing.assert_array_equal(again.numpy(), draws[0])  # the same seed, the same stream
    other, _ = test_utils.run_query(dp_query(config, (42, 8)), zero_records)
    assert not np.allclose(other.numpy(), draws[0])
    assert config.noise_stddev == pytest.approx(expected_std)


def test_the_event_divides_the_noise_by_the_replace_one_sensitivity_2s():
    # z = 1.5, S = 0.2: noise std 0.3 on the sum; replace-one moves the sum by 2S = 0.4 → σ/Δ = 0.75.
    assert round_event(DPConfig(10, 1.5, 0.2)).noise_multiplier == pytest.approx(0.75)
    assert round_event(DPConfig(10, 1.5, 0.2, "add-remove")).noise_multiplier == pytest.approx(1.5)
    assert round_event(DPConfig(10, 1.5, 0.2, "paper")).noise_multiplier == pytest.approx(1.5)
    assert type(round_event(DPConfig(10, 0.0, 0.2))).__name__ == "NonPrivateDpEvent"
    _, _, event = dp_query(DPConfig(10, 1.5, 0.2), (1, 2))._numerator.get_noised_result(
        tf.zeros(3), dp_query(DPConfig(10, 1.5, 0.2), (1, 2))._numerator.initial_global_state())
    assert event == round_event(DPConfig(10, 1.5, 0.2))  # what the query reports is what is charged


@pytest.mark.parametrize("kwargs, message", [
    (dict(clients_per_round=5, noise_multiplier=0.0, clip=-1.0), r"clip must be > 0. Found -1.0."),
    (dict(clients_per_round=5, noise_multiplier=0.0, clip=0.0), r"clip must be > 0. Found 0.0."),
    (dict(clients_per_round=5, clip=1.0, noise_multiplier=-0.5), r"noise_multiplier must be >= 0. Found -0.5."),
    (dict(clients_per_round=0, noise_multiplier=0.0, clip=None), r"clients_per_round must be >= 1. Found 0."),
    (dict(clients_per_round=5, noise_multiplier=1.0, clip=None), r"noise_multiplier > 0 needs a clip"),
    (dict(clients_per_round=5, noise_multiplier=1.0, clip=1.0, accounting="loose"), r"accounting must be one of"),
])
def test_dp_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DPConfig(**kwargs)


def test_dp_config_has_no_default_noise():
    # No silent z = 0: the noise multiplier and the clip are always the caller's choice.
    with pytest.raises(TypeError, match="noise_multiplier"):
        DPConfig(clients_per_round=5)
    with pytest.raises(ValueError, match="poisson sampling is accounted with 'add-remove'"):
        TrainingConfig(rounds=1, dp=DPConfig(2, 1.0, 1.0), sampling="poisson")


@pytest.mark.parametrize("build, message", [
    (lambda: TrainingConfig(rounds=0, dp=DPConfig(2, 0.0, None)), r"rounds must be >= 1. Found 0."),
    (lambda: ClientConfig(batch_size=0), r"client batch_size must be >= 1. Found 0."),
    (lambda: ClientConfig(learning_rate=-1), r"client learning_rate must be > 0. Found -1."),
    (lambda: ServerConfig(optimizer="adagrad"), r"server optimizer must be one of"),
    (lambda: ServerConfig(momentum=1.0), r"server momentum must be in \[0, 1\). Found 1.0."),
    (lambda: ClientConfig(max_examples=0), r"client max_examples must be >= 1 \(None: no cap\). Found 0."),
])
def test_training_config_validation(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_capped_client_config_is_saved_and_an_uncapped_one_saves_as_before():
    capped = TrainingConfig(rounds=2, dp=DPConfig(2, 0.0, None), client=ClientConfig(2, 16, 1.0, max_examples=64))
    assert capped.to_json()["client"]["max_examples"] == 64
    assert TrainingConfig.from_json(capped.to_json()) == capped
    plain = TrainingConfig(rounds=2, dp=DPConfig(2, 0.0, None))
    assert "max_examples" not in plain.to_json()["client"]  # a run from before the option resumes
    assert TrainingConfig.from_json(plain.to_json()) == plain


def test_a_round_trains_on_a_fresh_uniform_subset_of_at_most_max_examples():
    x = np.arange(10)[:, None]
    examples = (x, x * 10)

    def kept(round_num, cap=4):
        return dp_fedavg.round_examples(examples, cap, np.random.default_rng([7, round_num]))

    first = kept(0)
    assert first[0].shape == (4, 1) and len(set(first[0].ravel())) == 4
    np.testing.assert_array_equal(first[1], first[0] * 10)  # rows stay paired
    np.testing.assert_array_equal(kept(0)[0], first[0])    # the same (round, client) stream: the same rows
    assert any(not np.array_equal(kept(r)[0], first[0]) for r in range(1, 4))
    # Uniform: over 4,000 rounds each row is kept in 4/10 of them (sd of a count ~31).
    counts = np.bincount(np.concatenate([kept(r)[0].ravel() for r in range(4000)]), minlength=10)
    assert np.all(np.abs(counts - 1600) < 150), counts
    # A device with no more than the cap, or no cap: all its rows, in order.
    assert dp_fedavg.round_examples(examples, 10, np.random.default_rng(0)) is examples
    assert dp_fedavg.round_examples(examples, None, np.random.default_rng(0)) is examples


# ---- sampling ------------------------------------------------------------------------------------

def test_every_round_has_exactly_qn_distinct_clients_and_is_reproducible():
    from fedgen_debug.runs.secret import RunSecret

    ids = [f"c{i:03d}" for i in range(100)]
    secret = RunSecret(12345)
    seen = collections.Counter()
    for round_num in range(200):
        sampled = sample_clients(ids, 10, secret.rng("sampling", round_num))
        assert len(sampled) == 10 and len(set(sampled)) == 10 and set(sampled) <= set(ids)
        assert sampled == sample_clients(list(reversed(ids)), 10, secret.rng("sampling", round_num))
        seen.update(sampled)
    assert len(seen) == 100  # everyone takes part eventually
    assert max(seen.values()) < 45  # ~20 expected each; no client is favoured
    assert sample_clients(ids, 10, secret.rng("sampling", 0)) != sample_clients(ids, 10, secret.rng("sampling", 1))
    assert sample_clients(ids, 10, secret.rng("sampling", 0)) != sample_clients(ids, 10, RunSecret(12346).rng("sampling", 0))
    with pytest.raises(ValueError, match=r"clients_per_round must be in \[1, 100\]"):
        sample_clients(ids, 101, secret.rng("sampling", 0))


# ---- the TFF process against the pure-TF updates -----------------------------------------------

from toy_training import SPEC, keras_model as _keras_model, client_data as _client_data  # noqa: E402


def _one_round_reference(data, config, clip=None):
    """Initial weights minus the mean (optionally clipped) pure-TF client update, server SGD lr=1."""
    model = _keras_model()
    initial = [tf.zeros_like(v) for v in model.trainable_variables]
    updates = []
    for ds in data.values():
        out = dp_fedavg.client_update(model, tf.keras.losses.MeanSquaredError(), dp_fedavg.client_dataset(ds, config),
                                      initial, config.client.learning_rate)
        update = [u.numpy() for u in out.update]
        if clip is not None:
            norm = np.sqrt(sum(np.sum(u ** 2) for u in update))
            update = [u * min(1.0, clip / norm) for u in update]
        updates.append(update)
    mean = [sum(u[k] for u in updates) / config.dp.clients_per_round for k in range(len(initial))]
    return [w.numpy() - m for w, m in zip(initial, mean)]


@pytest.mark.parametrize("backend", ["tff", "tf"])
@pytest.mark.parametrize("clip", [None, 0.05])
def test_a_round_equals_the_pure_tf_round(clip, backend):
    data = _client_data()
    config = TrainingConfig(rounds=1, dp=DPConfig(3, 0.0, clip),
                            client=ClientConfig(epochs=2, batch_size=4, learning_rate=0.1))
    process = dp_fedavg.build_process(SPEC, config, (5, 6), backend=backend)
    state = process.initialize()
    output = process.next(state, [dp_fedavg.client_dataset(ds, config) for ds in data.values()])
    got = process.get_model_weights(output.state).trainable
    expected = _one_round_reference(data, config, clip)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)
    if clip is not None:  # the clip is active: the update is far smaller than the unclipped one
        unclipped = _one_round_reference(data, config)
        assert np.abs(unclipped[0]).max() > 3 * np.abs(expected[0]).max()


def test_client_update_on_an_embedding_model_matches_keras_sgd():
    """Embedding gradients are IndexedSlices: only the looked-up rows move, exactly as Keras SGD."""
    def model_fn():
        embedding = tf.keras.layers.Embedding(6, 3, embeddings_initializer=tf.keras.initializers.RandomUniform(seed=1))
        return tf.keras.Sequential([embedding, tf.keras.layers.GlobalAveragePooling1D(),
                                    tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])

    x = np.array([[1, 2], [2, 3], [1, 1], [0, 2]], np.int32)
    y = np.array([[1.0], [0.0], [0.5], [2.0]], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
    model, reference = model_fn(), model_fn()
    model.build((None, 2))
    reference.build((None, 2))
    initial = [tf.identity(v) for v in reference.trainable_variables]
    loss = tf.keras.losses.MeanSquaredError()
    out = tf.function(lambda ds: dp_fedavg.client_update(model, loss, ds, initial, 0.1))(dataset)
    sgd = tf.keras.optimizers.SGD(0.1)
    for bx, by in dataset:
        with tf.GradientTape() as tape:
            value = loss(by, reference(bx, training=True))
        sgd.apply_gradients(zip(tape.gradient(value, reference.trainable_variables), reference.trainable_variables))
    for u, w0, w in zip(out.update, initial, reference.trainable_variables):
        np.testing.assert_allclose(u, w0 - w, rtol=1e-5, atol=1e-7)
    assert np.all(out.update[0][4:] == 0)  # rows 4 and 5 are never looked up


def test_an_embedding_update_with_repeated_rows_is_the_same_on_every_run_and_equals_the_dense_step():
    """A batch of 64 × 32 tokens looks up 20 rows, each about 100 times. TF's CPU scatter applies 1,024
    or more rows on threads, so subtracting each repeat on its own added them in a scheduling-dependent
    order (87 distinct results in 200 identical scatters on 2 cores; the same run secret trained
    different word-LMs). Summed first, every run is one result: the dense gradient's SGD step."""
    def model_fn():
        embedding = tf.keras.layers.Embedding(50, 16, embeddings_initializer=tf.keras.initializers.RandomUniform(seed=1))
        return tf.keras.Sequential([embedding, tf.keras.layers.GlobalAveragePooling1D(),
                                    tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])

    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, (64, 32)).astype(np.int32)
    y = rng.normal(size=(64, 1)).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    model = model_fn()
    model.build((None, 32))
    initial = [tf.identity(v) for v in model.trainable_variables]
    loss = tf.keras.losses.MeanSquaredError()
    update = tf.function(lambda ds: dp_fedavg.client_update(model, loss, ds, initial, 0.1).update)
    results = {b"".join(u.numpy().tobytes() for u in update(dataset)) for _ in range(40)}
    assert len(results) == 1
    reference = model_fn()
    reference.build((None, 32))
    with tf.GradientTape() as tape:
        value = loss(y, reference(x, training=True))
    grads = tape.gradient(value, reference.trainable_variables)
    assert isinstance(grads[0], tf.IndexedSlices)
    # The dense gradient (unsorted_segment_sum: each row's repeats in order), one SGD step, the update θ⁰ − θ.
    steps = [w0 - (w0 - 0.1 * tf.convert_to_tensor(g)) for w0, g in zip(initial, grads)]
    for u, step in zip(update(dataset), steps):
        np.testing.assert_array_equal(u.numpy(), step.numpy())


def _steps_match_keras(optimizer, keras_opt, rtol):
    weights = [tf.constant([1.0, -2.0]), tf.constant([0.5])]
    grads = [[tf.constant([0.1, 0.3]), tf.constant([-0.2])], [tf.constant([-0.4, 0.1]), tf.constant([0.05])]]
    state = optimizer.initialize([tf.TensorSpec(w.shape, w.dtype) for w in weights])
    keras_vars = [tf.Variable(w) for w in weights]
    ours = weights
    for g in grads:
        state, ours = optimizer.next(state, ours, g)
        keras_opt.apply_gradients(zip(g, keras_vars))
    for a, b in zip(ours, keras_vars):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol)


def test_nesterov_matches_keras():
    _steps_match_keras(NesterovSGD(0.5, 0.9), tf.keras.optimizers.SGD(0.5, momentum=0.9, nesterov=True), 1e-6)


def test_server_adam_is_keras_adam_with_the_fedadam_epsilon():
    from fedgen_debug.training.optimizers import server_optimizer

    _steps_match_keras(server_optimizer(ServerConfig("adam", 0.03, 0.9)),
                       tf.keras.optimizers.Adam(0.03, beta_1=0.9, epsilon=1e-3), 1e-5)


# ---- training loop, run directory, crash-resume ---------------------------------------------------

from toy_training import run as _run, train_config as _train_config  # noqa: E402


class _Crash(Exception):
    pass


def test_crash_and_resume_gives_exactly_the_uninterrupted_weights(tmp_path):
    config = _train_config()
    straight = _run(tmp_path / "straight", config)

    def crash_after_two(round_num):
        if round_num == 2:
            raise _Crash()

    with pytest.raises(_Crash):
        _run(tmp_path / "crashed", config, after_round=crash_after_two)
    crashed = str(tmp_path / "crashed")
    assert json.load(open(store.released(crashed, store.STATUS)))["state"] == "running"
    resumed = _run(tmp_path / "crashed", config)
    assert resumed.resumed_from == 2
    # Exact: the resumed run drew the same (secret) samples and noise as it would have uninterrupted.
    uninterrupted = _run(tmp_path / "again", config, secret=_secret(crashed))
    for a, b in zip(uninterrupted.model_weights.trainable, resumed.model_weights.trainable):
        np.testing.assert_array_equal(a, b)
    rows = list(csv.DictReader(open(store.released(crashed, store.METRICS))))
    assert [int(r["round"]) for r in rows] == [1, 2, 3, 4]
    evals = list(csv.DictReader(open(store.released(crashed, store.EVAL))))
    assert [int(r["round"]) for r in evals] == [2, 4]
    assert sorted(os.listdir(store.server(crashed, store.CHECKPOINTS))) == ["round_000003.npz", "round_000004.npz"]
    # Two runs, two secrets: the same configuration ends elsewhere.
    assert not np.allclose(straight.model_weights.trainable[0], resumed.model_weights.trainable[0])
    # A secret belongs to one run: reusing it for another configuration is refused by the ledger.
    with pytest.raises(ValueError, match="in the ledger with other events"):
        _run(tmp_path / "quiet", TrainingConfig(**{**config.__dict__, "dp": DPConfig(2, 0.0, 0.5)}),
             secret=_secret(crashed))


def _secret(run_dir):
    from fedgen_debug.runs import secret

    return secret.load(str(run_dir))


def test_run_directory_records_privacy_and_refuses_conflicts(tmp_path, fresh_ledger):
    config = _train_config(rounds=2)
    fresh_ledger.set_budget("*", 1e6)
    result = _run(tmp_path / "a", config)
    a = str(tmp_path / "a")
    saved = json.load(open(store.released(a, store.CONFIG)))
    assert saved["training"]["dp"] == {"clients_per_round": 2, "noise_multiplier": 1.0, "clip": 0.5,
                                       "accounting": "replace-one"}
    assert json.load(open(store.released(a, store.STATUS))) == {"state": "finished", "rounds_completed": 2, "rounds": 2}
    (total,) = fresh_ledger.totals()
    assert total.population == "toy-population" and total.population_size == 5 and len(total.releases) == 1
    assert total.guarantee.epsilon == pytest.approx(result.run_record.guarantee(total.guarantee.delta).epsilon)
    privacy = json.load(open(store.released(a, store.PRIVACY)))
    assert privacy["population_total"]["epsilon"] == pytest.approx(total.guarantee.epsilon)
    with pytest.raises(ValueError, match=r"already holds a run with a different configuration \(training.rounds: 2 "
                                         r"there, 3 now\)"):
        _run(tmp_path / "a", _train_config(rounds=3))
    fresh_ledger.set_budget("toy-population", total.guarantee.epsilon * 1.01)
    with pytest.raises(PrivacyBudgetExceeded, match="Refusing it"):
        _run(tmp_path / "b", config)
    assert not (tmp_path / "b").exists()  # refused before anything was written
    assert len(fresh_ledger.records()) == 1


def test_a_run_directory_is_trained_by_one_process_at_a_time(tmp_path):
    import subprocess
    import sys

    # Another process holds the lock, as one resuming the same run would.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from fedgen_debug.runs import store\n"
                               f"with store.exclusive({str(tmp_path / 'a')!r}):\n print('HELD', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "HELD"
        with pytest.raises(ValueError, match="being trained by another process"):
            _run(tmp_path / "a", _train_config(rounds=1))
    finally:
        holder.kill()
        holder.wait()
    assert not (tmp_path / "a").exists()
    _run(tmp_path / "a", _train_config(rounds=1))  # released


def test_sigkill_mid_training_then_resume_gives_the_uninterrupted_weights(tmp_path):
    import signal
    import subprocess
    import sys

    from fedgen_debug import runtime

    before = set(runtime.worker_processes())
    script = os.path.join(os.path.dirname(__file__), "toy_training.py")
    proc = subprocess.Popen([sys.executable, script, str(tmp_path / "killed"), "6"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        for line in proc.stdout:
            if line.strip() == "ROUND 3":
                break
        proc.send_signal(signal.SIGKILL)  # no exit hooks run: the worst crash
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        # A SIGKILLed parent cannot stop its TFF worker; this test cleans up after it.
        for pid in set(runtime.worker_processes()) - before:
            os.kill(pid, signal.SIGKILL)
    killed = str(tmp_path / "killed")
    status = json.load(open(store.released(killed, store.STATUS)))
    assert status["state"] == "running" and 3 <= status["rounds_completed"] < 6
    resumed = _run(tmp_path / "killed", _train_config(rounds=6))
    assert 3 <= resumed.resumed_from < 6
    straight = _run(tmp_path / "straight", _train_config(rounds=6), secret=_secret(killed))
    for a, b in zip(straight.model_weights.trainable, resumed.model_weights.trainable):
        np.testing.assert_array_equal(a, b)
    rows = list(csv.DictReader(open(store.released(killed, store.METRICS))))
    assert [int(r["round"]) for r in rows] == [1, 2, 3, 4, 5, 6]
