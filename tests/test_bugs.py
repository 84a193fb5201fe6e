"""Bug injectors: exact effects on hand-built clients, binomial rates, ground truth."""

import collections

import numpy as np
import pytest
from scipy import stats

from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.device.tokenization import tokenize_client
from fedgen_debug.data import client_data as cd
from fedgen_debug.data.text import tokenize


def test_concat_bug_glues_exactly_the_first_two_tokens():
    bug = TokenizationBug(fraction=1.0, seed=0)
    out = bug.tokenize_client("u1", ["Good day to you.", "Hello", "I have a problem, really."])
    assert out == [
        ["good day", "to", "you", "."],
        ["hello"],  # a one-token sentence has nothing to glue
        ["i have", "a", "problem", ",", "really", "."],
    ]


def test_zero_fraction_and_fixed_variant_tokenize_correctly():
    sentences = ["Good day to you.", "I have a problem."]
    clean = [tokenize(s) for s in sentences]
    assert TokenizationBug(0.0).tokenize_client("u", sentences) == clean
    assert TokenizationBug(1.0).as_fixed().tokenize_client("u", sentences) == clean
    assert tokenize_client("u", sentences, None) == clean
    assert not TokenizationBug(1.0).as_fixed().affected_sentences("u", 5).any()


def test_concat_bug_hits_the_requested_fraction_and_touches_nothing_else():
    sentences = [f"word{i} second third fourth ." for i in range(50)]
    bug = TokenizationBug(fraction=0.1, seed=3)
    hits = total = 0
    for client in range(100):
        cid = f"user_{client}"
        buggy = bug.tokenize_client(cid, sentences)
        mask = bug.affected_sentences(cid, len(sentences))
        for tokens, clean, hit in zip(buggy, (tokenize(s) for s in sentences), mask):
            if hit:
                assert tokens == [clean[0] + " " + clean[1]] + clean[2:]
            else:
                assert tokens == clean
        hits += int(mask.sum())
        total += len(sentences)
    # Binomial(5000, 0.1): the two-sided 99.9% interval.
    lo, hi = stats.binom.interval(0.999, total, 0.1)
    assert lo <= hits <= hi, hits


def test_concat_bug_is_deterministic_per_seed_and_client():
    a, b, c = TokenizationBug(0.5, seed=1), TokenizationBug(0.5, seed=1), TokenizationBug(0.5, seed=2)
    np.testing.assert_array_equal(a.affected_sentences("x", 64), b.affected_sentences("x", 64))
    assert not np.array_equal(a.affected_sentences("x", 64), c.affected_sentences("x", 64))
    assert not np.array_equal(a.affected_sentences("x", 64), a.affected_sentences("y", 64))


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_bad_fraction_is_a_clear_error(fraction):
    with pytest.raises(ValueError, match=f"fraction must be in \\[0, 1\\]. Found {fraction}."):
        TokenizationBug(fraction)
    with pytest.raises(ValueError, match="fraction must be in"):
        PixelInversionBug(fraction)


def _images(n_clients):
    rng = np.random.default_rng(0)
    return cd.ArrayClientData({
        f"c{i}": collections.OrderedDict(
            label=np.zeros(2, np.int32), pixels=rng.random((2, 28, 28)).astype(np.float32))
        for i in range(n_clients)
    })


@pytest.mark.parametrize("fraction, expected_count", [(0.0, 0), (0.25, 2), (0.5, 4), (1.0, 7)])
def test_inversion_hits_exactly_the_chosen_devices(fraction, expected_count):
    data = _images(7)
    bug = PixelInversionBug(fraction, seed=4)
    affected = bug.affected_clients(data.client_ids)
    assert len(affected) == expected_count  # round(fraction * 7)
    buggy = bug.apply(data)
    assert buggy.client_ids == data.client_ids
    for cid in data.client_ids:
        original = data.client_arrays(cid)["pixels"]
        expected = 1.0 - original if cid in affected else original
        # The device's numpy path (selection, metrics) and its tf.data path (training) see the same data.
        through_dataset = next(iter(buggy.create_tf_dataset_for_client(cid).batch(10)))
        for seen in (cd.client_numpy(buggy, cid), {k: v.numpy() for k, v in through_dataset.items()}):
            np.testing.assert_allclose(seen["pixels"], expected, atol=1e-7)
            np.testing.assert_array_equal(seen["label"], data.client_arrays(cid)["label"])
        assert cd.num_examples(buggy, cid) == 2
    assert hasattr(buggy, "client_arrays")  # the numpy path was the one tested above


def test_inversion_choice_is_seeded_and_fixed_variant_clears_it():
    data = _images(20)
    a = PixelInversionBug(0.5, seed=1).affected_clients(data.client_ids)
    assert a == PixelInversionBug(0.5, seed=1).affected_clients(reversed(data.client_ids))
    assert a != PixelInversionBug(0.5, seed=2).affected_clients(data.client_ids)
    fixed = PixelInversionBug(0.5, seed=1).as_fixed()
    assert fixed.affected_clients(data.client_ids) == frozenset()
    for cid in data.client_ids:
        np.testing.assert_array_equal(cd.client_numpy(fixed.apply(data), cid)["pixels"],
                                      data.client_arrays(cid)["pixels"])
