"""DP-FedAvg: pure-TF client and server updates, and the thin TFF layer that builds the process.

The process is `tff.learning.algorithms.build_unweighted_fed_avg` (every sampled client weighs the
same, as DP-FedAvg's fixed-qN average requires) with the DP aggregator of `dp_query` and the server
optimizer of `optimizers`. `client_update` / `server_update` are the same computation in plain TF:
tests check one against the other, and benchmarks use them as the no-TFF baseline.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug import tff_workers
from fedgen_debug.training.config import TrainingConfig, resolve_backend
from fedgen_debug.training.dp_query import dp_aggregator
from fedgen_debug.training.optimizers import server_optimizer
from fedgen_debug.training.update_canaries import UpdateCanaryPlan


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A Keras model family trained by DP-FedAvg. Batches are `(x, y)` matching `input_spec`."""

    keras_model_fn: Callable[[], tf.keras.Model]
    loss_fn: Callable[[], tf.keras.losses.Loss]
    input_spec: tuple
    metrics_fn: Callable[[], list] = list

    def tff_model_fn(self):
        def model_fn():
            return tff.learning.models.from_keras_model(
                self.keras_model_fn(), loss=self.loss_fn(), input_spec=self.input_spec, metrics=self.metrics_fn()
            )
        return model_fn


def client_dataset(dataset: tf.data.Dataset, config: TrainingConfig) -> tf.data.Dataset:
    """The on-device training pipeline: E epochs of batches of B examples."""
    return dataset.batch(config.client.batch_size).repeat(config.client.epochs)


@dataclasses.dataclass(frozen=True)
class ClientExamples:
    """What a device trains on in one round, as arrays (a tuple, one row per example), for a process to
    batch as `client_dataset` batches a dataset: E epochs of batches of B, in order. Why not the dataset:
    the tf backend's vectorized LM packs a round's clients into arrays, and reading them back out of
    tf.data was a noticeable share of a demo char-LM round (docs/performance.md); processes that take
    datasets get `dataset()`."""

    arrays: tuple

    def __len__(self) -> int:
        return len(self.arrays[0])

    def dataset(self, config: TrainingConfig) -> tf.data.Dataset:
        return client_dataset(tf.data.Dataset.from_tensor_slices(self.arrays), config)

    def batches(self, config: TrainingConfig):
        """The batches `dataset(config)` yields, as tuples of arrays."""
        batch = config.client.batch_size
        for _ in range(config.client.epochs):
            for start in range(0, len(self), batch):
                yield tuple(a[start:start + batch] for a in self.arrays)


def as_dataset(client, config: TrainingConfig) -> tf.data.Dataset:
    """A client's round data as the dataset TFF's and the client-by-client processes take."""
    return client.dataset(config) if isinstance(client, ClientExamples) else client


def round_examples(examples: tuple, max_examples: int | None, rng: np.random.Generator) -> tuple:
    """What a device trains on in one round: all its `examples` (a tuple of arrays, one row per
    example), or with `max_examples` a uniformly random subset of at most that many rows, in the order
    drawn. `rng` is the device's randomness for the round (the run secret's, keyed by round and client:
    nothing public, and a resumed run draws the same subsets). Devices with fewer rows keep all, in order."""
    count = len(examples[0])
    if max_examples is None or count <= max_examples:
        return examples
    keep = rng.choice(count, max_examples, replace=False)
    return tuple(np.asarray(a)[keep] for a in examples)


# ---- pure TF -------------------------------------------------------------------------------------

ClientOutput = collections.namedtuple("ClientOutput", ["update", "num_examples", "mean_loss"])


def unique_rows(grad: tf.IndexedSlices, scale: float) -> tf.IndexedSlices:
    """`scale · grad` with each looked-up row once, its repeats summed in the order they came (as the
    dense gradient sums them). Why: TF's CPU scatter applies 1,024 or more rows on threads under locks,
    so rows that repeat were added in a scheduling-dependent order, and the same secret trained
    different models in different processes (87 distinct results in 200 identical scatters)."""
    rows, position = tf.unique(grad.indices)
    summed = tf.math.unsorted_segment_sum(grad.values, position, tf.shape(rows)[0])
    return tf.IndexedSlices(scale * summed, rows, grad.dense_shape)


def client_update(model: tf.keras.Model, loss_fn, dataset: tf.data.Dataset, initial_weights, learning_rate: float):
    """Local SGD from `initial_weights`; returns the update `initial − final` (TFF's sign convention:
    the server treats the averaged update as a pseudo-gradient)."""
    for variable, value in zip(model.trainable_variables, initial_weights):
        variable.assign(value)
    # Tensors, not Python numbers, so the loop also runs under tf.function (AutoGraph).
    num_examples = tf.constant(0, tf.int64)
    loss_sum = tf.constant(0.0)
    batches = tf.constant(0.0)
    # Over an iterator, not the dataset: under tf.function AutoGraph turns `for x in dataset` into a
    # dataset reduction whose body is re-instantiated on every call.
    for x, y in iter(dataset):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        for variable, grad in zip(model.trainable_variables, grads):
            if isinstance(grad, tf.IndexedSlices):  # embeddings: update only the rows looked up
                variable.scatter_sub(unique_rows(grad, learning_rate))
            else:
                variable.assign_sub(learning_rate * grad)
        num_examples += tf.shape(y, out_type=tf.int64)[0]
        loss_sum += loss
        batches += 1.0
    update = [w0 - w for w0, w in zip(initial_weights, model.trainable_variables)]
    return ClientOutput(update, num_examples, loss_sum / tf.maximum(batches, 1.0))


def server_update(optimizer: tff.learning.optimizers.Optimizer, optimizer_state, weights, aggregated_update):
    """Applies the (noised) mean client update to the global weights. Returns (state, weights)."""
    return optimizer.next(optimizer_state, weights, aggregated_update)


# ---- TFF layer -----------------------------------------------------------------------------------

def no_client_metrics(metric_finalizers, local_unfinalized_metrics_type=None):
    """A metrics aggregator that aggregates nothing: TFF's default sums each client's loss, example
    and batch counts un-noised, and the per-round totals against the sample reveal each client's
    values. The devices' metrics never leave them."""
    del metric_finalizers, local_unfinalized_metrics_type

    @tff.federated_computation
    def aggregate(client_metrics):
        del client_metrics
        return tff.federated_value(collections.OrderedDict(), tff.SERVER)

    return aggregate


def build_process(model: ModelSpec, config: TrainingConfig, noise_seed, canaries: UpdateCanaryPlan | None = None,
                  backend: str | None = None):
    """`noise_seed`: two integers from the run secret (`RunSecret.tf_seed("dp-noise")`); `canaries`:
    the update canaries the DP sum adds (`update_canaries.plan`), if any. `backend="tff"`: TFF's
    LearningProcess (the reference); `"tf"`: the same algorithm in-process (`tf_backend.FedAvgProcess`)."""
    if resolve_backend(backend) == "tf":
        from fedgen_debug.training.tf_backend import FedAvgProcess
        return FedAvgProcess(model, config, noise_seed, canaries)
    tff_workers.use_context()   # an orphan-proof local worker, or the --workers
    return tff.learning.algorithms.build_unweighted_fed_avg(
        model.tff_model_fn(),
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=config.client.learning_rate),
        server_optimizer_fn=server_optimizer(config.server),
        model_aggregator=dp_aggregator(config.dp, noise_seed, canaries),
        metrics_aggregator=no_client_metrics,
    )
