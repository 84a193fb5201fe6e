"""DP-FedAvg-GAN (augenstein2020 Alg. 1): pure-TF discriminator/generator updates and a thin TFF layer.

A round: the server broadcasts (θ_D, θ_G); each sampled client runs up to n WGAN-GP discriminator
steps of SGD on its real batches against G's batches and returns Δ = θ_D⁰ − θ_D (TFF's sign); the
project's DP aggregator clips each Δ to L2 ≤ S, averages over the fixed qN and adds N(0, (zS/qN)²);
the server applies the mean with its optimizer (SGD, lr 1: θ_D ← θ_D + mean(θ_D − θ_D⁰), as in the
paper), then runs the generator steps itself on noise only. G never sees client data, so it inherits
D's guarantee by post-processing.

Cadence (App. C.2): "1:1 discriminator:generator updates" means one federated D update (a round) per
G phase of `gen_steps` steps; `disc_rounds_per_gen_update = k` runs the G phase after every k-th round.

Randomness is stateless and comes from the run secret (`fedgen_debug.runs.secret`), so a resumed run
repeats an uninterrupted one exactly and nothing of it follows from the public `--seed` (which sets
only the models' initialisation): client step t of the i-th sampled client in round r draws G's noise
and the penalty's interpolation coefficients from the secret's "gan-client-steps" stream for (r, i),
attached to its batch on the Python side; the server's noise comes from a seed in the server state
("gan-server"), split every round; DP noise from the aggregator's own seeded state ("dp-noise").

What leaves a device is its clipped, noised discriminator delta and nothing else: its losses stay on
the device. The released per-round values are the server's own (`gen_loss`, `gen_steps`: computed from
the noised D and noise only). Paper code: google-research/federated `gans/` (SGD for D and G).
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tensorflow_gan as tfgan

from fedgen_debug.runs.secret import RunSecret
from fedgen_debug import tff_workers
from fedgen_debug.training.config import resolve_backend
from fedgen_debug.training.gan_config import GANTrainingConfig  # noqa: F401 (re-exported)
from fedgen_debug.training.dp_query import dp_aggregator
from fedgen_debug.training.optimizers import server_optimizer

# ---- pure TF -------------------------------------------------------------------------------------

WGANLosses = collections.namedtuple("WGANLosses", ["disc_loss", "wasserstein", "gradient_penalty", "gen_loss"])
ClientOutput = collections.namedtuple("ClientOutput", ["update", "metrics"])
GeneratorOutput = collections.namedtuple("GeneratorOutput", ["weights", "optimizer_state", "gen_loss"])


def gradient_penalty(disc: tf.keras.Model, real, generated, alpha, epsilon: float = 1e-10):
    """tfgan's `wasserstein_gradient_penalty` (target 1, two-sided, batch mean), with the interpolation
    coefficients `alpha` [batch] passed in: tfgan draws them unseeded and only in graph mode."""
    alpha = tf.reshape(alpha, tf.concat([tf.shape(alpha), tf.ones([tf.rank(real) - 1], tf.int32)], 0))
    interpolates = real + alpha * (generated - real)
    with tf.GradientTape() as tape:
        tape.watch(interpolates)
        scores = disc(interpolates, training=True)
    gradients = tape.gradient(scores, interpolates)
    slopes = tf.sqrt(tf.reduce_sum(tf.square(gradients), axis=tf.range(1, tf.rank(gradients))) + epsilon)
    return tf.reduce_mean(tf.square(slopes - 1.0))


def wgan_gp_losses(disc: tf.keras.Model, real, generated, alpha, gradient_penalty_weight: float = 10.0) -> WGANLosses:
    """Improved Wasserstein losses (Gulrajani et al. 2017) through tfgan: D minimizes
    mean D(fake) − mean D(real) + λ·GP, G minimizes −mean D(fake)."""
    real_scores, fake_scores = disc(real, training=True), disc(generated, training=True)
    wasserstein = tfgan.losses.wargs.wasserstein_discriminator_loss(real_scores, fake_scores, loss_collection=None)
    penalty = gradient_penalty(disc, real, generated, alpha) if gradient_penalty_weight > 0 else tf.constant(0.0)
    gen_loss = tfgan.losses.wargs.wasserstein_generator_loss(fake_scores, loss_collection=None)
    return WGANLosses(wasserstein + gradient_penalty_weight * penalty, wasserstein, penalty, gen_loss)


def _regularization(model):
    return tf.add_n(model.losses) if model.losses else tf.constant(0.0)


def _assign(variables, values):
    for variable, value in zip(variables, values):
        variable.assign(value)


def _specs(variables):
    return [tf.TensorSpec(v.shape, v.dtype) for v in variables]


def _normal(seed, batch, dim):
    return tf.random.stateless_normal([batch, dim], seed=tf.random.experimental.stateless_fold_in(seed, 0))


def client_step_draws(seed, batch, noise_dim) -> tuple[tf.Tensor, tf.Tensor]:
    """A client step's G noise [batch, noise_dim] and interpolation coefficients [batch], from its step
    seed (`client_step_seeds`); the vectorized round (`vectorized_gan`) draws each client's the same way."""
    alpha = tf.random.stateless_uniform([batch], seed=tf.random.experimental.stateless_fold_in(seed, 1))
    return _normal(seed, batch, noise_dim), alpha


def usable_update(update) -> tf.Tensor:
    """Whether an update can be clipped: every entry finite *and* its L2 norm finite. A client whose
    local steps diverged can hold finite entries above ~1.8e19, whose squared norm overflows float32;
    tf.clip_by_global_norm then returns NaN for every entry, and one such client turns the round's sum,
    so D and then G, into NaN (seen: a demo-preset GAN on real FEMNIST, 50% inverted, round 84)."""
    entries = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in update])
    return tf.logical_and(entries, tf.math.is_finite(tf.linalg.global_norm(update)))


def client_discriminator_update(disc, gen, dataset: tf.data.Dataset, initial_disc_weights, gen_weights,
                                learning_rate: float, max_steps: int, gradient_penalty_weight: float = 10.0):
    """UserDiscUpdate: up to `max_steps` SGD steps on (real_batch, step_seed) elements; each step's fake
    batch is G(noise) with G in training mode (batch statistics, as the paper code). Returns the update
    θ_D⁰ − θ_D (all zeros if not `usable_update`, so one diverged client cannot poison the aggregate) and
    per-client mean losses."""
    _assign(disc.trainable_variables, initial_disc_weights)
    _assign(gen.trainable_variables, gen_weights)
    noise_dim = gen.input_shape[-1]
    sums, steps = tf.zeros([3]), tf.constant(0.0)
    # Over an iterator, not the dataset: AutoGraph turns `for x in dataset` into `dataset.reduce`,
    # whose body (models, double backprop) is re-instantiated on every call, for every client.
    for real, seed in iter(dataset.take(max_steps)):
        batch = tf.shape(real)[0]
        noise, alpha = client_step_draws(seed, batch, noise_dim)
        generated = gen(noise, training=True)
        with tf.GradientTape() as tape:
            losses = wgan_gp_losses(disc, real, generated, alpha, gradient_penalty_weight)
            loss = losses.disc_loss + _regularization(disc)
        for variable, grad in zip(disc.trainable_variables, tape.gradient(loss, disc.trainable_variables)):
            variable.assign_sub(learning_rate * grad)
        sums += tf.stack([losses.disc_loss, losses.gradient_penalty, -losses.wasserstein])
        steps += 1.0
    update = [w0 - w for w0, w in zip(initial_disc_weights, disc.trainable_variables)]
    finite = usable_update(update)
    update = [tf.where(finite, u, tf.zeros_like(u)) for u in update]
    means = sums / tf.maximum(steps, 1.0)
    metrics = collections.OrderedDict(disc_loss=means[0], gradient_penalty=means[1], wasserstein_estimate=means[2],
                                      disc_steps=steps, non_finite_updates=1.0 - tf.cast(finite, tf.float32))
    return ClientOutput(update, metrics)


def server_generator_update(gen, disc, gen_weights: tff.learning.models.ModelWeights, disc_weights,
                            optimizer: tff.learning.optimizers.Optimizer, optimizer_state, seed, steps, batch_size):
    """GenUpdate: `steps` generator steps on noise drawn from `seed` against the fixed D. Takes no client
    data. BN runs in training mode, so its moving statistics advance; both are returned."""
    _assign(gen.trainable_variables, gen_weights.trainable)
    _assign(gen.non_trainable_variables, gen_weights.non_trainable)
    _assign(disc.trainable_variables, disc_weights)
    noise_dim = gen.input_shape[-1]
    loss_sum, count = tf.constant(0.0), tf.constant(0.0)
    for i in tf.range(steps):
        noise = _normal(tf.random.experimental.stateless_fold_in(seed, tf.cast(i, tf.int64)), batch_size, noise_dim)
        with tf.GradientTape() as tape:
            gen_loss = tfgan.losses.wargs.wasserstein_generator_loss(
                disc(gen(noise, training=True), training=True), loss_collection=None)
            loss = gen_loss + _regularization(gen)
        grads = tape.gradient(loss, gen.trainable_variables)
        optimizer_state, new_weights = optimizer.next(
            optimizer_state, [v.read_value() for v in gen.trainable_variables], grads)
        _assign(gen.trainable_variables, new_weights)
        loss_sum += gen_loss
        count += 1.0
    weights = tff.learning.models.ModelWeights([v.read_value() for v in gen.trainable_variables],
                                               [v.read_value() for v in gen.non_trainable_variables])
    mean_loss = tf.where(count > 0, loss_sum / tf.maximum(count, 1.0), float("nan"))
    return GeneratorOutput(weights, optimizer_state, mean_loss)


def initial_server_value(gen, disc, gen_opt, disc_opt, server_seed, gen_ema: float = 0.0) -> collections.OrderedDict:
    """The server state before round 1: the models' initial weights, both optimizers' states, the
    generator's noise seed (from the run secret) and the round counter; with `gen_ema` > 0 also the
    moving average of G's trainable weights (`generator_average`, starting at G's initial weights)."""
    state = collections.OrderedDict(
        generator=collections.OrderedDict(trainable=[v.read_value() for v in gen.trainable_variables],
                                          non_trainable=[v.read_value() for v in gen.non_trainable_variables]),
        discriminator=[v.read_value() for v in disc.trainable_variables],
        gen_optimizer=gen_opt.initialize(_specs(gen.trainable_variables)),
        disc_optimizer=disc_opt.initialize(_specs(disc.trainable_variables)),
        gen_seed=tf.constant(server_seed, tf.int64), round=tf.constant(0, tf.int64))
    if gen_ema:
        state["generator_average"] = [v.read_value() for v in gen.trainable_variables]
    return state


def average_decay(gen_ema: float, phases):
    """The moving average's decay at its `phases`-th update (1, 2, ...): TF's ExponentialMovingAverage
    warm-up, min(gen_ema, (1 + t) / (10 + t)), so the average follows G early instead of dragging its
    initial weights along, and settles at `gen_ema`."""
    phases = tf.cast(phases, tf.float32)
    return tf.minimum(tf.constant(gen_ema, tf.float32), (1.0 + phases) / (10.0 + phases))


def server_round_update(gen, disc, gen_opt, disc_opt, config: GANTrainingConfig, server, mean_update):
    """The server's half of a round: θ_D ← optimizer(θ_D, noised mean update); then, every k-th round,
    the G phase. No client input. Returns OrderedDict(server=next state, metrics=released values)."""
    disc_opt_state, disc_weights = disc_opt.next(server["disc_optimizer"], server["discriminator"], mean_update)
    next_seed, gen_seed = split_server_seed(server["gen_seed"])
    runs = tf.equal((server["round"] + 1) % config.disc_rounds_per_gen_update, 0)
    steps = tf.where(runs, config.gen_steps, 0)
    weights = tff.learning.models.ModelWeights(server["generator"]["trainable"], server["generator"]["non_trainable"])
    out = tf.function(server_generator_update)(gen, disc, weights, disc_weights, gen_opt, server["gen_optimizer"],
                                               gen_seed, steps, config.gen_batch_size)
    new_server = collections.OrderedDict(
        generator=collections.OrderedDict(trainable=out.weights.trainable, non_trainable=out.weights.non_trainable),
        discriminator=disc_weights, gen_optimizer=out.optimizer_state, disc_optimizer=disc_opt_state,
        gen_seed=next_seed, round=server["round"] + 1)
    if config.gen_ema:
        # After each G phase: average ← d·average + (1 − d)·G. Server-side post-processing of G, which
        # is itself post-processing of the DP discriminator: no privacy cost. Why: the last iterate of a
        # GAN wanders (a FEMNIST seed's Fréchet 66 with 12% blank samples, its average 45; docs/gan.md).
        decay = average_decay(config.gen_ema, (server["round"] + 1) // config.disc_rounds_per_gen_update)
        new_server["generator_average"] = [tf.where(runs, decay * a + (1.0 - decay) * w, a)
                                           for a, w in zip(server["generator_average"], out.weights.trainable)]
    return collections.OrderedDict(server=new_server, metrics=collections.OrderedDict(
        gen_loss=out.gen_loss, gen_steps=tf.cast(steps, tf.float32)))


def client_step_seeds(secret: RunSecret, round_num: int, client_index: int, steps: int) -> np.ndarray:
    """[steps, 2] int64 stateless seeds for the `client_index`-th sampled client of `round_num`. The
    sample is a function of (secret, round), so position identifies the client's noise stream."""
    rng = secret.rng("gan-client-steps", round_num, client_index)
    return rng.integers(0, 2**62, size=(steps, 2), dtype=np.int64)


def client_step_examples(examples, steps: int, batch_size: int, cycle: bool) -> np.ndarray:
    """The examples a client's n = `steps` D steps use, in order: its first n·B. With `cycle`, a client
    holding fewer goes through them again until n full batches: a writer with 30 images then takes 6
    steps of 32, not one short step (one pass is the paper code's `repeat=False`; FEMNIST's writers all
    hold fewer than n·B = 192, and their GANs drew blobs at one step a round; docs/gan.md).
    Still one clipped update a user, so the DP guarantee is unchanged."""
    examples = np.asarray(examples, np.float32)
    wanted = steps * batch_size
    if cycle and 0 < len(examples) < wanted:
        examples = np.resize(examples, (wanted, *examples.shape[1:]))
    return examples[:wanted]


def client_batches(client_data, batch_size: int, steps: int, cycle: bool = False) -> tf.data.Dataset:
    """A client's real batches for its `steps` D steps as a tf.data.Dataset: `client_data` is one
    already (batches of at most `batch_size`), or an array of the client's examples in the order its
    device uses them (batches of `batch_size`, the last one short). An array is what the in-process
    backend packs without a tf.data pipeline per client. `cycle`: see `client_step_examples`."""
    if isinstance(client_data, tf.data.Dataset):
        if cycle:   # the same examples in the same order as an array's (repeat() of nothing is nothing)
            client_data = client_data.unbatch().repeat().batch(batch_size)
        return client_data.take(steps)
    return tf.data.Dataset.from_tensor_slices(
        client_step_examples(client_data, steps, batch_size, cycle)).batch(batch_size)


def with_step_seeds(dataset: tf.data.Dataset, step_seeds) -> tf.data.Dataset:
    """A client's (real_batch as float32, step_seed) elements: its first len(step_seeds) batches, each
    with its stateless seed (what `client_discriminator_update` takes)."""
    real = dataset.take(len(step_seeds)).map(lambda x: tf.cast(x, tf.float32))
    return tf.data.Dataset.zip((real, tf.data.Dataset.from_tensor_slices(step_seeds)))


def split_server_seed(seed):
    """(next round's seed, this round's generator seed)."""
    seeds = tf.random.experimental.stateless_split(seed, num=2)
    return seeds[0], seeds[1]


# ---- TFF layer (the `tf` backend's counterpart: training.tf_backend.GANRounds) -------------------

GANProcessOutput = collections.namedtuple("GANProcessOutput", ["state", "metrics"])


def build_gen_optimizer(config: GANTrainingConfig) -> tff.learning.optimizers.Optimizer:
    """The server's generator optimizer: plain SGD (paper) or Adam."""
    if config.gen_optimizer == "adam":
        return tff.learning.optimizers.build_adam(config.gen_learning_rate, beta_1=config.gen_beta_1)
    return tff.learning.optimizers.build_sgdm(config.gen_learning_rate)


class GANProcess:
    """What `training.loop.train` drives: `initialize()`, `next(state, client_datasets)` and
    `get_model_weights(state)` (the generator: the private artifact the modeler samples from).

    `client_datasets` are the sampled clients' real batches (elements [b, *data_shape], b ≤ B, as many
    as they like, or none: a device that does not qualify sends a zero update; at most `disc_steps`
    are used), each a tf.data.Dataset or an array of the client's examples (`client_batches`; the tf
    backend packs arrays directly: a tf.data pipeline per client costs time every round); `next`
    attaches each step's noise seed. The state is OrderedDict(server=...,
    aggregator=...) of arrays: `run_dir.save_checkpoint` round-trips it, and it is the same on both
    backends. TFF's `iterative_process` takes the seeded (real_batch, step_seed) datasets;
    `tf_backend.GANRounds` takes the batches and the seeds apart (`next_with_seeds`).
    `next` returns metrics {"server": {gen_loss, gen_steps}}."""

    def __init__(self, iterative_process, server_update, config: GANTrainingConfig, secret: RunSecret):
        self.iterative_process, self.server_update, self.config = iterative_process, server_update, config
        self.secret = secret

    def initialize(self):
        return self.iterative_process.initialize()

    def seeded_dataset(self, dataset: tf.data.Dataset, round_num: int, client_index: int) -> tf.data.Dataset:
        return with_step_seeds(dataset, client_step_seeds(self.secret, round_num, client_index, self.config.disc_steps))

    def next(self, state, client_datasets) -> GANProcessOutput:
        round_num = int(state["server"]["round"])
        if hasattr(self.iterative_process, "next_with_seeds"):  # the tf backend: no dataset to build
            seeds = [client_step_seeds(self.secret, round_num, i, self.config.disc_steps)
                     for i in range(len(client_datasets))]
            new_state, metrics = self.iterative_process.next_with_seeds(state, client_datasets, seeds)
        else:
            batch, steps = self.config.training.client.batch_size, self.config.disc_steps
            seeded = [self.seeded_dataset(client_batches(data, batch, steps, self.config.cycle_client_data),
                                          round_num, i)
                      for i, data in enumerate(client_datasets)]
            new_state, metrics = self.iterative_process.next(state, seeded)
        return GANProcessOutput(new_state, metrics)

    def warm_start(self, fresh_state, previous_state):
        """`fresh_state` with the previous run's generator, discriminator and their optimizer states;
        the generator's noise seed, the round counter and the DP aggregator stay fresh."""
        server = collections.OrderedDict(fresh_state["server"])
        for key in ("generator", "discriminator", "gen_optimizer", "disc_optimizer"):
            server[key] = previous_state["server"][key]
        if "generator_average" in server:   # from the previous average, or its G if it kept none
            server["generator_average"] = previous_state["server"].get(
                "generator_average", previous_state["server"]["generator"]["trainable"])
        return collections.OrderedDict(fresh_state, server=server)

    def set_model_weights(self, state, weights: dict):
        """`state` with G and D from `weights` ({"generator": ModelWeights, "discriminator": [arrays]}:
        public pretraining, `experiments.public_init`), G's moving average starting at G; the optimizers,
        seeds, round counter and DP aggregator stay fresh."""
        server = collections.OrderedDict(state["server"])
        generator = weights["generator"]
        server["generator"] = collections.OrderedDict(trainable=list(generator.trainable),
                                                      non_trainable=list(generator.non_trainable))
        server["discriminator"] = list(weights["discriminator"])
        if "generator_average" in server:
            server["generator_average"] = list(generator.trainable)
        return collections.OrderedDict(state, server=server)

    def get_model_weights(self, state) -> tff.learning.models.ModelWeights:
        """The released generator: its moving average when the config keeps one (with G's current BN
        statistics), else G."""
        generator = state["server"]["generator"]
        trainable = state["server"].get("generator_average", generator["trainable"])
        return tff.learning.models.ModelWeights(list(trainable), list(generator["non_trainable"]))

    def get_discriminator_weights(self, state) -> list:
        return list(state["server"]["discriminator"])


def build_gan_process(generator_fn, discriminator_fn, config: GANTrainingConfig, secret: RunSecret,
                      backend: str | None = None) -> GANProcess:
    """`generator_fn()` / `discriminator_fn()` build fresh, seeded Keras models (e.g. `models.gan`'s
    builders with the public seed): every TFF computation builds its own copy, so they must be pure.
    `secret`: the run secret every training-time random draw comes from. `backend="tff"`: the rounds
    are TFF computations (the reference; `server_update` is the server's TFF computation); `"tf"`: the
    same functions in-process (`tf_backend.GANRounds`; `server_update` is None)."""
    disc = discriminator_fn()
    if disc.non_trainable_variables:
        raise ValueError("the discriminator must have no non-trainable variables (e.g. BatchNorm): clients "
                         f"update, clip and average all of it. Found {len(disc.non_trainable_variables)}.")
    if resolve_backend(backend) == "tf":
        from fedgen_debug.training.tf_backend import GANRounds
        return GANProcess(GANRounds(generator_fn, discriminator_fn, config, secret), None, config, secret)
    tff_workers.use_context()   # an orphan-proof local worker, or the --workers
    gen_opt, disc_opt = build_gen_optimizer(config), server_optimizer(config.training.server)
    data_spec = (tf.TensorSpec([None, *disc.input_shape[1:]], tf.float32), tf.TensorSpec([2], tf.int64))
    client_config = config.training.client
    server_seed = secret.tf_seed("gan-server")

    @tff.tensorflow.computation
    def initial_server_state():
        return initial_server_value(generator_fn(), discriminator_fn(), gen_opt, disc_opt, server_seed, config.gen_ema)

    server_type = initial_server_state.type_signature.result

    @tff.tensorflow.computation(server_type)
    def broadcast_part(server):
        return collections.OrderedDict(generator=server["generator"]["trainable"],
                                       discriminator=server["discriminator"])

    @tff.tensorflow.computation(tff.SequenceType(tff.types.tensorflow_to_type(data_spec)),
                                broadcast_part.type_signature.result)
    def client_update(dataset, weights):
        update_fn = tf.function(client_discriminator_update)
        return update_fn(discriminator_fn(), generator_fn(), dataset, weights["discriminator"], weights["generator"],
                         client_config.learning_rate, config.disc_steps, config.gradient_penalty)

    update_type = client_update.type_signature.result[0]
    aggregator = dp_aggregator(config.training.dp, secret.tf_seed("dp-noise")).create(update_type)

    @tff.tensorflow.computation(server_type, update_type)
    def server_update(server, mean_update):
        return server_round_update(generator_fn(), discriminator_fn(), gen_opt, disc_opt, config, server, mean_update)

    @tff.federated_computation
    def initialize():
        return tff.federated_zip(collections.OrderedDict(
            server=tff.federated_eval(initial_server_state, tff.SERVER), aggregator=aggregator.initialize()))

    @tff.federated_computation(initialize.type_signature.result,
                               tff.FederatedType(client_update.type_signature.parameter[0], tff.CLIENTS))
    def next_fn(state, client_data):
        weights = tff.federated_broadcast(tff.federated_map(broadcast_part, state.server))
        client_outputs = tff.federated_map(client_update, (client_data, weights))
        aggregated = aggregator.next(state.aggregator, client_outputs.update)
        server_out = tff.federated_map(server_update, (state.server, aggregated.result))
        # The clients' losses (client_outputs.metrics) are not aggregated: they never leave the devices.
        metrics = collections.OrderedDict(server=server_out.metrics, aggregator=aggregated.measurements)
        new_state = tff.federated_zip(collections.OrderedDict(server=server_out.server, aggregator=aggregated.state))
        return new_state, tff.federated_zip(metrics)

    return GANProcess(tff.templates.IterativeProcess(initialize, next_fn), server_update, config, secret)
