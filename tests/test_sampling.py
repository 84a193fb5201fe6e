"""Monte-Carlo sampling from an autoregressive LM, and the expected symbol rate along its samples,
on a hand-built model whose next-symbol distribution is the same after every prefix."""

import numpy as np
import tensorflow as tf

from fedgen_debug.models.sampling import expected_symbol_rate, sample_until

PAD, START, STOP, A, B = range(5)
PROBS = np.array([0.3, 0.3, 0.1, 0.2, 0.1])  # pad and start are banned: drawn from (0.1, 0.2, 0.1) / 0.4


def _constant_lm() -> tf.keras.Model:
    model = tf.keras.Sequential([
        tf.keras.layers.Embedding(5, 1, embeddings_initializer="zeros"),
        tf.keras.layers.Dense(5, kernel_initializer="zeros",
                              bias_initializer=tf.keras.initializers.Constant(np.log(PROBS))),
    ])
    model.build((None, None))
    return model


def test_samples_follow_the_distribution_without_banned_symbols_and_stop_at_the_stop_symbol():
    samples = sample_until(_constant_lm(), START, STOP, [PAD, START], count=4000, max_steps=6, seed=1)
    symbols = np.concatenate([s for s in samples if s])
    assert set(symbols) <= {A, B}
    # P(a | not stop) = 0.2 / 0.3; about 5 sd of the binomial either side.
    assert abs(np.mean(symbols == A) - 2 / 3) < 5 * np.sqrt(2 / 9 / len(symbols))
    lengths = np.array([len(s) for s in samples])
    # Geometric length with stop probability 0.25 per draw, cut at 6.
    assert lengths.max() == 6 and abs(np.mean(lengths == 0) - 0.25) < 0.03


def test_expected_symbol_rate_is_the_exact_rate_and_what_counting_estimates():
    model = _constant_lm()
    samples = sample_until(model, START, STOP, [PAD, START], count=3000, max_steps=6, seed=2)
    expected = expected_symbol_rate(model, START, STOP, [PAD, START], samples, 6, [A])
    assert np.isclose(expected, 0.2 / 0.3, rtol=1e-6)  # p(a) / p(not stop) after every prefix
    assert np.isclose(expected_symbol_rate(model, START, STOP, [PAD, START], samples, 6, [A, B]), 1.0)
    counted = np.mean(np.concatenate([s for s in samples if s]) == A)
    assert abs(counted - expected) < 0.03
    assert expected_symbol_rate(model, START, STOP, [PAD, START], [], 6, [A]) == 0.0


def test_batches_draw_from_one_stream_and_give_every_sequence(monkeypatch):
    from fedgen_debug.models import sampling

    model = _constant_lm()
    monkeypatch.setattr(sampling, "SAMPLING_BATCH", 10)
    batched = sample_until(model, START, STOP, [PAD, START], count=25, max_steps=6, seed=3)
    assert len(batched) == 25
    assert batched[10:20] != batched[:10]  # each batch continues the stream (no restart at the seed)
    assert batched == sample_until(model, START, STOP, [PAD, START], count=25, max_steps=6, seed=3)
    assert np.isclose(expected_symbol_rate(model, START, STOP, [PAD, START], batched, 6, [A]), 0.2 / 0.3)


def _whole_model_samples(model, start, stop, banned, count, max_steps, seed):
    """The sampler as first written: every step calls the whole model on every sequence's prefix."""
    rng, prefix = np.random.default_rng(seed), np.full((count, 1), start, np.int32)
    done, out = np.zeros(count, bool), [[] for _ in range(count)]
    for _ in range(max_steps):
        logits = model(prefix, training=False)[:, -1, :].numpy().astype(np.float64)
        logits[:, banned] = -np.inf
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        draws = (probs.cumsum(axis=1) < rng.random((count, 1))).sum(axis=1).clip(0, probs.shape[1] - 1)
        for i, symbol in enumerate(draws):
            if not done[i]:
                done[i] = symbol == stop
                out[i] += [] if done[i] else [int(symbol)]
        if done.all():
            break
        prefix = np.concatenate([prefix, draws[:, None].astype(np.int32)], axis=1)
    return out


def test_sampling_only_the_last_position_of_unfinished_sequences_draws_what_the_whole_model_draws():
    # The sampler runs the output layer on each unfinished sequence's last position only; the draws
    # (and the random stream) are those of calling the whole model on every prefix.
    from fedgen_debug.models.lm import LMConfig, build_lm

    recurrent = build_lm(LMConfig(12, 4, 8, 4, 2), seed=3)
    recurrent.build((None, None))
    masked = tf.keras.Sequential([  # a mask flows from the embedding into the RNN: called whole
        tf.keras.layers.Embedding(12, 4, mask_zero=True),
        tf.keras.layers.SimpleRNN(8, return_sequences=True, kernel_initializer=tf.keras.initializers.GlorotUniform(4)),
        tf.keras.layers.Dense(12, kernel_initializer=tf.keras.initializers.GlorotUniform(5))])
    masked.build((None, None))
    for model in (recurrent, _constant_lm(), masked):
        # Id 0 may be drawn: the masked model then sees masked steps in its prefixes.
        want = _whole_model_samples(model, 1, 2, [1], 300, 7, 11)
        assert sample_until(model, 1, 2, [1], 300, 7, 11) == want
        assert any(0 in s[:-1] for s in want)
        assert len({len(s) for s in want}) > 3  # sequences finished at different steps


def _sequential_inverse_cdf(logits, banned, uniforms):
    """The draw as the sampler first made it: float64 softmax, one cumulative sum over every symbol."""
    logits = np.asarray(logits, np.float64).copy()
    logits[:, banned] = -np.inf
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    return (probs.cumsum(axis=1) < np.asarray(uniforms)[:, None]).sum(axis=1)


def test_inverse_cdf_by_blocks_draws_what_one_cumulative_sum_draws():
    from fedgen_debug.models.sampling import CDF_BLOCK, inverse_cdf

    rng = np.random.default_rng(0)
    symbols = 3 * CDF_BLOCK + 5  # the last block padded
    logits = rng.normal(scale=3.0, size=(400, symbols)).astype(np.float32)
    banned = [0, CDF_BLOCK - 1, CDF_BLOCK, symbols - 1]  # at block edges and the very end
    uniforms = rng.random(400)
    drawn = inverse_cdf(tf.constant(logits), tf.constant(banned), tf.constant(uniforms)).numpy()
    np.testing.assert_array_equal(drawn, _sequential_inverse_cdf(logits, banned, uniforms))
    assert len(set(drawn) & set(banned)) == 0 and len(set(drawn)) > 100


def test_inverse_cdf_hand_built_rows_and_extreme_uniforms_never_draw_a_banned_symbol():
    from fedgen_debug.models.sampling import CDF_BLOCK, inverse_cdf

    # Two symbols of mass 1/4 and 3/4 (the rest banned or -inf), in blocks 1 and 2; block 0 has no mass.
    symbols = 3 * CDF_BLOCK
    first, second = CDF_BLOCK + 7, 2 * CDF_BLOCK + 3
    row = np.full(symbols, -np.inf, np.float32)
    row[[first, second]] = np.log([0.25, 0.75])
    row[[1, symbols - 1]] = 5.0  # likely, but banned
    uniforms = np.array([0.0, 0.1, 0.2499, 0.2501, 0.9, 1.0 - 2.0 ** -53])
    drawn = inverse_cdf(tf.constant(np.tile(row, (len(uniforms), 1))), tf.constant([1, symbols - 1]),
                        tf.constant(uniforms)).numpy()
    np.testing.assert_array_equal(drawn, [first, first, first, second, second, second])
    # The largest uniform on rows whose last block has no mass: rounding puts the threshold at or just
    # past the last allowed symbol's cumulative sum (without the clip, about 1 row in 8 drew past it).
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(2000, symbols)).astype(np.float32)
    logits[:, 2 * CDF_BLOCK:] = -np.inf
    banned = [CDF_BLOCK - 1, 2 * CDF_BLOCK - 1]
    drawn = inverse_cdf(tf.constant(logits), tf.constant(banned), tf.constant(np.full(2000, 1.0 - 2.0 ** -53))).numpy()
    allowed_last = 2 * CDF_BLOCK - 2
    assert (drawn == allowed_last).all()


def test_joint_log_prob_in_batches_equals_one_call(monkeypatch):
    from fedgen_debug.models import char_lm
    from fedgen_debug.models.lm import build_lm
    from fedgen_debug.training.presets import lm_model_config

    model = build_lm(lm_model_config("test", "char"), seed=5)
    words = ["a", "i have", "regex", "ü", "dog", "x y z"]
    whole = char_lm.joint_log_prob(model, words)
    monkeypatch.setattr(char_lm, "JOINT_BATCH", 4)  # two batches of different lengths
    np.testing.assert_allclose(char_lm.joint_log_prob(model, words), whole, rtol=1e-6)
    assert char_lm.joint_log_prob(model, []).shape == (0,)


def test_a_models_logits_are_traced_once_follow_its_weights_and_do_not_keep_it_alive():
    """Scoring words twice with one model (lm_analysis: the top words, then under the baseline) traced it
    twice; now once. The traced graph reads the weights as they are, and holds the model weakly."""
    import gc
    import weakref

    from fedgen_debug.models.sampling import compiled_logits

    model = _constant_lm()
    logits_of = compiled_logits(model)
    assert compiled_logits(model) is logits_of and compiled_logits(_constant_lm()) is not logits_of
    ids = np.array([[START, A, B]], np.int32)
    np.testing.assert_allclose(tf.nn.softmax(logits_of(ids))[0, 0].numpy(), PROBS, rtol=1e-5)
    logits_of(np.array([[START, A, B, B, A]], np.int32))             # another length, another batch: no new trace
    model.layers[1].bias.assign(np.zeros(5))                        # new weights: read, not frozen into the graph
    np.testing.assert_allclose(tf.nn.softmax(logits_of(ids))[0, 0].numpy(), np.full(5, 0.2), rtol=1e-5)
    assert logits_of.experimental_get_tracing_count() == 1
    held = weakref.ref(model)
    del model, logits_of
    gc.collect()
    assert held() is None
