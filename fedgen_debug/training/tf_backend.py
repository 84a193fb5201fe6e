"""The `tf` backend: DP-FedAvg and DP-FedAvg-GAN rounds run in-process by TensorFlow, no TFF runtime.

The same algorithm as the TFF processes (`dp_fedavg.build_process`, `dp_fedavg_gan.build_gan_process`,
the reference), built from the same pieces: tf-privacy's query from `dp_query` with its noise seed from
the run secret, the server optimizers and server functions, and for clients:
- DP-FedAvg: the char-LM's clients all in one traced call (`vectorized_lm`: the same math as the
  pure-TF `dp_fedavg.client_update`, with a client axis); other models run `client_update` on one
  thread per core (`ClientWorkers`: each thread has its own model copy and traced function; updates
  are summed in client order);
- the GAN: all of a round's clients in one traced call (`vectorized_gan`: the same math as
  `dp_fedavg_gan.client_discriminator_update`, with a client axis), or that function client by
  client on threads for models `vectorized_gan` cannot rebuild.
TF places the work on a GPU when it sees one; nothing pays for TFF's C++ runtime (measured on 2 CPU
cores: docs/performance.md).

The state has exactly the TFF process's structure and leaf types (NumPy arrays, the DP event's names as
bytes): a checkpoint written by one backend resumes on the other, the run store does not say which ran,
and `loop.train` drives both. Tests run the same rounds with the same secrets on both and compare every
state leaf (tests/test_tf_backend.py).

`DPSum` is TFF's `DifferentiallyPrivateFactory` round in plain TF, query call for query call:
derive_sample_params → preprocess_record per client → sum → get_noised_result, the event converted
as TFF converts it.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

# TFF's own pieces where the tf backend must behave exactly as TFF's processes do.
from tensorflow_federated.python.aggregators.differential_privacy import DPAggregatorState
from tensorflow_federated.python.learning import tensor_utils

from fedgen_debug.training import dp_fedavg, dp_fedavg_gan, vectorized_gan, vectorized_lm
from fedgen_debug.training.dp_query import dp_query
from fedgen_debug.training.optimizers import server_optimizer


def _leaf(value):
    if tf.is_tensor(value):
        return value.numpy()
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int32(value)
    if isinstance(value, float):
        return np.float32(value)
    return value


def as_numpy(structure):
    """Leaves as TFF's execution context returns them: tensors as NumPy arrays, Python numbers as
    float32/int32/bool NumPy scalars."""
    return tf.nest.map_structure(_leaf, structure)


def _event_state(event):
    """The DpEvent as TFF's aggregator keeps it: `to_named_tuple()` with strings as bytes and floats as
    float32, except in a composed event's list of events, where TFF keeps them float64."""
    def convert(value, in_list=False):
        if hasattr(value, "_fields"):
            return type(value)(*[convert(v, in_list) for v in value])
        if isinstance(value, list):
            return [convert(v, True) for v in value]
        if isinstance(value, str):
            return value.encode()
        return np.float64(value) if in_list and isinstance(value, float) else as_numpy(value)

    return convert(event.to_named_tuple())


class DPSum:
    """One DP aggregation round of `query` over client updates shaped like `specs` (a list of TensorSpec)."""

    def __init__(self, query, specs):
        self._query, self._specs = query, list(specs)
        self._accumulate = tf.function(self._accumulate_impl)
        # Traced for any number of stacked clients: a round's count of clients with data varies (T4 under
        # strict selection), and a trace per count cost ~1 s each (28.7 s for counts 1-30).
        self._sum_stacked = tf.function(self._sum_stacked_impl, autograph=False, reduce_retracing=True)
        self._noised = tf.function(self._query.get_noised_result)

    def initialize(self) -> DPAggregatorState:
        global_state = as_numpy(self._query.initial_global_state())
        sample = self._query.initial_sample_state(self._specs)
        _, _, event = self._query.get_noised_result(sample, self._query.initial_global_state())
        return DPAggregatorState(global_state, (), _event_state(event), np.bool_(True))

    def _accumulate_impl(self, params, sample_state, update):
        return tf.nest.map_structure(tf.add, sample_state, self._query.preprocess_record(params, update))

    def _sum_stacked_impl(self, params, total, stacked):
        # The clients of a stack one after another, in order (tf.vectorized_map would fall back to a
        # while_loop for clip_by_global_norm's L2Loss, which pfor cannot convert).
        def add_client(i, total):
            return i + 1, self._accumulate_impl(params, total, [u[i] for u in stacked])

        _, total = tf.while_loop(lambda i, _: i < tf.shape(stacked[0])[0], add_client, (tf.constant(0), total))
        return total

    def next(self, state: DPAggregatorState, updates=None, stacks=None) -> tuple[list, DPAggregatorState]:
        """(noised result, next state) for this round's client `updates` (each a list like `specs`), or
        for `stacks` of them (each a list like `specs` of [clients, *shape] arrays; the round's clients
        in chunks, so the summed arrays do not grow with the cohort): every client's record is preprocessed
        (clipped) by the query on its own, then the records are summed in client order."""
        query_state = tf.nest.map_structure(tf.convert_to_tensor, state.query_state)
        params = self._query.derive_sample_params(query_state)
        total = self._query.initial_sample_state(self._specs)  # zeros (and an adaptive clip's count)
        if stacks is not None:
            for stacked in stacks:
                total = self._sum_stacked(params, total, list(stacked))
        else:
            for update in updates:
                total = self._accumulate(params, total, list(update))
        result, new_query_state, event = self._noised(total, query_state)
        return list(result), DPAggregatorState(as_numpy(new_query_state), (), _event_state(event), np.bool_(False))


CLIENT_THREADS_ENV = "FEDGEN_DEBUG_CLIENT_THREADS"
CLIENT_CHUNK = 64   # clients vectorized at once (a multiple of 8; the demo's qN = 50 GAN, 20 LM clients: one chunk)


def client_threads() -> int:
    """Clients trained at once: `$FEDGEN_DEBUG_CLIENT_THREADS`, else one per core, at most 4. A demo round
    is launch-bound (thousands of small ops per client, not large kernels), so one client keeps about
    one core busy dispatching."""
    value = os.environ.get(CLIENT_THREADS_ENV)
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{CLIENT_THREADS_ENV} must be an integer >= 1. Found {value!r}.")
        return int(value)
    return max(1, min(4, os.cpu_count() or 1))


class ClientWorkers:
    """Runs client updates on `count` threads, each with its own models and traced function
    (`make_update_fn()` builds one; a client assigns the broadcast weights to its worker's variables).
    Results come back in client order, so the DP sum adds them in the same order on any thread count.

    Until every worker's function has run once (traced), calls run one at a time: TF 2.14 crashes the
    process (a segfault in `tf_stack.extract_stack`) when one thread traces a function while another
    runs one, seen once in `make test` on a T6 auxiliary's first round."""

    def __init__(self, make_update_fn, count: int | None = None):
        count = count or client_threads()
        self._free = queue.SimpleQueue()
        for _ in range(count):
            self._free.put(make_update_fn())
        self._pool = ThreadPoolExecutor(count, thread_name_prefix="fedgen-client") if count > 1 else None
        self._count, self._traced = count, set()   # ids of the functions that have run (traced)
        self._tracing = threading.Lock()

    def _run(self, args):
        update_fn = self._free.get()
        try:
            if len(self._traced) == self._count:   # only ever grows to count: afterwards nothing traces
                return update_fn(*args)
            with self._tracing:
                result = update_fn(*args)
                self._traced.add(id(update_fn))
                return result
        finally:
            self._free.put(update_fn)

    def map(self, args_per_client):
        if self._pool is None:
            return map(self._run, args_per_client)
        return self._pool.map(self._run, args_per_client)


# A vectorized chunk computes every client for as many steps as its longest one (and up to 7 clients
# without a batch, `rows_to_compute`). A vectorized client step costs about half of one on the threads,
# so beyond twice the steps its clients really take the chunk runs client by client: devices of very
# different sizes without a per-round cap (the demo char-LM's clients uncapped, up to 25 batches, were
# slower vectorized than one by one; timings in docs/performance.md). The demo's capped rounds pad
# about 1.1×.
MAX_PADDING = 2.0


class FedAvgProcess:
    """`tff.learning.algorithms.build_unweighted_fed_avg` with the project's DP aggregator, in-process:
    `initialize`, `next(state, client_datasets)`, `get_model_weights`, `set_model_weights`."""

    def __init__(self, model: dp_fedavg.ModelSpec, config, noise_seed, canaries=None):
        self._model_fn, self._config = model.keras_model_fn, config
        self._input_shape = model.input_spec[0].shape
        lr = config.client.learning_rate

        def make_update_fn():
            keras, loss = model.keras_model_fn(), model.loss_fn()
            keras.build(self._input_shape)
            # TFF's client work: an update with any non-finite entry is sent as zeros.
            return tf.function(lambda ds, w: tensor_utils.zero_all_if_any_non_finite(
                dp_fedavg.client_update(keras, loss, ds, w, lr).update)[0])

        fresh = model.keras_model_fn()
        fresh.build(self._input_shape)
        self._specs = [tf.TensorSpec(v.shape, v.dtype) for v in fresh.trainable_variables]
        self._make_update_fn = make_update_fn
        # All clients of a round in one traced call when the model allows it (`vectorized_lm`), traced
        # once per run: the client, step and batch axes are unknown, the time axis is the data's.
        self._vectorized = self._clients = None
        time_steps = self._input_shape[1] if len(self._input_shape) == 2 else None
        if (time_steps is not None and vectorized_lm.supports(fresh, model.loss_fn())
                and vectorized_lm.worthwhile(fresh)):
            ids = tf.TensorSpec([None, None, None, time_steps], tf.int32)
            self._vectorized = tf.function(
                lambda x, y, mask, weights: vectorized_lm.vectorized_client_updates(fresh, x, y, mask, weights, lr),
                input_signature=[ids, ids, tf.TensorSpec([None, None, None], tf.float32), self._specs],
                autograph=False)
        else:
            self._clients = ClientWorkers(make_update_fn)
        self._dp = DPSum(dp_query(config.dp, noise_seed, canaries), self._specs)
        self._optimizer = server_optimizer(config.server)

    @property
    def vectorized(self) -> bool:
        """Whether a round's clients run in one vectorized call (`vectorized_lm`), not client by client."""
        return self._vectorized is not None

    def _vectorized_chunks(self, client_datasets, trainable):
        """The clients' updates, `CLIENT_CHUNK` clients at a time: packed, then one vectorized call over
        those with a batch (a client without one sends exactly zero, which adds nothing to the DP sum).
        A chunk that padding would make more than `MAX_PADDING` times its real work runs client by client
        on threads instead (the same updates, stacked)."""
        for start in range(0, len(client_datasets), CLIENT_CHUNK):
            chunk = client_datasets[start:start + CLIENT_CHUNK]
            x, y, mask = vectorized_lm.pack_clients(chunk, self._config, self._input_shape[1])
            if not mask.any():
                continue
            rows = vectorized_gan.rows_to_compute(mask)
            steps_taken = int(mask.any(axis=2).sum())
            if len(rows) * mask.shape[1] > MAX_PADDING * steps_taken:
                self._clients = self._clients or ClientWorkers(self._make_update_fn)
                updates = self._clients.map((dp_fedavg.as_dataset(c, self._config), trainable) for c in chunk)
                yield [tf.stack(leaves) for leaves in zip(*updates)]
            else:
                yield self._vectorized(x[rows], y[rows], mask[rows], trainable)

    def initialize(self):
        fresh = self._model_fn()
        fresh.build(self._input_shape)
        weights = tff.learning.models.ModelWeights([v.numpy() for v in fresh.trainable_variables],
                                                   [v.numpy() for v in fresh.non_trainable_variables])
        return tff.learning.templates.LearningAlgorithmState(
            global_model_weights=weights, distributor=(),
            client_work=collections.OrderedDict(learning_rate=np.float32(self._config.client.learning_rate)),
            aggregator=self._dp.initialize(), finalizer=as_numpy(self._optimizer.initialize(self._specs)))

    def next(self, state, client_datasets):
        weights = state.global_model_weights
        trainable = [tf.convert_to_tensor(w) for w in weights.trainable]
        if self._vectorized is not None:
            stacks = self._vectorized_chunks(client_datasets, trainable)
            mean_update, aggregator = self._dp.next(state.aggregator, stacks=stacks)
        else:
            updates = self._clients.map((dp_fedavg.as_dataset(c, self._config), trainable) for c in client_datasets)
            mean_update, aggregator = self._dp.next(state.aggregator, updates)
        # TFF's finalizer: a non-finite aggregate is rejected and the weights stay.
        non_finite = bool(tensor_utils.zero_all_if_any_non_finite(mean_update)[1])
        finalizer = state.finalizer
        if not non_finite:
            finalizer, trainable = self._optimizer.next(state.finalizer, trainable, mean_update)
        new_state = state._replace(
            global_model_weights=tff.learning.models.ModelWeights(as_numpy(list(trainable)), weights.non_trainable),
            aggregator=aggregator, finalizer=as_numpy(finalizer))
        metrics = collections.OrderedDict(finalizer=collections.OrderedDict(update_non_finite=np.int32(non_finite)))
        return tff.learning.templates.LearningProcessOutput(new_state, metrics)

    def get_model_weights(self, state):
        return state.global_model_weights

    def set_model_weights(self, state, weights):
        return state._replace(global_model_weights=tff.learning.models.ModelWeights(
            as_numpy(list(weights.trainable)), as_numpy(list(weights.non_trainable))))


class GANRounds:
    """What `dp_fedavg_gan.GANProcess` drives as its `iterative_process`, in-process: `initialize()` and
    `next_with_seeds(state, client_datasets, step_seeds) -> (state, metrics)` (TFF's `next` takes the
    seeded datasets instead); state OrderedDict(server, aggregator), as TFF's."""

    def __init__(self, generator_fn, discriminator_fn, config, secret):
        self._model_fns = generator_fn, discriminator_fn
        self._gen, self._disc = generator_fn(), discriminator_fn()
        self._config = config
        self._gen_opt = dp_fedavg_gan.build_gen_optimizer(config)
        self._disc_opt = server_optimizer(config.training.server)
        self._server_seed = secret.tf_seed("gan-server")
        client = config.training.client

        def make_update_fn():
            gen, disc = generator_fn(), discriminator_fn()
            return tf.function(lambda ds, dw, gw: dp_fedavg_gan.client_discriminator_update(
                disc, gen, ds, dw, gw, client.learning_rate, config.disc_steps, config.gradient_penalty).update)

        # All clients of a round in one traced call when the models allow it (`vectorized_gan`). Its
        # loops are graph ops already, as is the server's schedule (whose G steps are a function of their
        # own, converted): without AutoGraph's conversion of every function they call, a GAN run's
        # traces are shorter (timings: docs/performance.md).
        self._vectorized = self._clients = None
        specs = [tf.TensorSpec(v.shape, v.dtype) for v in self._disc.trainable_variables]
        # One trace a run: the client axis is left unknown (None), so a round computes exactly the clients
        # that selected something, where a static axis traced once per padded client count (seconds
        # each) and computed up to 7 padding clients a round.
        if vectorized_gan.supports(self._gen, self._disc) and vectorized_gan.runs_here(self._disc):
            steps, batch = config.disc_steps, client.batch_size
            image = self._disc.input_shape[1:]
            signature = (tf.TensorSpec([None, steps, batch, *image], tf.float32),
                         tf.TensorSpec([None, steps, batch], tf.float32), tf.TensorSpec([None, steps, 2], tf.int64),
                         specs, [tf.TensorSpec(v.shape, v.dtype) for v in self._gen.trainable_variables])
            self._vectorized = tf.function(lambda real, mask, seeds, dw, gw: vectorized_gan.vectorized_client_updates(
                self._gen, self._disc, real, mask, seeds, dw, gw, client.learning_rate, config.gradient_penalty),
                input_signature=signature, autograph=False)
        else:
            self._clients = ClientWorkers(make_update_fn)
        self._dp = DPSum(dp_query(config.training.dp, secret.tf_seed("dp-noise")), specs)
        self._server = tf.function(lambda server, mean: dp_fedavg_gan.server_round_update(
            self._gen, self._disc, self._gen_opt, self._disc_opt, config, server, mean), autograph=False)

    def initialize(self):
        gen, disc = (fn() for fn in self._model_fns)  # fresh, as TFF's initialize builds them
        server = dp_fedavg_gan.initial_server_value(gen, disc, self._gen_opt, self._disc_opt, self._server_seed,
                                                    self._config.gen_ema)
        return collections.OrderedDict(server=as_numpy(server), aggregator=self._dp.initialize())

    def _vectorized_chunks(self, client_datasets, step_seeds, disc_weights, gen_weights):
        """The clients' updates, `CLIENT_CHUNK` clients at a time (packed, then one vectorized call over
        those that selected something): given a lazily built cohort (`loop.SampledClients`), only one
        chunk's datasets and batches are held, whatever the cohort."""
        for start in range(0, len(client_datasets), CLIENT_CHUNK):
            chunk = slice(start, start + CLIENT_CHUNK)
            real, mask, seeds = vectorized_gan.pack_clients(client_datasets[chunk], self._config.disc_steps,
                                                            self._config.training.client.batch_size,
                                                            step_seeds[chunk], self._disc.input_shape[1:],
                                                            cycle=self._config.cycle_client_data)
            if not mask.any():   # nobody in the chunk selected anything: they all send exactly zero
                continue
            rows = vectorized_gan.rows_to_compute(mask, multiple=1)
            yield self._vectorized(real[rows], mask[rows], seeds[rows], list(disc_weights), list(gen_weights))

    def next_with_seeds(self, state, client_datasets, step_seeds):
        """A round on the clients' real batches and each client's [n, 2] step seeds."""
        server = tf.nest.map_structure(tf.convert_to_tensor, state["server"])
        disc_weights, gen_weights = server["discriminator"], server["generator"]["trainable"]
        if self._vectorized is not None:
            stacks = self._vectorized_chunks(client_datasets, list(step_seeds), disc_weights, gen_weights)
            mean_update, aggregator = self._dp.next(state["aggregator"], stacks=stacks)
        else:
            batch, steps, cycle = (self._config.training.client.batch_size, self._config.disc_steps,
                                   self._config.cycle_client_data)
            updates = self._clients.map(
                (dp_fedavg_gan.with_step_seeds(dp_fedavg_gan.client_batches(data, batch, steps, cycle), seeds),
                 disc_weights, gen_weights) for data, seeds in zip(client_datasets, step_seeds))
            mean_update, aggregator = self._dp.next(state["aggregator"], updates)
        out = as_numpy(self._server(server, mean_update))
        new_state = collections.OrderedDict(server=out["server"], aggregator=aggregator)
        return new_state, collections.OrderedDict(server=out["metrics"])
