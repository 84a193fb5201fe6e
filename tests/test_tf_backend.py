"""The `tf` backend runs the same algorithm as TFF's (the reference): the same rounds with the same secrets
give the same weights, DP noise state and ledger event on both, for DP-FedAvg (with update canaries)
and DP-FedAvg-GAN; a run started on one backend resumes on the other; and an attack on the DP sum
(subtract the noise a leaked seed would give) must not work without the run secret."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.training import dp_fedavg, dp_fedavg_gan as dpgan, loop, update_canaries
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training import tf_backend
from fedgen_debug.training.config import BACKEND_ENV, check_backend, resolve_backend
from fedgen_debug.training.dp_query import released_event
from fedgen_debug.privacy.sampling import sample_clients
from fedgen_debug.training.tf_backend import DPSum
from fedgen_debug.training.dp_query import dp_query, round_event as dp_query_event
from fedgen_debug.training.config import DPConfig

import test_gan_core as gan_fixtures
import toy_training

SECRET = RunSecret(77)


def leaves(state):
    return [np.asarray(x) for x in tf.nest.flatten(state)]


def flat(state):
    return np.concatenate([x.ravel().astype(np.float64) for x in leaves(state)])


def assert_same_state(a, b, rtol=1e-5, atol=1e-6):
    """Same structure, same integer/bytes leaves exactly (noise seeds, rounds, the event), floats to
    float32 rounding (TFF's C++ runtime sums the clients' records in its own order)."""
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(leaves(a), leaves(b)):
        assert x.dtype == y.dtype, (x.dtype, y.dtype)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(x, y)


def fedavg_rounds(backend, config, data, rounds, canaries=None):
    process = dp_fedavg.build_process(toy_training.SPEC, config, SECRET.tf_seed("dp-noise"), canaries, backend=backend)
    state = process.initialize()
    states = [state]
    for r in range(rounds):
        sampled = sample_clients(sorted(data), config.dp.clients_per_round, SECRET.rng("sampling", r))
        state = process.next(state, [dp_fedavg.client_dataset(data[c], config) for c in sampled]).state
        states.append(state)
    return process, states


def test_backend_names_are_checked():
    assert check_backend("tf") == "tf"
    with pytest.raises(ValueError, match=r"backend must be one of tf, tff. Found 'gpu'."):
        dp_fedavg.build_process(toy_training.SPEC, toy_training.train_config(), (1, 2), backend="gpu")


def test_fedavg_rounds_are_the_same_on_both_backends():
    config = toy_training.train_config()
    data = toy_training.client_data(n_clients=5)
    tff_process, tff_states = fedavg_rounds("tff", config, data, 3)
    tf_process, tf_states = fedavg_rounds("tf", config, data, 3)
    for a, b in zip(tff_states, tf_states):
        assert_same_state(a, b)
    # The noise is there (z = 1): the weights moved differently from a noiseless run's.
    quiet = toy_training.train_config()
    quiet = type(quiet)(**{**quiet.__dict__, "dp": DPConfig(2, 0.0, 0.5)})
    _, quiet_states = fedavg_rounds("tf", quiet, data, 3)
    assert not np.allclose(flat(quiet_states[-1].global_model_weights), flat(tf_states[-1].global_model_weights))
    assert released_event(tf_states[-1].aggregator) == released_event(tff_states[-1].aggregator)
    for process, state in ((tff_process, tff_states[-1]), (tf_process, tf_states[-1])):
        np.testing.assert_allclose(process.get_model_weights(state).trainable[0],
                                   tf_states[-1].global_model_weights.trainable[0], rtol=1e-5)


def test_the_thread_count_does_not_change_a_bit(monkeypatch):
    config = toy_training.train_config()
    data = toy_training.client_data(n_clients=5)
    runs = []
    for threads in ("1", "3"):
        monkeypatch.setenv(tf_backend.CLIENT_THREADS_ENV, threads)
        runs.append(fedavg_rounds("tf", config, data, 3)[1][-1])
    for x, y in zip(leaves(runs[0]), leaves(runs[1])):
        np.testing.assert_array_equal(x, y)
    monkeypatch.setenv(tf_backend.CLIENT_THREADS_ENV, "0")
    with pytest.raises(ValueError, match=r"FEDGEN_DEBUG_CLIENT_THREADS must be an integer >= 1. Found '0'."):
        fedavg_rounds("tf", config, data, 1)


def test_client_workers_run_first_calls_one_at_a_time_then_in_parallel():
    """A worker's first call traces its tf.function; TF 2.14 segfaults when that overlaps another thread's
    call. So no two calls overlap until every worker has run once; afterwards they do (the threads' point)."""
    import threading
    import time

    lock, active, overlaps = threading.Lock(), [0], []

    def make_update_fn():
        def update(i):
            with lock:
                active[0] += 1
                overlaps.append((i, active[0]))
            time.sleep(0.05)
            with lock:
                active[0] -= 1
            return i
        return update

    workers = tf_backend.ClientWorkers(make_update_fn, count=2)
    assert list(workers.map([(0,), (1,)])) == [0, 1]     # each worker's first call
    assert max(n for _, n in overlaps) == 1
    overlaps.clear()
    assert list(workers.map([(i,) for i in range(6)])) == list(range(6))
    assert max(n for _, n in overlaps) == 2


def test_the_backend_comes_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "tff")
    assert isinstance(dp_fedavg.build_process(toy_training.SPEC, toy_training.train_config(), (1, 2)),
                      tff.learning.templates.LearningProcess)
    monkeypatch.setenv(BACKEND_ENV, "tf")
    assert isinstance(dp_fedavg.build_process(toy_training.SPEC, toy_training.train_config(), (1, 2)),
                      tf_backend.FedAvgProcess)
    monkeypatch.delenv(BACKEND_ENV)
    assert resolve_backend() == "tf"


def test_fedavg_with_update_canaries_is_the_same_on_both_backends():
    config = toy_training.train_config()
    data = toy_training.client_data(n_clients=5)
    ids = tuple(sorted(data)) + update_canaries.canary_ids(2)
    data = {**data, **{c: tf.data.Dataset.from_tensor_slices((np.zeros((0, 2), np.float32),
                                                              np.zeros((0, 1), np.float32))) for c in ids[5:]}}
    plan = update_canaries.plan(tuple(sorted(data)), 2, config, SECRET)
    assert plan.schedule.any()  # some round adds a canary
    _, tff_states = fedavg_rounds("tff", config, data, 3, plan)
    _, tf_states = fedavg_rounds("tf", config, data, 3, plan)
    for a, b in zip(tff_states, tf_states):
        assert_same_state(a, b)


def test_word_lm_rounds_are_the_same_on_both_backends():
    """The project's CIFG word-LM (test size): embedding gradients arrive as IndexedSlices, which the
    pure client update applies row by row and TFF's SGD densifies; the rounds must still agree."""
    from fedgen_debug.training.lm_run import LMRun, model_spec

    run = LMRun("word", "synthetic-text:users=6", 0.0, "test")
    spec = model_spec(run, 40)
    config = run.training_config(6)
    rng = np.random.default_rng(0)
    data = {f"u{i}": tf.data.Dataset.from_tensor_slices(
        (rng.integers(0, 40, (n, run.max_length), dtype=np.int32), rng.integers(0, 40, (n, run.max_length),
                                                                                dtype=np.int32)))
            for i, n in enumerate((9, 20, 0, 33, 5, 16))}
    config = type(config)(**{**config.__dict__, "dp": DPConfig(3, 1.0, 1.0)})
    states = {}
    for backend in ("tff", "tf"):
        process = dp_fedavg.build_process(spec, config, SECRET.tf_seed("dp-noise"), backend=backend)
        state = process.initialize()
        for r in range(2):
            sampled = sample_clients(sorted(data), 3, SECRET.rng("sampling", r))
            state = process.next(state, [dp_fedavg.client_dataset(data[c], config) for c in sampled]).state
        states[backend] = state
    assert_same_state(states["tff"], states["tf"], rtol=1e-4, atol=1e-5)


def gan_rounds(backend, config, rounds, client_dataset=gan_fixtures.client_dataset):
    process = dpgan.build_gan_process(gan_fixtures.TINY_G, gan_fixtures.TINY_D, config, SECRET, backend=backend)
    state = process.initialize()
    states = [state]
    for r in range(rounds):
        sampled = sample_clients(sorted(gan_fixtures.CLIENTS), 4, SECRET.rng("sampling", r))
        state = process.next(state, loop.round_datasets(process, sampled, client_dataset, r)).state
        states.append(state)
    return states


def test_gan_rounds_are_the_same_on_both_backends():
    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=3)
    config = type(config)(**{**config.__dict__, "disc_rounds_per_gen_update": 2})  # G phase in round 2 only
    tff_states, tf_states = gan_rounds("tff", config, 3), gan_rounds("tf", config, 3)
    for a, b in zip(tff_states, tf_states):
        assert_same_state(a, b, rtol=1e-4, atol=1e-5)
    assert not np.allclose(flat(tf_states[0]["server"]["generator"]), flat(tf_states[-1]["server"]["generator"]))


def test_a_gan_run_traces_its_vectorized_round_once_whatever_its_rounds_client_counts():
    """The client axis is unknown to the traced call: rounds with 1, 2 and 3 clients that selected
    something, each computed exactly (no padding clients), share one trace."""
    def client_dataset(cid, round_num=None):
        keep = 64 if cid in ("c1", "c2", "c3")[:1 + round_num % 3] else 0
        return tf.data.Dataset.from_tensor_slices(gan_fixtures.CLIENTS[cid][:keep]).batch(16)

    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=3)
    process = dpgan.build_gan_process(gan_fixtures.TINY_G, gan_fixtures.TINY_D, config, SECRET, backend="tf")
    rounds, computed = process.iterative_process, []
    original = tf_backend.vectorized_gan.rows_to_compute
    state = process.initialize()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tf_backend.vectorized_gan, "rows_to_compute",
                      lambda mask, multiple=8: computed.append(len(original(mask, multiple))) or original(mask, multiple))
        for r in range(3):
            clients = sorted(gan_fixtures.CLIENTS)
            state = process.next(state, loop.round_datasets(process, clients, client_dataset, r)).state
    assert computed == [1, 2, 3]
    assert rounds._vectorized.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("clip_quantile", [None, 0.5])
def test_gan_rounds_with_devices_that_select_nothing_are_the_same_on_both_backends(monkeypatch, clip_quantile):
    """Strict selection: most sampled devices of a small population train on nothing (the tf backend
    leaves them out of the vectorized call; their zero updates add nothing to the sum, and to an
    adaptive clip's count they report the midpoint, as nothing)."""
    computed = []

    def rows_to_compute(mask, multiple=8):
        rows = original(mask, multiple=1)  # 4 clients a round: skip with no rounding up
        computed.append(len(rows))
        return rows

    original = tf_backend.vectorized_gan.rows_to_compute
    monkeypatch.setattr(tf_backend.vectorized_gan, "rows_to_compute", rows_to_compute)

    def client_dataset(cid, round_num=None):
        keep = 0 if cid in ("c1", "c4", "c6") else (5 if cid == "c2" else 64)
        return tf.data.Dataset.from_tensor_slices(gan_fixtures.CLIENTS[cid][:keep]).batch(16)

    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=3)
    if clip_quantile is not None:
        dp = dataclasses.replace(config.training.dp, clip_quantile=clip_quantile)
        config = dataclasses.replace(config, training=dataclasses.replace(config.training, dp=dp))
    tff_states = gan_rounds("tff", config, 3, client_dataset)
    for a, b in zip(tff_states, gan_rounds("tf", config, 3, client_dataset)):
        assert_same_state(a, b, rtol=1e-4, atol=1e-5)
    assert min(computed) < 4  # some round left a client out
    # In chunks of 2 clients (a cohort larger than CLIENT_CHUNK; chunks where nobody selected anything
    # are skipped): the same sums.
    monkeypatch.setattr(tf_backend, "CLIENT_CHUNK", 2)
    computed.clear()
    for a, b in zip(tff_states, gan_rounds("tf", config, 3, client_dataset)):
        assert_same_state(a, b, rtol=1e-4, atol=1e-5)
    assert computed and max(computed) <= 2
    if clip_quantile is not None:  # the clip moved, and both backends report the composed event
        clip = tff_states[-1]["aggregator"].query_state.numerator_state.sum_state.l2_norm_clip
        assert clip != pytest.approx(0.5)
        assert released_event(tff_states[-1]["aggregator"]) == dp_query_event(config.training.dp)


def test_gan_clients_handed_over_as_arrays_give_tffs_rounds():
    """The scenario's fast path: arrays of examples on tf (packed directly), the same clients' tf.data
    batches on TFF; an array on TFF is batched by `client_batches` into the same rounds."""
    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=2)
    tff_states = gan_rounds("tff", config, 2)
    for backend in ("tf", "tff"):
        for a, b in zip(tff_states, gan_rounds(backend, config, 2, gan_fixtures.CLIENTS.get)):
            assert_same_state(a, b, rtol=1e-4, atol=1e-5)


def test_gan_rounds_that_cycle_client_data_are_the_same_on_both_backends():
    """The fixture's clients hold 64 examples, half of n·B = 8 × 16: cycled, each takes 8 steps, not 4,
    on TFF (its datasets re-batched) and on tf (datasets or arrays), and the rounds change."""
    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=2)
    cycled = type(config)(**{**config.__dict__, "cycle_client_data": True})
    tff_states = gan_rounds("tff", cycled, 2)
    for backend, client_data in (("tf", gan_fixtures.client_dataset), ("tf", gan_fixtures.CLIENTS.get),
                                 ("tff", gan_fixtures.CLIENTS.get)):
        for a, b in zip(tff_states, gan_rounds(backend, cycled, 2, client_data)):
            assert_same_state(a, b, rtol=1e-4, atol=1e-5)
    one_pass = gan_rounds("tf", config, 2)
    assert not np.allclose(flat(one_pass[-1]["server"]["discriminator"]), flat(tff_states[-1]["server"]["discriminator"]))


def test_gan_rounds_that_average_the_generator_are_the_same_on_both_backends():
    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=3)
    averaged = type(config)(**{**config.__dict__, "gen_ema": 0.9})
    tff_states, tf_states = gan_rounds("tff", averaged, 3), gan_rounds("tf", averaged, 3)
    for a, b in zip(tff_states, tf_states):
        assert_same_state(a, b, rtol=1e-4, atol=1e-5)
    assert not np.allclose(flat(tf_states[-1]["server"]["generator_average"]),
                           flat(tf_states[-1]["server"]["generator"]["trainable"]))


def test_the_tf_backend_builds_a_gan_cohort_chunk_by_chunk(monkeypatch):
    """Memory flat in qN: a chunk's client datasets are built when it is packed, not the round's all at
    once (TFF gets the list it types)."""
    monkeypatch.setattr(tf_backend, "CLIENT_CHUNK", 2)
    built, built_at_chunk = [], []
    original = tf_backend.vectorized_gan.rows_to_compute
    monkeypatch.setattr(tf_backend.vectorized_gan, "rows_to_compute",
                        lambda mask, multiple=8: built_at_chunk.append(len(built)) or original(mask, multiple))

    def client_dataset(cid, round_num=None):
        built.append(cid)
        return gan_fixtures.client_dataset(cid)

    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=1)
    gan_rounds("tf", config, 1, client_dataset)
    assert built_at_chunk == [2, 4]   # 4 clients, chunks of 2
    built.clear()
    toy_config = toy_training.train_config(rounds=1)
    lm_on_tff = dp_fedavg.build_process(toy_training.SPEC, toy_config, (0, 0), backend="tff")
    assert isinstance(loop.round_datasets(lm_on_tff, ["c1", "c2"], client_dataset, 0), list)
    assert built == ["c1", "c2"]


def test_gan_rounds_client_by_client_are_the_same_as_tff(monkeypatch):
    """Models `vectorized_gan` cannot rebuild run client by client on threads: the same rounds too."""
    monkeypatch.setattr(tf_backend.vectorized_gan, "supports", lambda gen, disc: False)
    config = gan_fixtures.tiny_config(1.0, 0.5, rounds=2)
    for a, b in zip(gan_rounds("tff", config, 2), gan_rounds("tf", config, 2)):
        assert_same_state(a, b, rtol=1e-4, atol=1e-5)


def test_a_run_started_on_tff_resumes_on_tf_with_the_weights_of_an_uninterrupted_run(tmp_path):
    config = toy_training.train_config(rounds=4)
    data = toy_training.client_data(n_clients=5)

    def train(run_dir, backend, after_round=None):
        return loop.train(lambda s: dp_fedavg.build_process(toy_training.SPEC, config, s.tf_seed("dp-noise"),
                                                            backend=backend),
                          loop.Population("toy-population", tuple(data)),
                          lambda cid, round_num: dp_fedavg.client_dataset(data[cid], config), config, str(run_dir),
                          after_round=after_round, secret=SECRET)

    uninterrupted = train(tmp_path / "a", "tff")

    def crash(round_num):
        if round_num == 2:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        train(tmp_path / "b", "tff", after_round=crash)
    resumed = train(tmp_path / "b", "tf")
    assert resumed.resumed_from == 2
    for x, y in zip(leaves(resumed.model_weights), leaves(uninterrupted.model_weights)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert rd.latest_checkpoint(str(tmp_path / "b"))[0] == 4


def test_the_dp_sum_cannot_be_denoised_with_a_seed_guessed_from_the_public_seed():
    """The attack: a modeler who knows the public --seed and the released mean tries to subtract the
    noise. The noise seed comes from the run secret, so the guessed noise leaves an error of the
    noise's own size; only the secret's seed recovers the exact sum."""
    config = DPConfig(clients_per_round=3, noise_multiplier=1.0, clip=1.0)
    specs = [tf.TensorSpec([4000], tf.float32)]
    records = [[tf.constant(np.random.default_rng(i).uniform(-0.01, 0.01, 4000), tf.float32)] for i in range(3)]
    exact = sum(r[0].numpy() for r in records) / 3
    secret_seed = SECRET.tf_seed("dp-noise")
    mean = DPSum(dp_query(config, secret_seed), specs)
    released, _ = mean.next(mean.initialize(), records)
    sigma = 1.0 * 1.0 / 3  # zS/qN on the mean

    def noise_from(seed):
        zeros = [[tf.zeros([4000])] for _ in range(3)]
        guess = DPSum(dp_query(config, seed), specs)
        return guess.next(guess.initialize(), zeros)[0][0].numpy()

    for public_guess in ((0, 0), (3, 3), (0, 3)):  # e.g. the public --seed used as the noise seed
        residual = released[0].numpy() - noise_from(public_guess) - exact
        assert abs(np.std(residual) - np.sqrt(2) * sigma) < 0.05 * sigma  # two independent noises
    recovered = released[0].numpy() - noise_from(secret_seed)
    np.testing.assert_allclose(recovered, exact, atol=1e-5)  # what the secret protects


@pytest.mark.parametrize("clip_quantile", [None, 0.5])
def test_the_dp_sum_of_stacked_clients_is_the_client_by_client_sum_for_any_count_and_traces_twice_at_most(
        clip_quantile):
    """Under strict selection a round's count of clients with data varies; the stacked sum was traced once
    per count (~1 s each, 28.7 s for counts 1-30 of a GAN's shapes). Now: the same bits as adding the
    clients one by one (the same state, so the same noise), in at most two traces."""
    config = DPConfig(clients_per_round=8, noise_multiplier=1.0, clip=1.0, clip_quantile=clip_quantile)
    specs = [tf.TensorSpec([3, 2], tf.float32), tf.TensorSpec([5], tf.float32)]
    rng = np.random.default_rng(3)
    dp_sum = DPSum(dp_query(config, SECRET.tf_seed("dp-noise")), specs)
    state = dp_sum.initialize()
    for count in (1, 5, 2, 7, 3, 6):
        stack = [rng.normal(size=(count, *s.shape)).astype(np.float32) for s in specs]
        stacked, stacked_state = dp_sum.next(state, stacks=[stack, [leaf[:1] for leaf in stack]])
        clients = [[leaf[i] for leaf in stack] for i in range(count)] + [[leaf[0] for leaf in stack]]
        one_by_one, one_by_one_state = dp_sum.next(state, clients)
        for x, y in zip(leaves((stacked, stacked_state)), leaves((one_by_one, one_by_one_state))):
            np.testing.assert_array_equal(x, y)
    assert dp_sum._sum_stacked.experimental_get_tracing_count() <= 2
