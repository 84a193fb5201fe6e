"""DP-FedAvg's client updates of the LMs for a whole round at once: the `tf` backend's fast path.

A demo char-LM round is 20 clients × up to 4 SGD steps of a 2-layer CIFG-LSTM unrolled over 16 bytes:
about 15 GFLOP in small matmuls ([16, 64] × [64, 384] per time step), which `ClientWorkers`' threads ran
one client at a time (their rate, from the TF profiler: docs/performance.md). Here every op works on all
the round's clients together, which is the same algorithm (`dp_fedavg.client_update`, the reference)
computed differently:

- The model is rebuilt functionally from the Keras one, with a leading client axis on every weight
  ([C, ...]): the embedding as one gather from the clients' stacked tables, the CIFG cell's and the
  Dense layer's matmuls as batched matmuls over time-major inputs. Each client's loss depends only on
  its own weights, so the gradient of the summed loss is each client's own gradient.
- Clients with fewer batches, or a smaller last batch, are padded and masked: a missing step leaves the
  client's weights unchanged, and a padded row enters no loss. A client's loss is Keras'
  `SparseCategoricalCrossentropy` (`SUM_OVER_BATCH_SIZE`): the mean over its own rows × time steps.
- Where the reference updates an embedding's looked-up rows only (`scatter_sub`), here the gradient is
  dense: rows not looked up get exactly zero and stay as they are.

`supports(model, loss)` decides which models it computes: a Sequential of Embedding, recurrent layers
of `CIFGCell`, Dense, trained with `SparseCategoricalCrossentropy(from_logits=True)`; `worthwhile(model)`
which of those it computes faster (a small vocabulary: the char-LM). Anything else runs client by
client. Tests compare every client's update with the reference's.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedgen_debug.models.cifg import CIFGCell
from fedgen_debug.training import dp_fedavg


def _plain_rnn(layer) -> bool:
    return (isinstance(layer, tf.keras.layers.RNN) and isinstance(layer.cell, CIFGCell) and layer.return_sequences
            and not (layer.go_backwards or layer.stateful or layer.return_state or layer.zero_output_for_mask))


def supports(model: tf.keras.Model, loss: tf.keras.losses.Loss) -> bool:
    """Whether `vectorized_client_updates` computes this model's and loss's client updates."""
    if not isinstance(model, tf.keras.Sequential) or len(model.layers) < 3:
        return False
    embedding, *recurrent, dense = model.layers
    plain_loss = (isinstance(loss, tf.keras.losses.SparseCategoricalCrossentropy)
                  and loss.get_config().get("from_logits") and loss.get_config().get("ignore_class") is None
                  and loss.reduction in (tf.keras.losses.Reduction.AUTO, tf.keras.losses.Reduction.SUM_OVER_BATCH_SIZE))
    return bool(plain_loss
                and type(embedding) is tf.keras.layers.Embedding and not embedding.mask_zero
                and embedding.embeddings_regularizer is None and embedding.activity_regularizer is None
                and all(_plain_rnn(layer) for layer in recurrent)
                and type(dense) is tf.keras.layers.Dense and dense.activation is tf.keras.activations.linear
                and dense.kernel_regularizer is None and dense.bias_regularizer is None
                and dense.activity_regularizer is None)


# Vocabularies up to this size take the vectorized path (`benchmarks/lm_round.py --no-tff --demo-only
# --clients-per-round 20`; timings in docs/performance.md): the demo char-LM (258 symbols) runs about
# twice as fast; the demo word-LM (10,004 ids), whose work is its output layer's large matmuls, was
# slower (and no faster in chunks of 2, 5 or 10 clients), so it stays client by client.
MAX_VOCABULARY = 1024


def worthwhile(model: tf.keras.Model) -> bool:
    """Whether the vectorized path is faster for this (supported) model: a small output vocabulary."""
    return model.layers[-1].units <= MAX_VOCABULARY


def _cifg_forward(cell: CIFGCell, weights: dict, inputs):
    """`cell` over time on time-major inputs [T, C, B, in] → outputs [T, C, B, out]; `CIFGCell.call` per
    step with each client's weights, the input matmul of all steps at once."""
    kernel, recurrent, bias = (weights[v.ref()] for v in (cell.kernel, cell.recurrent_kernel, cell.bias))
    projection = weights[cell.projection.ref()] if cell.projection_units else None
    clients, batch = tf.shape(inputs)[1], tf.shape(inputs)[2]
    # Time-major, so each step's slice is an unstacked row (a strided slice's gradient writes a zero
    # tensor of the whole input per step: 40% of a demo step's time). Batched matmuls, not einsums
    # (oneDNN's einsum transposed its operands).
    x_kernel = tf.unstack(_matmul_over_time(inputs, kernel), axis=0)
    bias = bias[:, None, :]
    c = tf.zeros([clients, batch, cell.units])
    h = tf.zeros([clients, batch, cell.output_size])
    outputs = []
    for x_t in x_kernel:  # static length (16-20 steps): unrolled, as `StaticUnrollRNN` does
        gates = x_t + tf.matmul(h, recurrent) + bias
        i_pre, z_pre, o_pre = tf.split(gates, 3, axis=-1)
        i = tf.sigmoid(i_pre)
        c = (1.0 - i) * c + i * tf.tanh(z_pre)
        m = tf.sigmoid(o_pre) * tf.tanh(c)
        h = tf.matmul(m, projection) if projection is not None else m
        outputs.append(h)
    return tf.stack(outputs, axis=0)


def _matmul_over_time(inputs, kernel):
    """inputs [T, C, B, in] (time-major), kernel [C, in, out] → [T, C, B, out], one batched matmul."""
    time_steps, clients, batch = inputs.shape[0], tf.shape(inputs)[1], tf.shape(inputs)[2]
    rows = tf.reshape(tf.transpose(inputs, [1, 0, 2, 3]), [clients, -1, inputs.shape[3]])
    out = tf.reshape(tf.matmul(rows, kernel), [clients, time_steps, batch, kernel.shape[2]])
    return tf.transpose(out, [1, 0, 2, 3])


def lm_forward(model: tf.keras.Sequential, weights: dict, ids):
    """The model's logits per client: ids int32 [C, B, T], `weights` {variable ref: [C, *shape]} →
    [C, B, T, vocabulary]."""
    embedding, *recurrent, dense = model.layers
    table = weights[embedding.embeddings.ref()]   # [C, V, E]
    vocabulary = table.shape[1]
    # One gather from all clients' tables: client c's row r is row c·V + r.
    offsets = tf.range(tf.shape(table)[0]) * vocabulary
    time_major = tf.transpose(ids + offsets[:, None, None], [2, 0, 1])
    x = tf.gather(tf.reshape(table, [-1, table.shape[2]]), time_major)   # [T, C, B, E]
    for layer in recurrent:
        x = _cifg_forward(layer.cell, weights, x)
    logits = tf.transpose(_matmul_over_time(x, weights[dense.kernel.ref()]), [1, 2, 0, 3])
    if dense.use_bias:
        logits += weights[dense.bias.ref()][:, None, None, :]
    return logits


def vectorized_client_updates(model: tf.keras.Sequential, x, y, row_mask, initial_weights, learning_rate: float):
    """All clients' updates θ⁰ − θ after local SGD on their batches. x, y int32 [C, S, B, T]; row_mask
    [C, S, B] (1 = a real example); a step whose mask row is all zero is not taken. Returns a list like
    `initial_weights` (the model's trainable weights), each [C, *shape]; a client's update with any
    non-finite entry is all zeros, as TFF's client work sends it."""
    clients, steps, time_steps = tf.shape(x)[0], tf.shape(x)[1], x.shape[3]
    refs = [v.ref() for v in model.trainable_variables]
    initial = [tf.tile(w[None], tf.concat([[clients], tf.ones([len(w.shape)], tf.int32)], 0)) for w in initial_weights]

    def step(s, current):
        mask = tf.gather(row_mask, s, axis=1)   # [C, B]
        rows = tf.reduce_sum(mask, axis=1)
        taken = tf.cast(rows > 0, tf.float32)
        with tf.GradientTape() as tape:
            tape.watch(current)
            logits = lm_forward(model, dict(zip(refs, current)), tf.gather(x, s, axis=1))
            token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.gather(y, s, axis=1), logits=logits)
            # Keras' SUM_OVER_BATCH_SIZE: each client's sum over its rows and time steps, divided by their number.
            per_client = tf.reduce_sum(token_loss * mask[:, :, None], axis=[1, 2]) / tf.maximum(rows * time_steps, 1.0)
            loss = tf.reduce_sum(taken * per_client)
        grads = tape.gradient(loss, current)
        return s + 1, [w - learning_rate * tf.reshape(taken, [-1] + [1] * (len(w.shape) - 1)) * tf.convert_to_tensor(g)
                       for w, g in zip(current, grads)]

    _, final = tf.while_loop(lambda s, _: s < steps, step, (tf.constant(0), initial))
    updates = [w0 - w for w0, w in zip(initial, final)]
    # TFF's `zero_all_if_any_non_finite` (the threaded path's), for all clients at once: as a `tf.map_fn`
    # of it over the clients, a demo char-LM round was slower.
    finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(tf.reshape(u, [clients, -1])), axis=1)
                                     for u in updates]), axis=0)
    return [tf.where(tf.reshape(finite, [-1] + [1] * (len(u.shape) - 1)), u, tf.zeros_like(u)) for u in updates]


def pack_clients(clients, config, time_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y [C, S, B, T], row_mask [C, S, B]) from the round's clients (`dp_fedavg.ClientExamples`,
    batched here as the `config`'s client work batches them, or tf.data datasets of (x, y) batches, as
    `dp_fedavg.client_dataset` builds them), S the most batches any client has. Missing steps and rows
    are zeros with mask 0."""
    batch = config.client.batch_size
    per_client = [list(c.batches(config)) if isinstance(c, dp_fedavg.ClientExamples) else list(c.as_numpy_iterator())
                  for c in clients]
    steps = max([len(batches) for batches in per_client], default=0)
    x = np.zeros((len(clients), steps, batch, time_steps), np.int32)
    y = np.zeros_like(x)
    mask = np.zeros((len(clients), steps, batch), np.float32)
    for i, batches in enumerate(per_client):
        for s, (bx, by) in enumerate(batches):
            rows = bx.shape[0]
            if rows > batch:
                raise ValueError(f"a client batch holds {rows} examples, more than the batch size {batch}.")
            x[i, s, :rows], y[i, s, :rows], mask[i, s, :rows] = bx, by, 1.0
    return x, y, mask
