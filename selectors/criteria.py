"""The selection criteria T1-T6 of augenstein2020 Table 1."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.seeding import client_rng
from fedgen_debug.selectors.base import Selector
from fedgen_debug.validation import check_at_least, check_finite, check_in_range, check_probability


@dataclasses.dataclass(frozen=True)
class RandomExamples(Selector):
    """T1, sanity checking: every client takes part with a random `fraction` of its examples."""

    fraction: float = 1.0
    seed: int = 0
    task = "T1"
    name = "random"

    def __post_init__(self):
        check_in_range("fraction", self.fraction, 0.0, 1.0, low_inclusive=False)

    def select(self, client_id, examples, outputs, n):
        if self.fraction == 1.0:
            return np.ones(n, bool)
        return client_rng(self.seed, client_id, rng_streams.RANDOM_SELECTION).random(n) < self.fraction


@dataclasses.dataclass(frozen=True)
class ByExampleCorrectness(Selector):
    """T2, debugging the classifier: the examples it misclassified (or classified correctly); a client
    with fewer than `min_count` of them opts out (5 in the paper's appendix C.4)."""

    keep: str = "misclassified"
    min_count: int = 5
    task = "T2"
    name = "by-example"
    required_outputs = ("correct",)

    def __post_init__(self):
        if self.keep not in ("misclassified", "correct"):
            raise ValueError(f"keep must be 'misclassified' or 'correct'. Found {self.keep!r}.")
        check_at_least("min_count", self.min_count, 1)

    @property
    def failing(self) -> bool:
        return self.keep == "misclassified"

    def select(self, client_id, examples, outputs, n):
        correct = np.asarray(outputs["correct"], bool)
        mask = correct if self.keep == "correct" else ~correct
        return mask if mask.sum() >= self.min_count else None


@dataclasses.dataclass(frozen=True)
class OutOfVocabulary(Selector):
    """T3, unknown classes: the tokens outside the word-LM's vocabulary, one example per token (the
    char-LM's training data)."""

    task = "T3"
    name = "oov"
    required_outputs = ("oov",)

    def select(self, client_id, examples, outputs, n):
        return np.asarray(outputs["oov"], bool)


@dataclasses.dataclass(frozen=True)
class ByUserMetric(Selector):
    """T4, low- (or high-) performing users: all examples of users whose metric (mean of the per-example
    output `metric`, e.g. `correct` → accuracy) is <= (>=) `threshold`. The threshold is the modeler's,
    or a DP quantile over users (`fedgen_debug.privacy.quantile`) at `quantile`; paper: 25th / 75th
    percentile of user accuracy without the bug (the default). A lower `quantile` for "low" is a sharper
    cut: a bug on a few devices makes a larger share of the users below it."""

    direction: str = "low"
    threshold: float | None = None
    metric: str = "correct"
    quantile: float | None = None
    task = "T4"
    name = "by-user-accuracy"

    def __post_init__(self):
        if self.direction not in ("low", "high"):
            raise ValueError(f"direction must be 'low' or 'high'. Found {self.direction!r}.")
        if self.threshold is not None:
            check_finite("threshold", self.threshold)
        if self.quantile is not None:
            check_in_range("quantile", self.quantile, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
            if self.threshold is not None:
                raise ValueError("give a threshold or a quantile, not both.")

    @property
    def required_outputs(self):
        return (self.metric,)

    @property
    def failing(self) -> bool | None:
        """Low accuracy fails; of another metric (a loss?) nobody here knows which way is worse."""
        return self.direction == "low" if self.metric == "correct" else None

    def with_threshold(self, threshold: float) -> "ByUserMetric":
        """The selector the devices run: the threshold estimated at `quantile` (or given) in its place."""
        return dataclasses.replace(self, threshold=float(threshold), quantile=None)

    def user_metric(self, outputs) -> float:
        return float(np.mean(np.asarray(outputs[self.metric], np.float64)))

    def select(self, client_id, examples, outputs, n):
        if self.threshold is None:
            raise ValueError("by-user-accuracy needs a threshold: give one (threshold=0.88) or estimate it "
                             "with a DP quantile first.")
        value = self.user_metric(outputs)
        keep = value <= self.threshold if self.direction == "low" else value >= self.threshold
        return np.ones(n, bool) if keep else None


@dataclasses.dataclass(frozen=True)
class Unlabeled(Selector):
    """T5, examples for human labeling: missing labels (label < 0) or primary-model confidence below
    `max_confidence`."""

    max_confidence: float = 0.5
    task = "T5"
    name = "unlabeled"

    def __post_init__(self):
        check_probability("max_confidence", self.max_confidence)

    def select(self, client_id, examples, outputs, n):
        mask = np.zeros(n, bool)
        if "label" in examples:
            mask |= np.asarray(examples["label"]) < 0
        if "confidence" in outputs:
            mask |= np.asarray(outputs["confidence"], np.float64) < self.max_confidence
        elif "label" not in examples:
            raise ValueError("unlabeled needs labels in the examples or the primary model's `confidence`.")
        return mask


@dataclasses.dataclass(frozen=True)
class PublicDensity(Selector):
    """T6, bias: examples dense in the private data but sparse in a public one, i.e. with
    p_public(x) <= `eps` under an explicit-likelihood public model (for text: the per-token geometric
    mean probability under a public LM, so `eps` does not depend on length; for images: the public-vs-
    private discriminator's public probability). The device computes `public_log_prob` with the
    public model it was shipped."""

    eps: float = 1e-3
    task = "T6"
    name = "public-density"
    required_outputs = ("public_log_prob",)

    def __post_init__(self):
        check_in_range("eps", self.eps, 0.0, 1.0, low_inclusive=False, high_inclusive=False)

    def select(self, client_id, examples, outputs, n):
        return np.asarray(outputs["public_log_prob"], np.float64) <= math.log(self.eps)
