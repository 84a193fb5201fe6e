"""Canary extraction (random-sampling rank, beam search) against brute force with full-model calls on
tiny random LMs, exact values on a uniform LM, and an LM that has memorized its canary."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.memorization import extraction
from fedgen_debug.memorization.extraction import (beam_search, beam_search_found, random_sampling_rank, rank_among,
                                                  suffix_log_probs)
from fedgen_debug.models.lm import LMConfig, build_lm


def tiny_lm(vocab_size=7, layers=2, projection_units=3, seed=0) -> tf.keras.Model:
    """A random LM whose weights are redrawn from N(0, 1): build_lm's initial weights give nearly
    uniform next-symbol distributions, whose suffix log-probs would differ by float32 noise only."""
    model = build_lm(LMConfig(vocab_size=vocab_size, embedding_dim=4, units=5, projection_units=projection_units,
                              layers=layers), seed=seed)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=w.shape) for w in model.get_weights()])
    return model


def uniform_lm(vocab_size=7) -> tf.keras.Model:
    """Every next symbol has probability 1/vocab_size: all suffixes of a length tie."""
    model = tiny_lm(vocab_size)
    model.layers[-1].set_weights([np.zeros_like(w) for w in model.layers[-1].get_weights()])
    return model


def full_log_probs(model, prefix, suffixes) -> np.ndarray:
    """log P(suffix | prefix) by the definition: one full-model call on prefix + suffix, log-softmax, gather."""
    suffixes = np.asarray(suffixes)
    ids = np.concatenate([np.tile(prefix, (len(suffixes), 1)), suffixes], axis=1)
    log_probs = tf.nn.log_softmax(model(ids)).numpy().astype(np.float64)
    steps = len(prefix) - 1 + np.arange(suffixes.shape[1])
    return log_probs[np.arange(len(suffixes))[:, None], steps, suffixes].sum(axis=1)


def all_suffixes(alphabet, length) -> np.ndarray:
    return np.array(list(itertools.product(alphabet, repeat=length)))


# --- suffix_log_probs ------------------------------------------------------------------------------

@pytest.mark.parametrize("layers,projection_units", [(1, 3), (2, 3), (1, None), (3, None)])
@pytest.mark.parametrize("table_rows", [1, 10, extraction.TABLE_ROWS])
def test_suffix_log_probs_equal_the_full_model_computation(layers, projection_units, table_rows, monkeypatch):
    # Shared beginnings computed once down to depth 0 (the prefix alone: every step per suffix), 1 (the
    # 7 first symbols) or the symbol before the last (nothing stepped per suffix).
    monkeypatch.setattr(extraction, "TABLE_ROWS", table_rows)
    model = tiny_lm(layers=layers, projection_units=projection_units, seed=layers)
    prefix = [6, 2, 5]
    rng = np.random.default_rng(0)
    for suffixes in (all_suffixes(range(7), 3), rng.integers(0, 7, (40, 1)), rng.integers(0, 7, (40, 2)),
                     rng.integers(0, 7, (40, 4))):
        # batch_size 20: several batches, and tables (49 two-symbol beginnings) built in several.
        scores = suffix_log_probs(model, prefix, suffixes, batch_size=20)
        assert scores.dtype == np.float64 and scores.shape == (len(suffixes),)
        np.testing.assert_allclose(scores, full_log_probs(model, prefix, suffixes), atol=1e-5, rtol=0)


def test_suffix_log_probs_of_a_uniform_lm_are_length_times_log_one_over_vocabulary():
    scores = suffix_log_probs(uniform_lm(7), [1], [[0, 1, 2], [6, 6, 6]])
    np.testing.assert_allclose(scores, 3 * np.log(1 / 7), rtol=1e-6)


# --- random-sampling rank ------------------------------------------------------------------------

def test_rank_among_equals_brute_force_enumeration_of_every_suffix():
    model, prefix = tiny_lm(vocab_size=6, seed=4), [5, 1]
    suffixes = all_suffixes(range(6), 3)  # all 216
    scores = full_log_probs(model, prefix, suffixes)
    order = np.argsort(-scores)
    for position in (0, 37, 108, 215):  # best, two in between, worst
        canary = order[position]
        others = np.delete(suffixes, canary, axis=0)
        other_scores = np.delete(scores, canary)
        # No other score within float32 noise of the canary's, so the expected rank is unambiguous.
        assert np.min(np.abs(other_scores - scores[canary])) > 1e-5
        result = rank_among(model, prefix, suffixes[canary], others)
        assert result.rank == 1 + np.count_nonzero(other_scores >= scores[canary]) == position + 1
        assert result.num_references == 215
        assert result.canary_log_prob == pytest.approx(scores[canary], abs=1e-5)


def test_references_identical_to_the_canary_count_against_it():
    model, prefix = tiny_lm(vocab_size=6, seed=4), [5, 1]
    suffixes = all_suffixes(range(6), 3)
    scores = full_log_probs(model, prefix, suffixes)
    best, worst = suffixes[np.argmax(scores)], suffixes[np.argmin(scores)]
    assert rank_among(model, prefix, best, [worst]).rank == 1
    assert rank_among(model, prefix, best, [best]).rank == 2
    assert rank_among(model, prefix, best, [best, worst, best]).rank == 3
    # On a uniform LM every suffix ties with the canary: each reference counts against it.
    assert rank_among(uniform_lm(6), prefix, best, suffixes).rank == 217
    # An alphabet of one symbol draws the canary every time.
    result = random_sampling_rank(model, prefix, [3, 3], [3], 5, np.random.default_rng(0))
    assert (result.rank, result.num_references) == (6, 5)


def test_random_sampling_rank_draws_uniformly_from_the_alphabet_with_the_given_generator():
    model, prefix, alphabet = tiny_lm(vocab_size=6, seed=4), [5, 1], np.arange(1, 6)
    suffixes = all_suffixes(alphabet, 3)  # the 125 equally likely references
    scores = full_log_probs(model, prefix, suffixes)
    canary = suffixes[np.argsort(-scores)[30]]
    result = random_sampling_rank(model, prefix, canary, alphabet, 2000, np.random.default_rng(5))
    assert result == random_sampling_rank(model, prefix, canary, alphabet, 2000, np.random.default_rng(5))
    # A reference counts against the canary with probability 31/125 (30 better suffixes and itself);
    # 6 binomial standard deviations either side (the seed is fixed: this cannot flake).
    p = 31 / 125
    assert abs(result.rank - 1 - 2000 * p) < 6 * np.sqrt(2000 * p * (1 - p))
    assert result.num_references == 2000
    assert len(result.reference_sample) == 0


def test_the_kept_reference_sample_is_the_first_references_scores():
    model, prefix, alphabet = tiny_lm(vocab_size=6, seed=4), [5, 1], np.arange(1, 6)
    result = random_sampling_rank(model, prefix, [2, 3, 4], alphabet, 50, np.random.default_rng(7),
                                  keep_reference_sample=10)
    first = alphabet[np.random.default_rng(7).integers(len(alphabet), size=(50, 3))][:10]
    np.testing.assert_allclose(result.reference_sample, full_log_probs(model, prefix, first), atol=1e-5)


# --- beam search ---------------------------------------------------------------------------------

def reference_beam_search(model, prefix, length, alphabet, width):
    """Beam search with one full-model call per beam and step."""
    beams = [((), 0.0)]
    for _ in range(length):
        candidates = []
        for sequence, score in beams:
            log_probs = tf.nn.log_softmax(model(np.array([list(prefix) + list(sequence)]))[0, -1]).numpy()
            candidates += [(sequence + (int(a),), score + float(log_probs[a])) for a in alphabet]
        beams = sorted(candidates, key=lambda c: (-c[1], c[0]))[:width]
    return beams


def assert_same_continuations(found, expected):
    assert [sequence for sequence, _ in found] == [sequence for sequence, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-5, rtol=0)


@pytest.mark.parametrize("length", [2, 3])
def test_beam_search_is_exhaustive_search_when_the_beam_holds_every_partial_sequence(length):
    model, prefix, alphabet = tiny_lm(vocab_size=6, seed=2), [5, 1], [1, 2, 3, 4, 5]  # 0 is never chosen
    width = len(alphabet) ** (length - 1)
    suffixes = all_suffixes(alphabet, length)
    scores = full_log_probs(model, prefix, suffixes)
    best = np.argsort(-scores)[:width]
    assert_same_continuations(beam_search(model, prefix, length, alphabet, width),
                              [(tuple(suffixes[i]), scores[i]) for i in best])


@pytest.mark.parametrize("seed,layers,width", [(0, 1, 1), (1, 2, 2), (3, 3, 3)])
def test_beam_search_with_a_narrow_beam_equals_a_reference_implementation(seed, layers, width):
    model, prefix, alphabet = tiny_lm(vocab_size=7, layers=layers, seed=seed), [6, 3], [1, 2, 4, 5]
    assert_same_continuations(beam_search(model, prefix, 4, alphabet, width),
                              reference_beam_search(model, prefix, 4, alphabet, width))


def test_beam_search_breaks_ties_by_id_and_does_not_renormalize_to_the_alphabet():
    found = beam_search(uniform_lm(7), [1], 2, [4, 2, 3], width=4)
    assert [sequence for sequence, _ in found] == [(2, 2), (2, 3), (2, 4), (3, 2)]
    np.testing.assert_allclose([score for _, score in found], 2 * np.log(1 / 7), rtol=1e-6)


def test_beam_search_found_for_the_most_likely_continuation_only():
    model, prefix, alphabet = tiny_lm(vocab_size=6, seed=2), [5, 1], [1, 2, 3, 4, 5]
    suffixes = all_suffixes(alphabet, 3)
    scores = full_log_probs(model, prefix, suffixes)
    assert beam_search_found(model, prefix, suffixes[np.argmax(scores)], alphabet)
    assert not beam_search_found(model, prefix, suffixes[np.argmin(scores)], alphabet)


# --- an LM that has memorized its canary --------------------------------------------------------

WORDS = np.arange(1, 21)          # word ids 1..20; 21 oov, 22 bos, 23 eos
PREFIX, CANARY = [22, 3, 7], [12, 5, 17]


def memorizing_lm(epochs: int) -> tf.keras.Model:
    """A tiny word-LM trained for `epochs` on nothing but bos, 3, 7 | 12, 5, 17."""
    tf.keras.utils.set_random_seed(0)
    model = build_lm(LMConfig(vocab_size=24, embedding_dim=8, units=16, projection_units=8), seed=0)
    sequence = np.array(PREFIX + CANARY)
    x, y = np.tile(sequence[:-1], (32, 1)), np.tile(sequence[1:], (32, 1))
    model.compile(tf.keras.optimizers.Adam(0.05), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if epochs:
        model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)
    return model


def test_a_memorized_canary_ranks_first_and_is_extracted_an_unseen_one_is_not():
    memorized = memorizing_lm(epochs=40)
    result = random_sampling_rank(memorized, PREFIX, CANARY, WORDS, 2000, np.random.default_rng(0))
    assert result.rank == 1
    assert beam_search_found(memorized, PREFIX, CANARY, WORDS)
    assert beam_search(memorized, PREFIX, 3, WORDS, width=1)[0][0] == tuple(CANARY)

    untrained = memorizing_lm(epochs=0)
    result = random_sampling_rank(untrained, PREFIX, CANARY, WORDS, 2000, np.random.default_rng(0))
    assert result.rank > 10  # 1,129 for this seed: the canary is an ordinary suffix
    assert not beam_search_found(untrained, PREFIX, CANARY, WORDS)


# --- validation ----------------------------------------------------------------------------------

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("call,message", [
    (lambda m: suffix_log_probs(m, [], [[1]]), "prefix must be a non-empty 1-D array of integer ids"),
    (lambda m: suffix_log_probs(m, [1], [1, 2]), "suffixes must be a non-empty 2-D array"),
    (lambda m: suffix_log_probs(m, [1], [[1.5]]), "suffixes must be a non-empty 2-D array of integer ids"),
    (lambda m: suffix_log_probs(m, [1], [[2, 7]]), r"suffixes ids must be in \[0, 7\) \(the model's vocabulary\). "
                                                   r"Found \[7\]."),
    (lambda m: suffix_log_probs(m, [-1], [[2]]), r"prefix ids must be in \[0, 7\)"),
    (lambda m: suffix_log_probs(m, [1], [[2]], batch_size=0), "batch_size must be >= 1. Found 0."),
    (lambda m: random_sampling_rank(m, [1], [2, 6], [1, 2, 3], 10, RNG),
     r"canary_suffix ids must be in the alphabet. Found \[6\]."),
    (lambda m: random_sampling_rank(m, [1], [2], [1, 2, 9], 10, RNG), r"alphabet ids must be in \[0, 7\)"),
    (lambda m: random_sampling_rank(m, [1], [2], [1, 2, 2], 10, RNG), "alphabet ids must be distinct"),
    (lambda m: random_sampling_rank(m, [1], [2], [], 10, RNG), "alphabet must be a non-empty 1-D array"),
    (lambda m: random_sampling_rank(m, [1], [2], [1, 2], 0, RNG), "num_references must be >= 1. Found 0."),
    (lambda m: rank_among(m, [1], [2, 3], [[2, 3, 4]]), "reference_suffixes must have the canary's length 2. "
                                                         "Found 3."),
    (lambda m: rank_among(m, [1], [2, 3], np.zeros((0, 2), int)), "reference_suffixes must have at least one row"),
    (lambda m: beam_search(m, [1], 3, [1, 2], width=0), "width must be >= 1. Found 0."),
    (lambda m: beam_search(m, [1], 0, [1, 2]), "length must be >= 1. Found 0."),
    (lambda m: beam_search_found(m, [1], [1, 3], [1, 2]), r"canary_suffix ids must be in the alphabet. Found \[3\]."),
])
def test_invalid_arguments_raise_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(tiny_lm())


def test_a_generator_is_required():
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator. Found int."):
        random_sampling_rank(tiny_lm(), [1], [2], [1, 2], 10, 0)


@pytest.mark.parametrize("layers,message", [
    ([tf.keras.layers.Embedding(7, 4), tf.keras.layers.Dense(7)], "model must be a Sequential of Embedding, RNN"),
    ([tf.keras.layers.Embedding(7, 4), tf.keras.layers.LSTM(5, return_sequences=True),
      tf.keras.layers.Dense(7, activation="softmax")], "model's Dense layer must output logits"),
    ([tf.keras.layers.Embedding(7, 4), tf.keras.layers.LSTM(5, return_sequences=True, go_backwards=True),
      tf.keras.layers.Dense(7)], "model's RNN layers must run forwards"),
])
def test_models_of_another_shape_are_refused(layers, message):
    model = tf.keras.Sequential(layers)
    model.build((None, None))
    with pytest.raises(ValueError, match=message):
        suffix_log_probs(model, [1], [[2]])


def test_greedy_continuations_take_the_argmax_step_by_step_and_skip_banned_ids():
    from fedgen_debug.memorization.extraction import greedy_continuations

    model = tiny_lm(vocab_size=6, seed=2)
    prefixes = np.array([[5, 1], [5, 2], [5, 3]])
    found = greedy_continuations(model, prefixes, 3, banned_ids=[0], batch_size=2)
    for prefix, continuation in zip(prefixes, found):
        sequence = list(prefix)
        for _ in range(3):
            logits = model(np.array([sequence]))[0, -1].numpy()
            logits[0] = -np.inf
            sequence.append(int(np.argmax(logits)))
        assert list(continuation) == sequence[2:]
        assert 0 not in continuation
