"""Selectors T1-T6: the shared contract every selector honours, exact masks on hand-built clients,
composition, the registry, the population step and T6's public density."""

import numpy as np
import pytest

from fedgen_debug.data.text import tokenize
from fedgen_debug.selectors.base import AllOf, AnyOf
from fedgen_debug.selectors.criteria import (ByExampleCorrectness, ByUserMetric, OutOfVocabulary, PublicDensity,
                                             RandomExamples, Unlabeled)
from fedgen_debug.selectors.population import keep, select_population
from fedgen_debug.selectors.public_lm import PublicWordLM
from fedgen_debug.selectors.registry import REGISTRY, describe_all, parse_selector

N = 12
RNG = np.random.default_rng(0)
EXAMPLES = {"label": np.array([3, -1, 5, 7, -1, 2, 0, 1, 9, 4, 6, 8]), "pixels": RNG.random((N, 28, 28))}
OUTPUTS = {
    "correct": np.array([1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1], bool),
    "confidence": np.array([0.9, 0.4, 0.8, 0.3, 0.55, 0.95, 0.7, 0.45, 0.99, 0.6, 0.2, 0.85]),
    "oov": np.array([0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0], bool),
    "public_log_prob": np.log([0.1, 1e-4, 0.2, 1e-5, 0.05, 2e-3, 1e-3, 0.3, 5e-4, 0.01, 0.02, 1e-6]),
}

# Every selector, configured so that this client takes part: the shared contract runs on all of them.
ALL = [
    RandomExamples(fraction=0.5, seed=1),
    RandomExamples(),
    ByExampleCorrectness("misclassified", min_count=3),
    ByExampleCorrectness("correct", min_count=3),
    OutOfVocabulary(),
    ByUserMetric("low", threshold=0.6),
    ByUserMetric("high", threshold=0.4),
    Unlabeled(max_confidence=0.5),
    PublicDensity(eps=1e-3),
    AllOf((ByExampleCorrectness("misclassified", 3), RandomExamples(0.9, seed=2))),
    AnyOf((OutOfVocabulary(), PublicDensity(1e-3))),
]


@pytest.mark.parametrize("selector", ALL, ids=lambda s: s.name + ":" + s.task)
class TestSelectorContract:
    def test_output_is_a_subset_of_the_clients_examples(self, selector):
        mask = selector("alice", EXAMPLES, OUTPUTS)
        assert mask is not None and mask.dtype == bool and mask.shape == (N,) and mask.any()
        kept = keep(EXAMPLES, mask)
        assert len(kept["label"]) == mask.sum()
        for row in kept["pixels"]:
            assert any(np.array_equal(row, p) for p in EXAMPLES["pixels"])

    def test_deterministic(self, selector):
        np.testing.assert_array_equal(selector("alice", EXAMPLES, OUTPUTS), selector("alice", EXAMPLES, OUTPUTS))

    def test_empty_client_opts_out(self, selector):
        empty_examples = {k: v[:0] for k, v in EXAMPLES.items()}
        empty_outputs = {k: v[:0] for k, v in OUTPUTS.items()}
        assert selector("alice", empty_examples, empty_outputs) is None



@pytest.mark.parametrize("selector", [s for s in ALL if s.required_outputs], ids=lambda s: s.name + ":" + s.task)
def test_missing_primary_outputs_is_a_clear_error(selector):
    with pytest.raises(ValueError, match="needs the primary model's outputs"):
        selector("alice", EXAMPLES, {})


@pytest.mark.parametrize("build, message", [
    (lambda: RandomExamples(fraction=0.0), r"fraction must be in \(0, 1\]. Found 0.0."),
    (lambda: ByExampleCorrectness("wrong"), r"keep must be 'misclassified' or 'correct'"),
    (lambda: ByExampleCorrectness(min_count=0), r"min_count must be >= 1. Found 0."),
    (lambda: ByUserMetric("middle"), r"direction must be 'low' or 'high'"),
    (lambda: ByUserMetric(threshold=float("nan")), r"threshold must be finite. Found nan."),
    (lambda: ByUserMetric(quantile=1.0), r"quantile must be in \(0, 1\). Found 1.0."),
    (lambda: ByUserMetric(threshold=0.5, quantile=0.1), r"give a threshold or a quantile, not both."),
    (lambda: Unlabeled(max_confidence=1.5), r"max_confidence must be in \[0, 1\]. Found 1.5."),
    (lambda: PublicDensity(eps=0.0), r"eps must be in \(0, 1\). Found 0.0."),
    (lambda: AllOf((OutOfVocabulary(),)), r"all-of needs at least 2 selectors. Found 1."),
])
def test_invalid_settings_are_clear_errors(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ---- exact masks -----------------------------------------------------------------------------------

def _m(*indices):
    mask = np.zeros(N, bool)
    mask[list(indices)] = True
    return mask


def test_exact_masks():
    np.testing.assert_array_equal(RandomExamples()("a", EXAMPLES, OUTPUTS), np.ones(N, bool))
    np.testing.assert_array_equal(ByExampleCorrectness("misclassified", 5)("a", EXAMPLES, OUTPUTS),
                                  _m(1, 3, 4, 7, 9, 10))
    np.testing.assert_array_equal(ByExampleCorrectness("correct", 6)("a", EXAMPLES, OUTPUTS), _m(0, 2, 5, 6, 8, 11))
    assert ByExampleCorrectness("correct", 7)("a", EXAMPLES, OUTPUTS) is None  # 6 < 7: opts out
    np.testing.assert_array_equal(OutOfVocabulary()("a", EXAMPLES, OUTPUTS), _m(2, 6, 7))
    # accuracy = 6/12 = 0.5
    np.testing.assert_array_equal(ByUserMetric("low", 0.5)("a", EXAMPLES, OUTPUTS), np.ones(N, bool))
    assert ByUserMetric("low", 0.49)("a", EXAMPLES, OUTPUTS) is None
    assert ByUserMetric("high", 0.51)("a", EXAMPLES, OUTPUTS) is None
    np.testing.assert_array_equal(ByUserMetric("high", 0.5)("a", EXAMPLES, OUTPUTS), np.ones(N, bool))
    # labels -1 at 1, 4; confidence < 0.5 at 1, 3, 7, 10
    np.testing.assert_array_equal(Unlabeled(0.5)("a", EXAMPLES, OUTPUTS), _m(1, 3, 4, 7, 10))
    np.testing.assert_array_equal(Unlabeled(0.5)("a", EXAMPLES, {}), _m(1, 4))
    np.testing.assert_array_equal(PublicDensity(1e-3)("a", EXAMPLES, OUTPUTS), _m(1, 3, 6, 8, 11))
    np.testing.assert_array_equal(
        AllOf((ByExampleCorrectness("misclassified", 5), PublicDensity(1e-3)))("a", EXAMPLES, OUTPUTS), _m(1, 3))
    np.testing.assert_array_equal(AnyOf((OutOfVocabulary(), PublicDensity(1e-3)))("a", EXAMPLES, OUTPUTS),
                                  _m(1, 2, 3, 6, 7, 8, 11))
    # all-of opts out when a part opts out; any-of only when all do.
    assert AllOf((OutOfVocabulary(), ByUserMetric("low", 0.1)))("a", EXAMPLES, OUTPUTS) is None
    np.testing.assert_array_equal(AnyOf((OutOfVocabulary(), ByUserMetric("low", 0.1)))("a", EXAMPLES, OUTPUTS),
                                  _m(2, 6, 7))


def test_random_fraction_is_seeded_per_client_and_near_the_fraction():
    big = {"label": np.zeros(4000)}
    a = RandomExamples(0.25, seed=3)("alice", big, {})
    assert abs(a.mean() - 0.25) < 0.03
    np.testing.assert_array_equal(a, RandomExamples(0.25, seed=3)("alice", big, {}))
    assert not np.array_equal(a, RandomExamples(0.25, seed=4)("alice", big, {}))
    assert not np.array_equal(a, RandomExamples(0.25, seed=3)("bob", big, {}))


def test_t4_without_threshold_says_what_to_do():
    with pytest.raises(ValueError, match="needs a threshold"):
        ByUserMetric("low")("a", EXAMPLES, OUTPUTS)
    assert ByUserMetric("low").with_threshold(0.7).threshold == 0.7


# ---- registry ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("random", RandomExamples()),
    ("random:fraction=0.1,seed=4", RandomExamples(0.1, 4)),
    ("by-example:misclassified", ByExampleCorrectness("misclassified")),
    ("by-example:correct,min_count=3", ByExampleCorrectness("correct", 3)),
    ("oov", OutOfVocabulary()),
    ("by-user-accuracy:low", ByUserMetric("low")),
    ("by-user-accuracy:high,threshold=0.939", ByUserMetric("high", 0.939)),
    ("by-user-accuracy:low,quantile=0.05", ByUserMetric("low", quantile=0.05)),
    ("unlabeled:max_confidence=0.6", Unlabeled(0.6)),
    ("public-density:eps=0.001", PublicDensity(0.001)),
    ("oov|public-density:eps=0.01", AnyOf((OutOfVocabulary(), PublicDensity(0.01)))),
    ("by-example:misclassified&random:fraction=0.5", AllOf((ByExampleCorrectness(), RandomExamples(0.5)))),
])
def test_registry_parses_command_line_forms(text, expected):
    assert parse_selector(text) == expected


@pytest.mark.parametrize("text, message", [
    ("worst-users", r"Unknown selector 'worst-users'. Valid selectors: random, by-example, oov, "
                    r"by-user-accuracy, unlabeled, public-density."),
    ("by-user-accuracy:middle", r"'middle' is not one of low, high"),
    ("random:fraction=lots", r"fraction must be a number. Found 'lots'"),
    ("oov:alpha=1", r"oov: unknown setting 'alpha'"),
    ("oov&random|unlabeled", r"mixing '&' and '\|' is ambiguous"),
    ("by-example:misclassified,keep=correct", r"by-example: unexpected 'misclassified'"),
    ("random:fraction=0.1,fraction=0.2", r"fraction is given twice"),
])
def test_registry_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_selector(text)


@pytest.mark.parametrize("text, failing", [
    ("by-user-accuracy:low", True), ("by-user-accuracy:high,threshold=0.9", False),
    ("by-example:misclassified", True), ("by-example:correct", False),
    ("by-user-accuracy:low,metric=loss", None),         # a low loss is no failure: nobody here knows which way
    ("random:fraction=0.5", None), ("oov", None), ("unlabeled", None),
    ("by-example:misclassified&random:fraction=0.5", True), ("by-user-accuracy:high|random", False),
    ("by-example:misclassified|by-user-accuracy:high", None),   # the parts disagree
])
def test_a_selector_says_whether_it_gathers_where_the_primary_model_fails(text, failing):
    assert parse_selector(text).failing is failing


def test_a_pair_is_failing_then_working_only_with_one_of_each_in_that_order():
    from fedgen_debug.selectors.registry import failing_then_working

    assert failing_then_working("by-user-accuracy:low", "by-user-accuracy:high")
    assert failing_then_working("by-example:misclassified,min_count=20", "by-example:correct")
    assert not failing_then_working("by-user-accuracy:high", "by-user-accuracy:low")
    assert not failing_then_working("by-user-accuracy:low", "by-user-accuracy:low")
    assert not failing_then_working("by-example:misclassified", "random:fraction=0.5")   # random says nothing
    # a stored name this version no longer reads says nothing too, rather than failing diagnose
    assert not failing_then_working("by-user-accuracy:lowest", "by-user-accuracy:high")
    assert not failing_then_working("by-user-accuracy:low", "retired-selector")


def test_registry_lists_every_task():
    rows = describe_all()
    assert [r["task"] for r in rows] == ["T1", "T2", "T3", "T4", "T5", "T6"]
    assert {r["name"] for r in rows} == set(REGISTRY)
    assert next(r for r in rows if r["name"] == "by-example")["settings"] == {"keep": "misclassified", "min_count": 5}


# ---- population step -----------------------------------------------------------------------------

def test_population_reports_only_which_clients_take_part_and_counts():
    clients = {
        "a": ({"label": np.arange(6)}, {"correct": np.array([0, 0, 0, 0, 0, 1], bool)}),  # 5 wrong
        "b": ({"label": np.arange(3)}, {"correct": np.array([0, 1, 1], bool)}),  # 1 wrong: opts out
        "c": ({"label": np.arange(8)}, {"correct": np.zeros(8, bool)}),  # 8 wrong
    }
    population = select_population(clients, lambda cid: clients[cid], ByExampleCorrectness("misclassified", 5))
    assert population.client_ids == ("a", "c")
    assert population.as_dict() == {"selector": {"name": "by-example", "task": "T2",
                                                 "settings": {"keep": "misclassified", "min_count": 5}},
                                    "clients": 2, "clients_total": 3, "examples_kept": 13}


# ---- T6: public density ----------------------------------------------------------------------------

def test_public_lm_flags_the_topic_public_text_lacks():
    public = [tokenize(s) for s in ["i have a problem with python .", "you can use a list in python .",
                                    "this is a simple question about lists ."] * 20]
    lm = PublicWordLM.fit(public)
    private = ["I have a problem with python.", "How do I join two mysql tables with sql?",
               "This is a simple question.", "My postgresql index is slow."]
    log_probs = np.array([lm.log_prob_per_token(tokenize(s)) for s in private])
    mask = PublicDensity(eps=1e-3)("u", {"text": np.array(private, object)}, {"public_log_prob": log_probs})
    np.testing.assert_array_equal(mask, [False, True, False, True])
    assert lm.log_prob("python") > lm.log_prob("mysql")
    with pytest.raises(ValueError, match="the public corpus is empty"):
        PublicWordLM.fit([])


def test_selectors_cli_lists_t1_to_t6():
    import json

    from conftest import run_cli

    result = run_cli("selectors", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["task"], r["name"]) for r in rows] == [
        ("T1", "random"), ("T2", "by-example"), ("T3", "oov"), ("T4", "by-user-accuracy"), ("T5", "unlabeled"),
        ("T6", "public-density")]
    text = run_cli("selectors").stdout
    assert "T4  by-user-accuracy:low|high" in text and "device-side outputs: correct" in text
