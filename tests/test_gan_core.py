"""DP-FedAvg-GAN core (augenstein2020 Alg. 1): WGAN-GP against tensorflow-gan, the algorithm's
invariants (G never sees client data, clipped client updates, one TFF round = the pure-TF updates),
exact resume through `training.loop`, and a tiny 1-D GAN that learns with and without DP."""

import dataclasses
import functools
import inspect

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_gan as tfgan

from fedgen_debug.models import gan
from fedgen_debug.training import dp_fedavg_gan as dpgan, presets
from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.training import loop
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig
from fedgen_debug.training.dp_query import dp_query
from fedgen_debug.training.optimizers import server_optimizer
from fedgen_debug.privacy.sampling import sample_clients

TEST_GAN = presets.gan_model_config("test")
gen_fn = functools.partial(gan.build_generator, TEST_GAN, 1)
disc_fn = functools.partial(gan.build_discriminator, TEST_GAN, 2)


SECRET = RunSecret(2024)  # the run secret, given: these tests replay exact rounds


def images(n, seed):
    return tf.constant(np.random.default_rng(seed).uniform(-1, 1, size=(n, 28, 28, 1)), tf.float32)


def weights(variables):
    return [v.numpy() for v in variables]


# ---- models and configs --------------------------------------------------------------------------

def test_models_follow_the_paper_architecture_and_are_seeded():
    g, d = gan.build_generator(TEST_GAN, 1), gan.build_discriminator(TEST_GAN, 2)
    out = g(tf.random.normal([3, TEST_GAN.noise_dim]), training=False)
    assert out.shape == (3, 28, 28, 1) and float(tf.reduce_max(tf.abs(out))) <= 1.0  # tanh
    assert d(out).shape == (3, 1)
    assert not d.non_trainable_variables  # no BatchNorm in D: all of it is clipped and averaged
    assert len(g.non_trainable_variables) == 8  # moving mean/var of the 4 BatchNorms (server state)
    for a, b in zip(weights(g.variables), weights(gan.build_generator(TEST_GAN, 1).variables)):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(weights(g.variables)[0], weights(gan.build_generator(TEST_GAN, 9).variables)[0])
    paper = gan.build_generator(presets.gan_model_config("paper"), 0)
    assert [l.output.shape[-1] for l in paper.layers if "dense" in l.name] == [1024, 7 * 7 * 256]


def test_a_bilinear_generator_resizes_then_convolves_where_the_paper_transposes():
    config = dataclasses.replace(TEST_GAN, gen_upsample="bilinear")
    g = gan.build_generator(config, 1)
    ups = [layer for layer in g.layers if isinstance(layer, tf.keras.layers.UpSampling2D)]
    assert [u.interpolation for u in ups] == ["bilinear"] * 2 and [u.output.shape[1] for u in ups] == [14, 28]
    assert not any(isinstance(layer, tf.keras.layers.Conv2DTranspose) for layer in g.layers)
    convs = [layer for layer in g.layers if type(layer) is tf.keras.layers.Conv2D]
    assert [c.kernel_size for c in convs] == [(3, 3), (3, 3), (4, 4)]   # the image layer stays the paper's
    assert [c.filters for c in convs] == [*config.gen_channels[1:], 1]
    out = g(tf.random.normal([3, config.noise_dim]), training=False)
    assert out.shape == (3, 28, 28, 1) and float(tf.reduce_max(tf.abs(out))) <= 1.0
    assert len(g.non_trainable_variables) == 8   # the same BNs: the server state has the same shape
    # The critic does not change, so neither does the DP noise's norm on it.
    assert [w.shape for w in gan.build_discriminator(config, 2).weights] == \
        [w.shape for w in gan.build_discriminator(TEST_GAN, 2).weights]


@pytest.mark.parametrize("build, message", [
    (lambda: gan.GANConfig(noise_dim=0), r"noise_dim must be >= 1. Found 0."),
    (lambda: gan.GANConfig(gen_channels=(8, 8)), r"gen_channels must be 3 integers >= 1"),
    (lambda: gan.GANConfig(gen_upsample="nearest"), r"gen_upsample must be one of transpose, bilinear. Found 'nearest'."),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), disc_steps=0), r"disc_steps must be >= 1. Found 0."),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), gen_learning_rate=-1),
     r"gen_learning_rate must be > 0. Found -1."),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), gen_optimizer="rmsprop"), r"gen_optimizer must"),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), gen_beta_1=1.0), r"gen_beta_1 must be in \[0, 1\). Found 1.0."),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), cycle_client_data="yes"),
     r"cycle_client_data must be a bool. Found 'yes'."),
    (lambda: dpgan.GANTrainingConfig(TrainingConfig(1, DPConfig(1, 0.0, None)), gen_ema=1.0),
     r"gen_ema must be in \[0, 1\). Found 1.0."),
])
def test_config_validation(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_paper_preset_is_table_9_and_configs_round_trip_json():
    c = presets.gan_training_config("paper")
    t = c.training
    assert (c.disc_steps, c.gen_steps, t.client.batch_size, c.gen_batch_size) == (6, 6, 32, 32)
    assert (c.gen_learning_rate, t.client.learning_rate, t.dp.clip, t.dp.noise_multiplier) == (0.005, 0.0005, 0.1, 0.01)
    assert (t.dp.clients_per_round, t.rounds, c.gradient_penalty, c.gen_optimizer) == (10, 1000, 10.0, "sgd")
    # One pass over a client's data, as the paper code's `repeat=False`; so does the demo (cycling is opt-in).
    assert not c.cycle_client_data and not presets.gan_training_config("demo").cycle_client_data
    # A run saved before the option existed has no such key in its config.json, and must still resume
    # (a resume requires the same config); a cycling config keeps the key and round-trips.
    assert "cycle_client_data" not in c.to_json()
    cycling = dataclasses.replace(c, cycle_client_data=True)
    assert cycling.to_json()["cycle_client_data"] is True and dpgan.GANTrainingConfig.from_json(cycling.to_json()) == cycling
    assert "gen_ema" not in c.to_json() and not presets.gan_training_config("demo").gen_ema   # the same for the average
    averaged = dataclasses.replace(c, gen_ema=0.9)
    assert averaged.to_json()["gen_ema"] == 0.9 and dpgan.GANTrainingConfig.from_json(averaged.to_json()) == averaged
    server_state = server_optimizer(t.server).initialize([tf.TensorSpec([1])])  # the paper code: SGD(lr=1.0)
    assert list(server_state) == ["learning_rate"] and float(server_state["learning_rate"]) == 1.0
    assert dpgan.GANTrainingConfig.from_json(c.to_json()) == c
    assert gan.GANConfig(**{**presets.gan_model_config("paper").__dict__, "gen_channels": [256, 64, 32]}) == presets.gan_model_config("paper")


def test_a_client_cycles_through_its_examples_only_when_short_of_n_batches():
    three = np.arange(3, dtype=np.float32).reshape(3, 1, 1, 1)
    np.testing.assert_array_equal(dpgan.client_step_examples(three, 4, 2, cycle=True).ravel(), [0, 1, 2, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(dpgan.client_step_examples(three, 4, 2, cycle=False).ravel(), [0, 1, 2])
    np.testing.assert_array_equal(dpgan.client_step_examples(np.arange(10.0), 2, 2, cycle=True), [0, 1, 2, 3])
    assert dpgan.client_step_examples(np.zeros((0, 1, 1, 1)), 4, 2, cycle=True).shape == (0, 1, 1, 1)
    # A dataset of batches: the same examples, re-batched to n full batches; an empty one stays empty.
    batches = dpgan.client_batches(tf.data.Dataset.from_tensor_slices(three).batch(2), 2, 4, cycle=True)
    assert [b.ravel().tolist() for b in batches.as_numpy_iterator()] == [[0, 1], [2, 0], [1, 2], [0, 1]]
    empty = tf.data.Dataset.from_tensor_slices(np.zeros((0, 1), np.float32)).batch(2)
    assert list(dpgan.client_batches(empty, 2, 4, cycle=True).as_numpy_iterator()) == []


# ---- (a) WGAN-GP against tensorflow-gan ----------------------------------------------------------

def test_wgan_gp_losses_equal_tensorflow_gan(monkeypatch):
    disc = disc_fn()
    real, fake = images(6, 0), images(6, 1)
    alpha = tf.constant([0.0, 0.1, 0.35, 0.5, 0.8, 1.0])
    ours = dpgan.wgan_gp_losses(disc, real, fake, alpha, gradient_penalty_weight=10.0)
    ours_graph = tf.function(dpgan.wgan_gp_losses)(disc, real, fake, alpha, 10.0)

    # tfgan draws alpha itself (unseeded, graph mode only): hand it ours through tf.random.uniform.
    monkeypatch.setattr(tf.random, "uniform", lambda shape, **_: tf.reshape(alpha, shape))

    @tf.function
    def reference():
        real_scores, fake_scores = disc(real), disc(fake)
        penalty = tfgan.losses.wargs.wasserstein_gradient_penalty(
            real, fake, None, lambda x, _: disc(x, training=True), "critic", loss_collection=None)
        return (tfgan.losses.wargs.wasserstein_discriminator_loss(real_scores, fake_scores, loss_collection=None),
                penalty, tfgan.losses.wargs.wasserstein_generator_loss(fake_scores, loss_collection=None))

    wasserstein, penalty, gen_loss = [float(v) for v in reference()]
    assert penalty > 0.01  # a non-trivial penalty, so the comparison means something
    for losses in (ours, ours_graph):
        np.testing.assert_allclose(float(losses.wasserstein), wasserstein, rtol=1e-5)
        np.testing.assert_allclose(float(losses.gradient_penalty), penalty, rtol=1e-5)
        np.testing.assert_allclose(float(losses.gen_loss), gen_loss, rtol=1e-5)
        np.testing.assert_allclose(float(losses.disc_loss), wasserstein + 10.0 * penalty, rtol=1e-5)
    # alpha matters: other coefficients give another penalty.
    other = dpgan.gradient_penalty(disc, real, fake, tf.fill([6], 0.5))
    assert abs(float(other) - penalty) > 1e-4


# ---- (b) Algorithm 1 invariants ------------------------------------------------------------------

def test_generator_update_takes_no_client_data():
    params = set(inspect.signature(dpgan.server_generator_update).parameters)
    assert params == {"gen", "disc", "gen_weights", "disc_weights", "optimizer", "optimizer_state", "seed", "steps",
                      "batch_size"}
    g, d = gen_fn(), disc_fn()
    gen_w = tff.learning.models.ModelWeights(weights(g.trainable_variables), weights(g.non_trainable_variables))
    disc_w = weights(d.trainable_variables)
    opt = tff.learning.optimizers.build_sgdm(0.01)
    opt_state = opt.initialize([tf.TensorSpec(v.shape, v.dtype) for v in g.trainable_variables])
    seed = tf.constant([3, 4], tf.int64)
    results = []
    for client_seed in (10, 11):  # a client phase on different private data runs on the same models in between
        ds = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(images(16, client_seed)).batch(8),
                                  tf.data.Dataset.from_tensor_slices(dpgan.client_step_seeds(SECRET, 0, client_seed, 2))))
        dpgan.client_discriminator_update(d, g, ds, [w * 3 for w in disc_w], gen_w.trainable, 0.5, 2)
        results.append(dpgan.server_generator_update(g, d, gen_w, disc_w, opt, opt_state, seed, 2, 8))
    for a, b in zip(tf.nest.flatten(results[0]), tf.nest.flatten(results[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.allclose(results[0].weights.trainable[0], gen_w.trainable[0])  # the G steps did move G


def test_dp_query_clips_a_client_update_to_s():
    disc = disc_fn()
    record = [tf.random.stateless_normal(v.shape, seed=[i, 0]) for i, v in enumerate(disc.trainable_variables)]
    record = [r * 10.0 / tf.linalg.global_norm(record) for r in record]  # ||Δ_k|| = 10
    query = dp_query(presets.gan_training_config("paper").training.dp, (0, 0))  # S = 0.1
    clipped = query.preprocess_record(query.derive_sample_params(query.initial_global_state()), record)
    np.testing.assert_allclose(float(tf.linalg.global_norm(clipped)), 0.1, rtol=1e-5)
    np.testing.assert_allclose(clipped[0].numpy(), record[0].numpy() * 0.01, rtol=1e-5)  # same direction


@pytest.mark.parametrize("backend", ["tff", "tf"])
def test_one_round_equals_the_pure_tf_client_and_server_updates(backend):
    clip = 0.1
    config = dpgan.GANTrainingConfig(
        TrainingConfig(rounds=1, dp=DPConfig(1, 0.0, clip), client=ClientConfig(1, 8, 0.05), seed=5),
        disc_steps=2, gen_steps=2, gen_batch_size=8, gen_optimizer="adam")
    process = dpgan.build_gan_process(gen_fn, disc_fn, config, SECRET, backend=backend)
    if backend == "tff":  # the server's computation takes no client data
        assert not tff.types.contains(process.server_update.type_signature.parameter,
                                      lambda t: isinstance(t, (tff.SequenceType, tff.FederatedType)))
    state = process.initialize()
    g, d = gen_fn(), disc_fn()  # the TFF initial state is the seeded models' weights
    server = state["server"]
    for a, b in zip(server["generator"]["trainable"] + server["generator"]["non_trainable"],
                    weights(g.trainable_variables) + weights(g.non_trainable_variables)):
        np.testing.assert_array_equal(a, b)
    real = tf.data.Dataset.from_tensor_slices(images(24, 7)).batch(8)  # 3 batches: only n = 2 are used
    out = process.next(state, [real])

    client = dpgan.client_discriminator_update(d, g, process.seeded_dataset(real, 0, 0), server["discriminator"],
                                               server["generator"]["trainable"], 0.05, 2, 10.0)
    norm = float(tf.linalg.global_norm(client.update))
    assert norm > 2 * clip  # the clip binds
    new_disc = [w - u * clip / norm for w, u in zip(server["discriminator"], client.update)]  # qN = 1, z = 0
    next_seed, gen_seed = dpgan.split_server_seed(server["gen_seed"])
    gen_w = tff.learning.models.ModelWeights(server["generator"]["trainable"], server["generator"]["non_trainable"])
    gen_out = dpgan.server_generator_update(g, d, gen_w, new_disc, tff.learning.optimizers.build_adam(0.005),
                                            server["gen_optimizer"], gen_seed, 2, 8)

    new = out.state["server"]
    disc_change = [a - b for a, b in zip(new["discriminator"], server["discriminator"])]
    np.testing.assert_allclose(float(tf.linalg.global_norm(disc_change)), clip, rtol=1e-4)  # ||Δ|| ≤ S
    for ours, expected in [(new["discriminator"], new_disc), (new["generator"]["trainable"], gen_out.weights.trainable),
                           (new["generator"]["non_trainable"], gen_out.weights.non_trainable),
                           (tf.nest.flatten(new["gen_optimizer"]), tf.nest.flatten(gen_out.optimizer_state))]:
        for a, b in zip(ours, expected):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(new["gen_seed"], next_seed.numpy())
    assert new["round"] == 1
    assert not np.allclose(new["generator"]["non_trainable"][1], server["generator"]["non_trainable"][1])  # BN stats
    # Released per round: the server's own values only; the client's losses never left it.
    assert set(out.metrics["server"]) == {"gen_loss", "gen_steps"} and "client_work" not in out.metrics
    np.testing.assert_allclose(out.metrics["server"]["gen_loss"], gen_out.gen_loss, rtol=1e-4)
    assert out.metrics["server"]["gen_steps"] == 2 and client.metrics["disc_steps"] == 2


def test_a_device_that_does_not_qualify_sends_a_zero_update():
    config = dpgan.GANTrainingConfig(
        TrainingConfig(rounds=1, dp=DPConfig(2, 0.0, 0.1), client=ClientConfig(1, 8, 0.05), seed=5),
        disc_steps=2, gen_steps=1, gen_batch_size=8)
    process = dpgan.build_gan_process(gen_fn, disc_fn, config, SECRET)
    state = process.initialize()
    real = tf.data.Dataset.from_tensor_slices(images(16, 7)).batch(8)
    empty = tf.data.Dataset.from_tensor_slices(np.zeros((0, 28, 28, 1), np.float32)).batch(8)
    alone = process.next(state, [real, empty]).state["server"]["discriminator"]
    both = process.next(state, [real, real]).state["server"]["discriminator"]
    change = [a - b for a, b in zip(alone, state["server"]["discriminator"])]
    change_both = [a - b for a, b in zip(both, state["server"]["discriminator"])]
    # The fixed denominator qN = 2: one qualifying client's clipped update, halved.
    np.testing.assert_allclose(float(tf.linalg.global_norm(change)), 0.1 / 2, rtol=1e-4)
    # Two qualifying clients (different G noise, so slightly different directions): close to S.
    assert 0.09 < float(tf.linalg.global_norm(change_both)) <= 0.1 + 1e-6


def test_a_diverged_client_update_is_zeroed_before_it_can_poison_the_round():
    """Finite entries whose squared norm overflows float32: tf-privacy's clip turns them into NaN (so
    the round's sum, D and G would be NaN); the client sends zeros instead, as for non-finite entries."""
    diverged = [tf.constant([3e19, -3e19]), tf.constant([1.0])]
    query = dp_query(DPConfig(2, 0.0, 0.1), (0, 0))
    params = query.derive_sample_params(query.initial_global_state())
    clipped, _ = query.preprocess_record(params, diverged)
    assert np.isnan(clipped[0].numpy()).all()   # why the check exists
    assert not bool(dpgan.usable_update(diverged))
    assert not bool(dpgan.usable_update([tf.constant([np.nan]), tf.constant([1.0])]))
    assert bool(dpgan.usable_update([tf.constant([1e18, -1e18]), tf.constant([1.0])]))


def test_every_round_moves_the_discriminator_by_at_most_s_with_the_presets_server_step():
    # Algorithm 1: θ_D ← θ_D + mean clipped Δ. A momentum server optimizer would carry
    # round 1's step into round 2 and move θ_D by more than S (0.19 here with momentum 0.9).
    preset = presets.gan_training_config("test", seed=3)
    config = dataclasses.replace(preset, training=dataclasses.replace(
        preset.training, dp=DPConfig(1, 0.0, 0.1), client=ClientConfig(1, 8, 0.05)))  # a step large enough to clip
    process = dpgan.build_gan_process(gen_fn, disc_fn, config, SECRET)
    state = process.initialize()
    real = tf.data.Dataset.from_tensor_slices(images(16, 2)).batch(8)
    for _ in range(3):
        before = state["server"]["discriminator"]
        state = process.next(state, [real]).state
        change = [a - b for a, b in zip(state["server"]["discriminator"], before)]
        np.testing.assert_allclose(float(tf.linalg.global_norm(change)), 0.1, rtol=1e-4)  # the clip binds


# ---- (c) a tiny 1-D GAN learns, with and without DP; exact resume through the loop ----------------

def mlp(inputs, seed, activation):
    init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed * 10 + i)  # noqa: E731
    return tf.keras.Sequential([tf.keras.Input((inputs,)),
                                tf.keras.layers.Dense(16, activation=activation, kernel_initializer=init(1)),
                                tf.keras.layers.Dense(1, kernel_initializer=init(2))])


TINY_G, TINY_D = functools.partial(mlp, 4, 1, "relu"), functools.partial(mlp, 1, 2, tf.nn.leaky_relu)
DATA_MEAN = 2.0
CLIENTS = {f"c{i}": np.random.default_rng(i).normal(DATA_MEAN, 0.5, size=(64, 1)).astype(np.float32)
           for i in range(8)}


def tiny_config(noise_multiplier, clip, rounds=12, checkpoint_every=10):
    # 8 D steps per G phase of 2: the critic stays ahead, so G climbs to the data instead of circling it.
    # λ = 1, not 10: in 1-D with data ~3 from G, λ = 10 makes slope 0 a barrier that traps a critic
    # initialized with the wrong sign (it then drives G away from the data).
    return dpgan.GANTrainingConfig(
        TrainingConfig(rounds, DPConfig(4, noise_multiplier, clip), ClientConfig(1, 16, 0.1), ServerConfig("sgd", 1.0),
                       seed=3, checkpoint_every=checkpoint_every),
        disc_steps=8, gen_steps=2, gen_batch_size=32, gen_learning_rate=0.02, gradient_penalty=1.0)


def client_dataset(cid, round_num=None):
    return tf.data.Dataset.from_tensor_slices(CLIENTS[cid]).batch(16)


def generated_mean(model_weights):
    g = TINY_G()
    for variable, value in zip(g.trainable_variables, model_weights.trainable):
        variable.assign(value)
    return float(tf.reduce_mean(g(np.random.default_rng(0).normal(size=(2000, 4)).astype(np.float32))))


def test_tiny_gan_learns_without_dp():
    config = tiny_config(0.0, None)
    process = dpgan.build_gan_process(TINY_G, TINY_D, config, SECRET)
    state = process.initialize()
    start = generated_mean(process.get_model_weights(state))
    for r in range(config.training.rounds):
        sampled = sample_clients(list(CLIENTS), 4, SECRET.rng("sampling", r))
        state = process.next(state, [client_dataset(c) for c in sampled]).state
    end = generated_mean(process.get_model_weights(state))
    # G starts ~2.75 below the data; the mean of 2000 samples has std error ~0.02, so halving the
    # distance is learning, not noise (a wrong-signed or frozen update stays at or beyond the start).
    assert abs(end - DATA_MEAN) < 0.5 * abs(start - DATA_MEAN), (start, end)


def test_tiny_gan_learns_with_dp_through_the_loop_and_resumes_exactly(tmp_path):
    config = tiny_config(1.0, 0.5, rounds=12, checkpoint_every=4)  # σ = zS/qN = 0.125 per coordinate

    def build(secret):
        return dpgan.build_gan_process(TINY_G, TINY_D, config, secret)

    population = loop.Population("tiny-1d", tuple(CLIENTS))
    start = generated_mean(build(SECRET).get_model_weights(build(SECRET).initialize()))
    a = str(tmp_path / "runs" / "a")
    result = loop.train(build, population, client_dataset, config.training, a, extra_config={"gan": config.to_json()},
                        secret=RunSecret(20240602))
    end = generated_mean(result.model_weights)
    assert abs(end - DATA_MEAN) < 0.5 * abs(start - DATA_MEAN), (start, end)
    rows = store.read_csv(store.released(a, store.METRICS))
    assert set(rows[0]) == {"round", "gen_loss", "gen_steps"} and len(rows) == 12  # no client metric

    def crash(round_num):
        if round_num == 9:
            raise RuntimeError("simulated crash")

    b = str(tmp_path / "runs" / "b")
    secret = secret_lib.load(a)  # test-only: b draws what a drew (same samples, same noise)
    with pytest.raises(RuntimeError, match="simulated crash"):
        loop.train(build, population, client_dataset, config.training, b, extra_config={"gan": config.to_json()},
                   after_round=crash, secret=secret)
    resumed = loop.train(build, population, client_dataset, config.training, b, extra_config={"gan": config.to_json()})
    assert resumed.resumed_from == 8
    for x, y in zip(store.load_arrays(store.released(b, store.MODEL_WEIGHTS)),
                    store.load_arrays(store.released(a, store.MODEL_WEIGHTS))):
        np.testing.assert_array_equal(x, y)  # same DP noise, same client noise, same G noise


def test_cadence_runs_the_generator_phase_every_k_rounds():
    config = dpgan.GANTrainingConfig(tiny_config(0.0, None).training, disc_steps=2, gen_steps=2,
                                     disc_rounds_per_gen_update=2, gradient_penalty=1.0)
    process = dpgan.build_gan_process(TINY_G, TINY_D, config, SECRET)
    state = process.initialize()
    gens, steps = [state["server"]["generator"]["trainable"][0]], []
    for r in range(2):
        out = process.next(state, [client_dataset(c) for c in sample_clients(list(CLIENTS), 4, SECRET.rng("sampling", r))])
        state = out.state
        gens.append(state["server"]["generator"]["trainable"][0])
        steps.append(out.metrics["server"]["gen_steps"])
    assert steps == [0, 2]
    np.testing.assert_array_equal(gens[0], gens[1])  # round 1: D only
    assert not np.allclose(gens[1], gens[2])          # round 2: D, then the G phase


def test_the_released_generator_is_the_moving_average_of_g_after_each_g_phase():
    """gen_ema = 0.5, a G phase every 2nd round: the average moves only in rounds 2 and 4, with TF's
    warm-up decay min(0.5, (1 + t) / (10 + t)) = 0.1538... then 0.25; the release is the average (with
    G's BN statistics), and the training itself is the same as without it."""
    base = dpgan.GANTrainingConfig(tiny_config(0.0, None).training, disc_steps=2, gen_steps=2,
                                   disc_rounds_per_gen_update=2, gradient_penalty=1.0)
    runs = {}
    for ema in (0.0, 0.5):
        process = dpgan.build_gan_process(TINY_G, TINY_D, dataclasses.replace(base, gen_ema=ema), SECRET)
        state = process.initialize()
        states = [state]
        for r in range(4):
            state = process.next(state, [client_dataset(c) for c in
                                         sample_clients(list(CLIENTS), 4, SECRET.rng("sampling", r))]).state
            states.append(state)
        runs[ema] = process, states
    process, states = runs[0.5]
    gens = [[np.asarray(w) for w in s["server"]["generator"]["trainable"]] for s in states]
    for a, b in zip(states, runs[0.0][1]):   # averaging is post-processing: the same training
        np.testing.assert_array_equal(flat(a["server"]["generator"]), flat(b["server"]["generator"]))
    expected = [w.copy() for w in gens[0]]
    for round_num in range(1, 5):
        if round_num % 2 == 0:
            phase = round_num // 2
            decay = min(0.5, (1 + phase) / (10 + phase))
            expected = [decay * e + (1 - decay) * g for e, g in zip(expected, gens[round_num])]
        for got, want in zip(states[round_num]["server"]["generator_average"], expected):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    released = process.get_model_weights(states[-1])
    for got, want in zip(released.trainable, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not np.allclose(flat(released.trainable), flat(gens[-1]))   # not the last G
    np.testing.assert_array_equal(flat(released.non_trainable), flat(states[-1]["server"]["generator"]["non_trainable"]))
    assert "generator_average" not in runs[0.0][1][-1]["server"]
    # A monitor period warm-starts from the previous average (and from G when the previous kept none).
    warm = process.warm_start(process.initialize(), states[-1])
    np.testing.assert_array_equal(flat(warm["server"]["generator_average"]), flat(states[-1]["server"]["generator_average"]))
    warm = process.warm_start(process.initialize(), runs[0.0][1][-1])
    np.testing.assert_array_equal(flat(warm["server"]["generator_average"]),
                                  flat(runs[0.0][1][-1]["server"]["generator"]["trainable"]))


def flat(tree):
    return np.concatenate([np.zeros(0)] + [np.ravel(x) for x in tf.nest.flatten(tree)])


def test_a_gan_run_that_averages_its_generator_resumes_exactly(tmp_path):
    config = dataclasses.replace(tiny_config(1.0, 0.5, rounds=6, checkpoint_every=2), gen_ema=0.9)

    def build(secret):
        return dpgan.build_gan_process(TINY_G, TINY_D, config, secret)

    def crash(round_num):
        if round_num == 5:
            raise RuntimeError("simulated crash")

    population, extra = loop.Population("tiny-1d", tuple(CLIENTS)), {"gan": config.to_json()}
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    whole = loop.train(build, population, client_dataset, config.training, a, extra_config=extra,
                       secret=RunSecret(20240603))
    with pytest.raises(RuntimeError, match="simulated crash"):
        loop.train(build, population, client_dataset, config.training, b, extra_config=extra, after_round=crash,
                   secret=secret_lib.load(a))
    resumed = loop.train(build, population, client_dataset, config.training, b, extra_config=extra)
    assert resumed.resumed_from == 4
    for x, y in zip(store.load_arrays(store.released(b, store.MODEL_WEIGHTS)),
                    store.load_arrays(store.released(a, store.MODEL_WEIGHTS))):
        np.testing.assert_array_equal(x, y)   # the average was checkpointed with the rest of the state
    assert whole.rounds_completed == 6
