"""Canary extraction tests: random-sampling rank (RS) and beam search (BS).

Thakkar et al. 2021 (Sec. 3) and Ramaswamy et al. 2020 (Sec. IV-A) insert canaries c = (p | s) into
the training data, a prefix p (bos and two words) and a random suffix s (three words, or letters
for a char-LM), and ask whether the trained LM gives s away when shown p:

- RS (after Carlini et al. 2019): rank s among R suffixes of its length whose symbols are drawn
  uniformly from the alphabet, by log P(· | p). rank = 1 + #{r ∈ R : log P(r | p) ≥ log P(s | p)}:
  a reference that ties with the canary counts against it, so rank 1 means the model prefers the
  canary to every reference ("memorized"). The papers use |R| = 2×10⁶.
- BS: a greedy beam search of width 5 from p over the alphabet; s is extracted if it is among the
  final continuations. Unlike RS it needs no guess of s.

RS scores 2×10⁶ suffixes, so the LM is stepped cell by cell from shared states instead of being
run on every prefix + suffix: the prefix runs once, each distinct beginning of the suffixes runs
once while they are few (a trie: the 10K first words; the first three of random letters), and only
the remaining steps run per suffix, in batches of one traced tf.function. A 3-word suffix then costs
one cell step and one output layer, not six; a 4-letter suffix costs a dot product.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref

import numpy as np
import tensorflow as tf

from fedgen_debug.progress import progress

_log = logging.getLogger(__name__)

# Suffixes per traced call: the output layer's logits are batch × vocabulary floats (8K rows of the
# 10K-word LM: 330 MB). 2K to 16K rows ran equally fast in benchmarks/rs_rank.py, 64K slower.
SCORING_BATCH = 8192
# Most distinct suffix beginnings whose states are kept (`_trie_table`): 64K rows of the paper
# char-LM's states and outputs are 330 MB. Enough for the 10K first words of word suffixes and the
# 17,576 three-letter beginnings of letter suffixes.
TABLE_ROWS = 65_536


@dataclasses.dataclass(frozen=True)
class RankResult:
    """The canary's RS rank among `num_references` suffixes (1 = above all of them). Of the references'
    log-probs only the first `len(reference_sample)` are kept when asked for: the references are random,
    so they are a random sample, enough for a skew-normal fit (`exposure.exposure_extrapolation`)."""

    rank: int
    num_references: int
    canary_log_prob: float
    reference_sample: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0), repr=False, compare=False)


class _SteppedLM:
    """The layers of an Embedding → RNN(cell)… → Dense(logits) Sequential (`models.lm.build_lm`),
    applied one symbol at a time from explicit RNN states. Its tf.functions have fixed signatures
    (any batch size), so each traces once per model; get one with `_stepped`."""

    def __init__(self, model: tf.keras.Model):
        layers = list(model.layers)
        if (len(layers) < 3 or not isinstance(layers[0], tf.keras.layers.Embedding)
                or not all(isinstance(layer, tf.keras.layers.RNN) for layer in layers[1:-1])
                or not isinstance(layers[-1], tf.keras.layers.Dense)):
            raise ValueError("model must be a Sequential of Embedding, RNN layers and a Dense output layer. "
                             f"Found {[type(layer).__name__ for layer in layers]}.")
        if layers[-1].activation is not tf.keras.activations.linear or layers[0].mask_zero:
            raise ValueError("model's Dense layer must output logits (no activation) and its Embedding must "
                             "not mask (mask_zero=False).")
        if any(layer.go_backwards or layer.stateful or not layer.return_sequences for layer in layers[1:-1]):
            raise ValueError("model's RNN layers must run forwards from a zero state and return sequences "
                             "(go_backwards=False, stateful=False, return_sequences=True).")
        if not all(layer.built for layer in layers):
            model(tf.zeros([1, 1], tf.int32))  # creates the weights the cells are stepped with
        self.embedding, self.cells, self.dense = layers[0], [layer.cell for layer in layers[1:-1]], layers[-1]
        self.vocab_size = int(self.embedding.input_dim)
        self._state_sizes = [[int(s) for s in tf.nest.flatten(cell.state_size)] for cell in self.cells]
        self._state_specs = [[tf.TensorSpec([None, s], tf.float32) for s in sizes] for sizes in self._state_sizes]
        self._out_spec = tf.TensorSpec([None, self.dense.kernel.shape[0]], tf.float32)
        self.step = tf.function(self.advance, input_signature=[tf.TensorSpec([None], tf.int32), self._state_specs],
                                autograph=False)
        self._scorers = {}

    def advance(self, ids, states):
        """Feeds `ids` [batch] to states [layer][state] → (top layer's output, new states). `step` is
        this traced; code that is itself traced calls `advance`."""
        x = self.embedding(ids)
        new_states = []
        for cell, state in zip(self.cells, states):
            x, state = cell(x, state)
            new_states.append(tf.nest.flatten(state))
        return x, new_states

    def run_prefix(self, prefix: np.ndarray):
        """(states, top layer's output) after `prefix`, batch 1."""
        states = [[tf.zeros([1, s]) for s in sizes] for sizes in self._state_sizes]  # Keras RNN's start
        for symbol in prefix:
            out, states = self.step(tf.constant([symbol], tf.int32), states)
        return states, out

    def logsumexp(self, out):
        return tf.reduce_logsumexp(self.dense(out), -1)

    def log_prob_from(self, out, logsumexp, ids):
        """log softmax(dense(out))[ids] per row, given the logits' log-sum-exp: one logit, a dot product."""
        weights = tf.transpose(tf.gather(self.dense.kernel, ids, axis=1))
        bias = tf.gather(self.dense.bias, ids) if self.dense.use_bias else 0.0
        return tf.reduce_sum(out * weights, -1) + bias - logsumexp

    def scorer(self, length: int, depth: int):
        """score(suffixes [batch, length], rows of their first `depth` symbols in `table`, table) →
        log-probs [batch], traced once per (length, depth). `table` is `_trie_table`'s."""
        if (length, depth) not in self._scorers:
            table_spec = (tf.TensorSpec([None]), self._out_spec, self._state_specs, tf.TensorSpec([None]))
            signature = [tf.TensorSpec([None, length], tf.int32), tf.TensorSpec([None], tf.int32), table_spec]
            self._scorers[length, depth] = tf.function(lambda *args: self._score(length, depth, *args),
                                                       input_signature=signature, autograph=False)
        return self._scorers[length, depth]

    def _score(self, length, depth, suffixes, rows, table):
        log_prob, out, states, logsumexp = tf.nest.map_structure(lambda t: tf.gather(t, rows), table)
        total = log_prob + self.log_prob_from(out, logsumexp, suffixes[:, depth])
        for t in range(depth + 1, length):  # the symbols after the table's depth: stepped per suffix
            out, states = self.advance(suffixes[:, t - 1], states)
            logits = self.dense(out)
            total += tf.gather(logits, suffixes[:, t], batch_dims=1) - tf.reduce_logsumexp(logits, -1)
        return total


# One _SteppedLM per model, so that testing many canaries traces its functions once. Weak keys: the
# entry goes with the model.
_STEPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _stepped(model: tf.keras.Model) -> _SteppedLM:
    if not isinstance(model, tf.keras.Model):
        raise ValueError(f"model must be a Keras model. Found {type(model).__name__}.")
    if model not in _STEPPED:
        _STEPPED[model] = _SteppedLM(model)
    return _STEPPED[model]


def suffix_log_probs(model: tf.keras.Model, prefix, suffixes, batch_size: int = SCORING_BATCH) -> np.ndarray:
    """log P(suffix | prefix) = Σ_t log softmax(logits)[suffix_t] for each row of `suffixes` [n, L]."""
    lm = _stepped(model)
    return _suffix_log_probs(lm, _check_ids("prefix", prefix, lm.vocab_size, 1),
                             _check_ids("suffixes", suffixes, lm.vocab_size, 2), batch_size)


def _suffix_log_probs(lm: _SteppedLM, prefix: np.ndarray, suffixes: np.ndarray, batch_size: int) -> np.ndarray:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1. Found {batch_size}.")
    if not len(suffixes):
        return np.zeros(0)
    depth, rows, table = _trie_table(lm, prefix, suffixes, batch_size)
    score = lm.scorer(suffixes.shape[1], depth)
    result = np.empty(len(suffixes), np.float64)
    for start in progress(range(0, len(suffixes), batch_size), desc="scoring suffixes", unit="batch"):
        stop = start + batch_size
        result[start:stop] = score(suffixes[start:stop], rows[start:stop].astype(np.int32), table).numpy()
    return result


def _trie_table(lm: _SteppedLM, prefix: np.ndarray, suffixes: np.ndarray, batch_size: int):
    """The work the suffixes share, done once: the prefix, then depth by depth the distinct beginnings
    of the suffixes (first symbol, first two…) while a depth has at most TABLE_ROWS of them, each run
    from its parent's states. Stops before the last symbol. Returns (depth, each suffix's row, table):
    per row log P(beginning | prefix), the top layer's output, the states, the logits' log-sum-exp."""
    states, out = lm.run_prefix(prefix)
    table = (tf.zeros([1]), out, states, lm.logsumexp(out))  # depth 0: the prefix alone
    rows = np.zeros(len(suffixes), np.int64)
    for depth in range(1, suffixes.shape[1]):
        # A beginning is its parent's row and its last symbol.
        keys, deeper_rows = np.unique(rows * lm.vocab_size + suffixes[:, depth - 1], return_inverse=True)
        if len(keys) > TABLE_ROWS:
            return depth - 1, rows, table
        table = _children(lm, table, keys // lm.vocab_size, keys % lm.vocab_size, batch_size)
        rows = deeper_rows.ravel()
    return suffixes.shape[1] - 1, rows, table


def _children(lm: _SteppedLM, table, parents: np.ndarray, symbols: np.ndarray, batch_size: int):
    """The table rows of the beginnings at rows `parents` followed by `symbols`."""
    parts = []
    for start in range(0, len(parents), batch_size):
        parent, symbol = parents[start: start + batch_size], tf.constant(symbols[start: start + batch_size], tf.int32)
        log_prob, out, states, logsumexp = tf.nest.map_structure(lambda t: tf.gather(t, parent), table)
        child_out, child_states = lm.step(symbol, states)
        parts.append((log_prob + lm.log_prob_from(out, logsumexp, symbol), child_out, child_states,
                      lm.logsumexp(child_out)))
    return tf.nest.map_structure(lambda *pieces: tf.concat(pieces, 0), *parts)


def rank_among(model: tf.keras.Model, prefix, canary_suffix, reference_suffixes) -> RankResult:
    """The RS rank of `canary_suffix` among the given `reference_suffixes` [n, len(canary_suffix)]."""
    lm = _stepped(model)
    canary = _check_ids("canary_suffix", canary_suffix, lm.vocab_size, 1)
    references = _check_ids("reference_suffixes", reference_suffixes, lm.vocab_size, 2)
    if not len(references):
        raise ValueError("reference_suffixes must have at least one row. Found 0.")
    if references.shape[1] != len(canary):
        raise ValueError(f"reference_suffixes must have the canary's length {len(canary)}. "
                         f"Found {references.shape[1]}.")
    return _rank_among(lm, _check_ids("prefix", prefix, lm.vocab_size, 1), canary, references)


def _rank_among(lm: _SteppedLM, prefix: np.ndarray, canary: np.ndarray, references: np.ndarray,
                keep: int = 0) -> RankResult:
    # Scored in one pass, so the canary and the references share the prefix state and its table.
    scores = _suffix_log_probs(lm, prefix, np.concatenate([canary[None], references]), SCORING_BATCH)
    # A copy of the canary ties with it whatever the float rounding: it counts against the canary.
    against = (scores[1:] >= scores[0]) | np.all(references == canary, axis=1)
    return RankResult(1 + int(np.count_nonzero(against)), len(references), float(scores[0]),
                      scores[1: 1 + keep].copy())


def random_sampling_rank(model: tf.keras.Model, prefix, canary_suffix, alphabet, num_references: int,
                         rng: np.random.Generator, keep_reference_sample: int = 0) -> RankResult:
    """The RS rank of `canary_suffix` among `num_references` suffixes of its length, each symbol drawn
    uniformly from `alphabet` with `rng` (references equal to the canary may occur and count against it).
    `keep_reference_sample`: how many reference log-probs to return with the rank (`RankResult`)."""
    lm = _stepped(model)
    prefix = _check_ids("prefix", prefix, lm.vocab_size, 1)
    alphabet = _check_alphabet(alphabet, lm.vocab_size)
    canary = _check_in_alphabet("canary_suffix", canary_suffix, alphabet, lm.vocab_size)
    if num_references < 1:
        raise ValueError(f"num_references must be >= 1. Found {num_references}.")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator. Found {type(rng).__name__}.")
    references = alphabet[rng.integers(len(alphabet), size=(num_references, len(canary)))]
    _log.debug("Scoring %d random suffixes of length %d.", num_references, len(canary))
    return _rank_among(lm, prefix, canary, references, keep_reference_sample)


def beam_search(model: tf.keras.Model, prefix, length: int, alphabet,
                width: int = 5) -> list[tuple[tuple[int, ...], float]]:
    """The `width` most likely continuations of `length` symbols from `alphabet` found by a greedy beam
    search, best first, with their log-probs (log-softmax over the whole vocabulary, not renormalized
    to the alphabet). Ties go to the lexicographically smaller id sequence. Exact when
    width ≥ |alphabet|^(length − 1): every partial sequence then stays in the beam."""
    lm = _stepped(model)
    prefix = _check_ids("prefix", prefix, lm.vocab_size, 1)
    alphabet = _check_alphabet(alphabet, lm.vocab_size)
    for name, value in (("length", length), ("width", width)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1. Found {value}.")
    states, out = lm.run_prefix(prefix)
    sequences, scores = np.zeros((1, 0), np.int32), np.zeros(1)
    for step in range(length):
        if step:
            out, states = lm.step(tf.constant(sequences[:, -1]), states)
        log_probs = tf.nn.log_softmax(lm.dense(out)).numpy()[:, alphabet]
        candidates = (scores[:, None] + log_probs.astype(np.float64)).ravel()
        beam, symbol = np.divmod(np.arange(len(candidates)), len(alphabet))
        extended = np.concatenate([sequences[beam], alphabet[symbol][:, None]], axis=1)
        # np.lexsort's last key is the primary one: score first, then the ids from the first on.
        keep = np.lexsort([*extended.T[::-1], -candidates])[:width]
        sequences, scores = extended[keep], candidates[keep]
        states = tf.nest.map_structure(lambda s: tf.gather(s, beam[keep]), states)
    return [(tuple(int(i) for i in sequence), float(score)) for sequence, score in zip(sequences, scores)]


def beam_search_found(model: tf.keras.Model, prefix, canary_suffix, alphabet, width: int = 5) -> bool:
    """Whether `canary_suffix` is among the `width` continuations of its length that beam search returns."""
    canary = _check_in_alphabet("canary_suffix", canary_suffix, _check_alphabet(alphabet, None), None)
    results = beam_search(model, prefix, len(canary), alphabet, width)
    return tuple(int(i) for i in canary) in {sequence for sequence, _ in results}


def _check_ids(name: str, ids, vocab_size: int | None, ndim: int) -> np.ndarray:
    """`ids` as an int32 array of `ndim` dimensions, non-empty along the last, inside the vocabulary."""
    array = np.asarray(ids)
    if array.ndim != ndim or array.shape[-1] == 0 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{name} must be a non-empty {ndim}-D array of integer ids. Found shape {array.shape}, "
                         f"dtype {array.dtype}.")
    if vocab_size is not None and array.size and (array.min() < 0 or array.max() >= vocab_size):
        bad = np.unique(array[(array < 0) | (array >= vocab_size)])
        raise ValueError(f"{name} ids must be in [0, {vocab_size}) (the model's vocabulary). "
                         f"Found {bad[:10].tolist()}.")
    return array.astype(np.int32)


def _check_alphabet(alphabet, vocab_size: int | None) -> np.ndarray:
    array = _check_ids("alphabet", alphabet, vocab_size, 1)
    if len(np.unique(array)) != len(array):
        raise ValueError(f"alphabet ids must be distinct (each is drawn with probability 1/|alphabet|). "
                         f"Found {len(array) - len(np.unique(array))} repeated.")
    return array


def _check_in_alphabet(name: str, suffix, alphabet: np.ndarray, vocab_size: int | None) -> np.ndarray:
    array = _check_ids(name, suffix, vocab_size, 1)
    outside = np.setdiff1d(array, alphabet)
    if len(outside):
        raise ValueError(f"{name} ids must be in the alphabet. Found {outside[:10].tolist()}.")
    return array


def greedy_continuations(model: tf.keras.Model, prefixes, length: int, banned_ids=(),
                         batch_size: int = 2048) -> np.ndarray:
    """The most likely next symbol, `length` times, after each row of `prefixes` [n, k] (all of one
    length), never a `banned_ids` symbol: [n, length]. For cross-client memorization, where thousands of
    client prefixes are continued at once (full-model calls on the growing batch; k + length is short)."""
    lm = _stepped(model)
    prefixes = _check_ids("prefixes", prefixes, lm.vocab_size, 2)
    if length < 1:
        raise ValueError(f"length must be >= 1. Found {length}.")
    banned = np.asarray(list(banned_ids), np.int64)
    out = np.empty((len(prefixes), length), np.int32)
    for start in range(0, len(prefixes), batch_size):
        sequences = prefixes[start: start + batch_size]
        for _ in range(length):
            logits = model(sequences, training=False)[:, -1, :].numpy()
            logits[:, banned] = -np.inf
            sequences = np.concatenate([sequences, logits.argmax(axis=1).astype(np.int32)[:, None]], axis=1)
        out[start: start + len(sequences)] = sequences[:, prefixes.shape[1]:]
    return out
