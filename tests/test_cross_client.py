"""Cross-client memorization (Udsa et al. 2025): the ratios on 3 hand-built clients (exact), the
verbatim matcher, the release's sensitivity bound under replacing one user (searched at random), and
the DP noise's standard deviation."""

import itertools
import math

import numpy as np
import pytest

from fedgen_debug.memorization.cross_client import (RECORD_SENSITIVITY, dp_release, memorization_ratios, ngrams,
                                                    pairwise_hits, verbatim_match)

SUFFIXES = {"A": [("x", "y", "z")], "B": [("p", "q", "r", "s")], "C": [("u", "v")]}
GENERATIONS = {"A": [["x", "y", "q"], ["p", "q", "w"], ["k"]],
               "B": [["p", "q", "r"], ["u", "v", "x", "y"]],
               "C": [["a", "b"]]}


def test_ngrams_and_verbatim_match():
    assert ngrams(["a", "b", "c"], 2) == {("a", "b"), ("b", "c")}
    assert ngrams(["a"], 3) == {("a",)}
    assert verbatim_match(["k", "x", "y"], ["x", "y", "z"], 2)
    assert not verbatim_match(["y", "x"], ["x", "y", "z"], 2)
    assert verbatim_match(["u", "v", "w"], ["u", "v"], 4)  # a short suffix must match whole
    assert not verbatim_match(["u"], ["u", "v"], 4)


def test_pairwise_hits_on_three_clients():
    assert pairwise_hits(GENERATIONS, SUFFIXES, 2) == {
        ("A", "A"): {0}, ("A", "B"): {1}, ("B", "B"): {0}, ("B", "C"): {1}, ("B", "A"): {1}}


def test_ratios_on_three_clients_uniform_and_with_the_papers_weights():
    hits = pairwise_hits(GENERATIONS, SUFFIXES, 2)
    prefixes = {"A": 3, "B": 2, "C": 1}
    uniform = memorization_ratios(hits, prefixes)
    # MR_A→A = 1/3, MR_B→B = 1/2; MR_inter(A) = (1/3 + 0)/2, MR_inter(B) = (1/2 + 1/2)/2; C: 0.
    assert uniform.intra == pytest.approx((1 / 3 + 1 / 2) / 3)
    assert uniform.inter == pytest.approx((1 / 6 + 1 / 2) / 3)
    assert uniform.total == pytest.approx(4 / 6)  # A: 2 of 3 prefixes matched something, B: 2 of 2, C: 0 of 1
    weighted = memorization_ratios(hits, prefixes, weights={"A": 6, "B": 3, "C": 3})
    assert (weighted.intra, weighted.inter) == pytest.approx((0.5 / 3 + 0.25 / 2, 0.5 / 6 + 0.25 / 2))
    assert uniform.per_client["C"] == (0.0, 0.0, 0.0)


def test_a_client_without_prefixes_counts_in_the_normalizer():
    hits = pairwise_hits(GENERATIONS, SUFFIXES, 2)
    ratios = memorization_ratios(hits, {"A": 3, "B": 2, "C": 0})
    assert ratios.per_client["C"] == (0.0, 0.0, 0.0)
    assert ratios.per_client["B"][1] == pytest.approx(1 / 2)  # still (1/2 + 1/2) / (L − 1), L = 3
    with pytest.raises(ValueError, match="at least 2 clients"):
        memorization_ratios({}, {"A": 1})


def _sums(generations, suffixes, n):
    per_client = memorization_ratios(pairwise_hits(generations, suffixes, n),
                                     {c: len(g) for c, g in generations.items()}).per_client
    return np.array([sum(v[0] for v in per_client.values()), sum(v[1] for v in per_client.values())])


def test_replacing_one_user_moves_the_released_sums_by_at_most_the_stated_sensitivity():
    rng = np.random.default_rng(0)
    words = list("abcd")

    def text(count, length):
        return [tuple(rng.choice(words, size=length)) for _ in range(count)]

    worst = 0.0
    for trial in range(300):
        clients = [f"c{i}" for i in range(int(rng.integers(2, 6)))]
        generations = {c: [list(t) for t in text(int(rng.integers(1, 4)), 3)] for c in clients}
        suffixes = {c: text(int(rng.integers(1, 4)), int(rng.integers(1, 4))) for c in clients}
        before = _sums(generations, suffixes, 2)
        u = clients[int(rng.integers(len(clients)))]
        # The adversarial neighbour: u's suffixes are every 2-gram there is, and its own generations match them.
        generations2 = {**generations, u: [list(p) for p in itertools.product(words, repeat=2)][: len(generations[u])]}
        suffixes2 = {**suffixes, u: [tuple(p) for p in itertools.product(words, repeat=2)]}
        for g, s in ((generations2, suffixes2), (generations, suffixes2), (generations2, suffixes)):
            worst = max(worst, float(np.linalg.norm(_sums(g, s, 2) - before)))
    assert worst <= RECORD_SENSITIVITY + 1e-9
    assert worst > 1.5  # the search does reach the cross-client part of the bound


def test_dp_release_noise_has_the_stated_standard_deviation():
    per_client = {"A": (0.2, 0.1, 0.0), "B": (0.4, 0.3, 0.0), "C": (0.0, 0.0, 0.0)}
    draws = np.array([[dp_release(per_client, (seed, 7))[k] for k in ("mr_intra", "mr_inter")] for seed in range(300)])
    expected_sd = 2.0 * RECORD_SENSITIVITY / 3
    assert draws.mean(axis=0) == pytest.approx([0.6 / 3, 0.4 / 3], abs=4 * expected_sd / math.sqrt(300))
    assert draws.std(axis=0) == pytest.approx([expected_sd] * 2, rel=0.15)
    release = dp_release(per_client, (1, 7))
    assert release["stddev"] == pytest.approx(expected_sd) and release["users"] == 3 and release["dp"]
