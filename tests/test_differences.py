"""differences: golden effects and z on hand-built values; constant, empty and nan inputs; ranking; JSON."""

import json
import math

import numpy as np
import pytest

from fedgen_debug.analysis import differences as df


def test_cliffs_delta_golden():
    # Of the 16 pairs (a, b): b > a in 13, b == a in 2 (2-2, 3-3), b < a in 1 → delta (13 − 1)/16.
    result = df.compare([0, 1, 2, 3], [2, 3, 4, 5], "smaller", "larger")
    assert result["kind"] == "mean"
    assert result["a"] == 1.5 and result["b"] == 3.5
    assert result["effect"] == pytest.approx(0.75)
    assert result["direction"] == "larger"
    assert result["z"] > 0 and result["standard_error"] > 0
    # The Mann–Whitney z with the tie correction, by hand: U = 14, E = 8, Var = 16/12 · (9 − 12/56).
    assert result["z"] == pytest.approx(6 / math.sqrt(16 / 12 * (9 - 12 / 56)))
    assert df.compare([2, 3, 4, 5], [0, 1, 2, 3], "smaller", "larger")["direction"] == "smaller"
    # Each side's per-sample spread (sample standard deviation): √(5/3) for both; one value has none.
    assert result["spread_a"] == result["spread_b"] == pytest.approx(math.sqrt(5 / 3))
    assert df.compare([1.0], [0, 2])["spread_a"] == 0.0 and df.compare([1.0], [0, 2])["spread_b"] == pytest.approx(math.sqrt(2))


def test_yes_no_effect_is_the_difference_of_shares():
    a, b = [0] * 90 + [1] * 10, [0] * 60 + [1] * 40
    result = df.compare(a, b)
    assert result["kind"] == "share"
    assert result["a"] == pytest.approx(0.1) and result["b"] == pytest.approx(0.4)
    assert result["effect"] == pytest.approx(0.3)
    # Equal to the pooled two-proportion z (Mann–Whitney with ties on 0/1 values), up to the n/(n−1) factor.
    p = 0.25
    two_proportion = 0.3 / math.sqrt(p * (1 - p) * (2 / 100))
    assert result["z"] == pytest.approx(two_proportion * math.sqrt(199 / 200), rel=1e-6)


def test_constant_on_both_sides_is_no_difference_not_nan():
    result = df.compare(np.full(50, 0.3), np.full(80, 0.3))
    assert result["effect"] == 0.0 and result["z"] == 0.0 and result["standard_error"] == 0.0
    assert result["standardized_difference"] == 0.0 and result["direction"] == "no change"
    different = df.compare(np.zeros(50), np.ones(50))
    assert different["effect"] == 1.0 and math.isfinite(different["standardized_difference"])
    assert different["z"] > 8


def test_nan_is_left_out_and_empty_sides_compare_to_nothing():
    result = df.compare([1.0, np.nan, 2.0], [np.nan, 3.0, 4.0])
    assert result["measured_a"] == 2 and result["measured_b"] == 2
    assert result["effect"] == 1.0
    empty = df.compare([np.nan, np.nan], [1.0, 2.0])
    assert empty["a"] is None and empty["effect"] == 0.0 and empty["z"] == 0.0
    with pytest.raises(ValueError, match="finite or nan"):
        df.compare([1.0, np.inf], [1.0])


def test_same_distribution_is_rarely_significant():
    rng = np.random.default_rng(0)
    zs = [df.compare(rng.normal(size=300), rng.normal(size=300))["z"] for _ in range(200)]
    assert np.std(zs) == pytest.approx(1.0, abs=0.15)
    assert max(abs(z) for z in zs) < df.significance_z(35)


def test_categories_golden_and_no_difference():
    result = df.compare_categories([0, 0, 1, 1] * 50, [0, 0, 0, 1] * 50, names=["zero", "one"])
    assert result["effect"] == pytest.approx(0.25)
    assert result["a"] == {"zero": 0.5, "one": 0.5} and result["b"] == {"zero": 0.75, "one": 0.25}
    assert result["direction"] == "more zero; fewer one"
    assert result["z"] > 5
    same = df.compare_categories([0, 1, 2, 3] * 50, [3, 2, 1, 0] * 50)
    assert same["effect"] == 0.0 and same["z"] == 0.0 and same["direction"] == "no change"
    # Rare classes (expected count < 5) are pooled, not tested one by one.
    rare = df.compare_categories([0] * 100 + [5], [0] * 100 + [6])
    assert rare["z"] < 1


def test_rank_orders_by_z_then_by_how_far_it_moved():
    rng = np.random.default_rng(1)
    a = {"noise": rng.normal(size=200), "small": rng.normal(size=200), "far": rng.normal(size=200),
         "farther": rng.normal(size=200)}
    b = {"noise": rng.normal(size=200), "small": rng.normal(0.5, 1, 200), "far": rng.normal(6, 1, 200),
         "farther": rng.normal(12, 1, 200)}
    properties = [df.Property(name, "noise", "lower", "higher", name) for name in a]
    ranked = df.rank(df.compare_properties(properties, a, b))
    # far and farther are both completely separated (equal z): the one that moved further is first.
    assert [c["property"] for c in ranked] == ["farther", "far", "small", "noise"]
    assert [c["rank"] for c in ranked] == [1, 2, 3, 4]
    assert [c["significant"] for c in ranked] == [True, True, True, False]
    assert df.significant_families(ranked) == ["noise"]
    assert df.family_ranks(ranked) == {"noise": 1}


def test_significance_threshold_is_bonferroni_of_the_verdict_threshold():
    assert df.significance_z(1) == pytest.approx(3.2, abs=0.01)   # two-sided p = 2 · 0.00135
    assert df.significance_z(35) == pytest.approx(4.12, abs=0.01)


def test_outputs_are_json_serializable():
    properties = [df.Property("x", "scale", "smaller", "larger", "x")]
    ranked = df.rank(df.compare_properties(properties, {"x": np.arange(10.0)}, {"x": np.arange(10.0) + 3}))
    ranked.append({**df.compare_categories([0, 1, 1], [1, 1, 1]), "property": "c", "family": "class_mix",
                   "rank": 2, "significant": False})
    text = json.dumps(ranked, allow_nan=False)
    assert json.loads(text)[0]["direction"] == "larger"


def test_property_needs_a_known_family_and_values_of_both_sides():
    with pytest.raises(ValueError, match="family must be one of"):
        df.Property("x", "colour", "a", "b", "x")
    with pytest.raises(ValueError, match="Missing: y"):
        df.compare_properties([df.Property("y", "scale", "a", "b", "y")], {"y": [1.0]}, {})


def test_effect_sizes_and_their_errors_by_hand():
    """Golden values the sign-and-order tests above cannot pin: each formula's constants."""
    # DeLong's standard error of the AUC behind Cliff's delta (sample variances of the placements, n − 1).
    assert df.compare([0, 1, 2, 3], [2, 3, 4, 5])["standard_error"] == pytest.approx(0.25, abs=1e-12)
    # Cohen's d with the pooled population SD: (2.5 − 0.5) / sqrt((0.25 + 0.25) / 2).
    assert df.compare([0, 1], [2, 3])["standardized_difference"] == 4.0
    # Welch's error of the difference of means on unequal sizes: sqrt(s_a²/n_a + s_b²/n_b) = sqrt(2/2 + (20/3)/4).
    assert df.compare([0, 2], [0, 2, 4, 6])["difference_standard_error"] == pytest.approx(math.sqrt(1 + 20 / 12))


def test_class_mix_z_is_the_two_sided_z_of_the_chi_square_with_rare_classes_pooled_by_the_smaller_side():
    from scipy import stats

    # One degree of freedom: z = sqrt(χ²) = sqrt(25/3) for 50/50 against 70/30 on 100 each.
    assert df.compare_categories([0] * 50 + [1] * 50, [0] * 70 + [1] * 30)["z"] == pytest.approx(math.sqrt(25 / 3))
    # Classes 2 and 3 are rare for the 40-sample side (never seen there): pooled into one column.
    a, b = [0] * 20 + [1] * 20, [0] * 480 + [1] * 480 + [2] * 20 + [3] * 20
    chi2 = stats.chi2_contingency([[20, 20, 0], [480, 480, 40]], correction=False)[0]
    assert df.compare_categories(a, b)["z"] == pytest.approx(df._two_sided_z(float(stats.chi2.logsf(chi2, 2))))
    assert df.compare_categories(a, b)["z"] == pytest.approx(0.7804, abs=1e-4)
