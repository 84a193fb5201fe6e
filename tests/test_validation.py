"""One validation module: every check's message in dp_accounting's style, and one rule for nan and inf
(nan always refused; inf refused unless the check allows it) in every config that uses it."""

import math

import pytest

from fedgen_debug import validation as v

NAN, INF = float("nan"), float("inf")


# ---- each check's message --------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: v.check_positive("clip", -1), "clip must be > 0. Found -1."),
    (lambda: v.check_positive("clip", 0.0), "clip must be > 0. Found 0.0."),
    (lambda: v.check_non_negative("noise_multiplier", -0.5), "noise_multiplier must be >= 0. Found -0.5."),
    (lambda: v.check_at_least("rounds", 0, 1), "rounds must be >= 1. Found 0."),
    (lambda: v.check_at_least("eval_every", -1, 0, note="0 = never"), "eval_every must be >= 0 (0 = never). Found -1."),
    (lambda: v.check_at_most("size", 11, 10), "size must be <= 10. Found 11."),
    (lambda: v.check_in_range("momentum", 1.0, 0.0, 1.0, high_inclusive=False), "momentum must be in [0, 1). Found 1.0."),
    (lambda: v.check_in_range("quantile", 0.0, 0.0, 1.0, low_inclusive=False, high_inclusive=False),
     "quantile must be in (0, 1). Found 0.0."),
    (lambda: v.check_in_range("share", 0.0, 0.0, 1.0, low_inclusive=False), "share must be in (0, 1]. Found 0.0."),
    (lambda: v.check_in_range("n_e", 9, 1, 8), "n_e must be in [1, 8]. Found 9."),
    (lambda: v.check_probability("p", 1.5), "p must be in [0, 1]. Found 1.5."),
    (lambda: v.check_fraction(-0.1), "fraction must be in [0, 1]. Found -0.1."),
    (lambda: v.check_one_of("sampling", "x", ("poisson", "without-replacement")),
     "sampling must be one of poisson, without-replacement. Found 'x'."),
    (lambda: v.check_finite("count", INF), "count must be finite. Found inf."),
])
def test_each_check_names_the_argument_the_rule_and_the_value(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_checks_return_the_value_they_accept():
    assert v.check_positive("clip", 0.5) == 0.5
    assert v.check_non_negative("z", 0.0) == 0.0
    assert v.check_at_least("rounds", 3, 1) == 3
    assert v.check_in_range("q", 0.5, 0.0, 1.0, low_inclusive=False, high_inclusive=False) == 0.5
    assert v.check_probability("p", 1.0) == 1.0
    assert v.check_one_of("backend", "tf", ("tf", "tff")) == "tf"
    assert v.check_finite("count", -3.0) == -3.0


# ---- one rule for nan and inf ----------------------------------------------------------------------

NUMERIC_CHECKS = [
    ("check_positive", lambda value, **kw: v.check_positive("x", value, **kw), "> 0"),
    ("check_non_negative", lambda value, **kw: v.check_non_negative("x", value, **kw), ">= 0"),
    ("check_at_least", lambda value: v.check_at_least("x", value, 1), ">= 1"),
    ("check_in_range", lambda value: v.check_in_range("x", value, 0.0, 1.0), "in [0, 1]"),
    ("check_probability", lambda value: v.check_probability("x", value), "in [0, 1]"),
    ("check_finite", lambda value: v.check_finite("x", value), "finite"),
]


@pytest.mark.parametrize("name, check, rule", NUMERIC_CHECKS, ids=[c[0] for c in NUMERIC_CHECKS])
def test_nan_is_refused_by_every_numeric_check(name, check, rule):
    with pytest.raises(ValueError) as error:
        check(NAN)
    assert str(error.value) == f"x must be {rule}. Found nan."


@pytest.mark.parametrize("check", [v.check_positive, v.check_non_negative, v.check_finite])
def test_inf_is_refused_unless_allowed(check):
    with pytest.raises(ValueError, match=r"^x must be finite. Found inf.$"):
        check("x", INF)
    if check is not v.check_finite:
        assert check("x", INF, allow_inf=True) == INF
        with pytest.raises(ValueError, match="Found nan"):  # allowing inf never lets nan through
            check("x", NAN, allow_inf=True)


def test_inf_is_refused_as_a_count():
    with pytest.raises(ValueError, match=r"^rounds must be finite. Found inf.$"):
        v.check_at_least("rounds", INF, 1)


# ---- the same rule in the configs that use the module ----------------------------------------------

def _dp(**kw):
    from fedgen_debug.training.config import DPConfig

    return DPConfig(**{"clients_per_round": 5, "noise_multiplier": 1.0, "clip": 0.1, **kw})


def _client(**kw):
    from fedgen_debug.training.config import ClientConfig

    return ClientConfig(**kw)


def _server(**kw):
    from fedgen_debug.training.config import ServerConfig

    return ServerConfig(**kw)


def _accounting(**kw):
    from fedgen_debug.privacy.accounting import DPFedAvgPrivacy

    return DPFedAvgPrivacy(**{"clients_per_round": 5, "population": 10, "noise_multiplier": 1.0, "rounds": 3, **kw})


def _delta(delta):
    from fedgen_debug.privacy.accounting import check_delta

    return check_delta(delta)


def _quantile(**kw):
    from fedgen_debug.privacy.quantile import QuantileConfig

    return QuantileConfig(**{"target_quantile": 0.5, **kw})


def _heavy_hitters(**kw):
    from fedgen_debug.privacy.heavy_hitters import HeavyHittersConfig

    return HeavyHittersConfig(**{"size": 10, **kw})


def _pixels(fraction):
    from fedgen_debug.device.pixels import PixelInversionBug

    return PixelInversionBug(fraction, seed=1)


def _cnn(**kw):
    from fedgen_debug.models.cnn import CNNConfig

    return CNNConfig(**kw)


def _check_config(**kw):
    from fedgen_debug.memorization.check import CheckConfig

    return CheckConfig(**kw)


def _monitor_privacy(**kw):
    from fedgen_debug.monitor.plan import PrivacyPlan

    return PrivacyPlan(**{"noise_multiplier": 1.0, "clients_per_round": 5, "clip": 0.1, **kw})


CONFIGS = [
    ("DPConfig clip", lambda x: _dp(clip=x), "clip must be > 0"),
    ("DPConfig noise_multiplier", lambda x: _dp(noise_multiplier=x), "noise_multiplier must be >= 0"),
    ("DPConfig clip_learning_rate", lambda x: _dp(clip_learning_rate=x), "clip_learning_rate must be > 0"),
    ("ClientConfig learning_rate", lambda x: _client(learning_rate=x), "client learning_rate must be > 0"),
    ("ClientConfig epochs", lambda x: _client(epochs=x), "client epochs must be >= 1"),
    ("ServerConfig momentum", lambda x: _server(momentum=x), r"server momentum must be in \[0, 1\)"),
    ("DPFedAvgPrivacy z", lambda x: _accounting(noise_multiplier=x), r"noise_multiplier \(z\) must be >= 0"),
    ("delta", _delta, r"delta must be in \(0, 1\)"),
    ("QuantileConfig noise_multiplier", lambda x: _quantile(noise_multiplier=x), "noise_multiplier must be > 0"),
    ("QuantileConfig learning_rate", lambda x: _quantile(learning_rate=x), "learning_rate must be > 0"),
    ("HeavyHittersConfig noise_multiplier", lambda x: _heavy_hitters(noise_multiplier=x),
     "noise_multiplier must be > 0"),
    ("PixelInversionBug fraction", _pixels, r"fraction must be in \[0, 1\]"),
    ("CNNConfig learning_rate", lambda x: _cnn(learning_rate=x), "learning_rate must be > 0"),
    ("CNNConfig conv_dropout", lambda x: _cnn(conv_dropout=x), r"conv_dropout must be in \[0, 1\)"),
    ("CheckConfig max_exposure_bits", lambda x: _check_config(max_exposure_bits=x), "max_exposure_bits must be > 0"),
    ("PrivacyPlan clip", lambda x: _monitor_privacy(clip=x), "privacy: clip must be > 0"),
]


@pytest.mark.parametrize("build, rule", [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_every_config_refuses_nan_with_the_same_message(build, rule):
    with pytest.raises(ValueError, match=f"^{rule}. Found nan.$"):
        build(NAN)


# A bounded interval refuses inf as out of range; the others name the finite rule.
UNBOUNDED = [c for c in CONFIGS if " in " not in c[2]]


@pytest.mark.parametrize("build, rule", [c[1:] for c in UNBOUNDED], ids=[c[0] for c in UNBOUNDED])
def test_every_config_refuses_inf(build, rule):
    name = rule.split(" must be ")[0]
    with pytest.raises(ValueError, match=f"^{name} must be finite. Found inf.$"):
        build(INF)


def test_a_valid_config_still_builds():
    assert _dp().noise_stddev == pytest.approx(0.02)
    assert math.isclose(_quantile().target_quantile, 0.5)
