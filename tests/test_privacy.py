"""Accounting golden values (the paper's tables), parameter validation, realistic scenarios, ledger."""

import json

import pytest

from conftest import run_cli
from fedgen_debug.privacy.accounting import DPFedAvgPrivacy, dp_fedavg_epsilon, epsilon_of_events
from fedgen_debug.privacy.ledger import (PrivacyBudgetExceeded, PrivacyLedger, PrivacyRecord,
                                         event_from_json, event_to_json)
from fedgen_debug.privacy.realistic import realistic_scenario

STACK_OVERFLOW_LM = DPFedAvgPrivacy(clients_per_round=5000, population=342_477, noise_multiplier=1.0, rounds=2000)


def test_paper_stack_overflow_epsilon_is_9_22():
    guarantee = dp_fedavg_epsilon(STACK_OVERFLOW_LM, 2.92e-6, "paper")
    assert round(guarantee.epsilon, 2) == 9.22
    assert guarantee.epsilon == pytest.approx(9.2223, abs=5e-4)


# (qN, N, z, δ, ε) rows of augenstein2020 Table 3 and Table 13: T = 1000 rounds.
PAPER_GAN_ROWS = [
    (10, 425, 0.01, 2.35e-3, 9.99e6),
    (1000, 250_000, 1.0, 4.00e-8, 2.38),
    (1000, 1_250_000, 1.0, 8.00e-9, 1.48),
    (1000, 500_000, 1.0, 2.00e-8, 1.79),
    (1000, 1_708_824, 1.0, 5.85e-9, 1.47),
    (1000, 1_964_706, 1.0, 5.09e-9, 1.40),
    (1000, 2_000_000, 1.0, 5.00e-9, 1.39),
    (1000, 1_930_588, 1.0, 5.18e-9, 1.40),
]


@pytest.mark.parametrize("qn, n, z, delta, epsilon", PAPER_GAN_ROWS)
def test_paper_gan_tables_reproduce(qn, n, z, delta, epsilon):
    got = dp_fedavg_epsilon(DPFedAvgPrivacy(qn, n, z, 1000), delta, "paper").epsilon
    assert got == pytest.approx(epsilon, rel=0.005)


@pytest.mark.parametrize("params, delta, conversion, expected", [
    (STACK_OVERFLOW_LM, 2.92e-6, "tight", 8.4725),
    (DPFedAvgPrivacy(1000, 250_000, 1.0, 1000), 4e-8, "tight", 2.0190),
    (DPFedAvgPrivacy(5000, 342_477, 1.0, 2000, "poisson"), 2.92e-6, "paper", 5.1950),
    (DPFedAvgPrivacy(5000, 342_477, 1.0, 2000, "poisson"), 2.92e-6, "tight", 4.6169),
])
def test_pinned_epsilons(params, delta, conversion, expected):
    assert dp_fedavg_epsilon(params, delta, conversion).epsilon == pytest.approx(expected, abs=5e-4)


def test_tight_conversion_is_never_looser_and_epsilon_is_monotone():
    base = DPFedAvgPrivacy(100, 10_000, 1.0, 100)
    paper = dp_fedavg_epsilon(base, 1e-5, "paper").epsilon
    assert dp_fedavg_epsilon(base, 1e-5, "tight").epsilon <= paper
    import dataclasses
    assert dp_fedavg_epsilon(dataclasses.replace(base, rounds=200), 1e-5).epsilon > paper
    assert dp_fedavg_epsilon(dataclasses.replace(base, noise_multiplier=2.0), 1e-5).epsilon < paper
    assert dp_fedavg_epsilon(base, 1e-3).epsilon < paper


@pytest.mark.parametrize("kwargs, message", [
    (dict(clients_per_round=11, population=10), r"qN\) must be <= population \(N\), i.e. q <= 1. Found qN=11, N=10"),
    (dict(noise_multiplier=-1.0), r"noise_multiplier \(z\) must be >= 0. Found -1.0"),
    (dict(rounds=0), r"rounds \(T\) must be >= 1. Found 0"),
    (dict(clients_per_round=0), r"clients_per_round \(qN\) must be >= 1. Found 0"),
    (dict(sampling="with-replacement"), r"sampling must be one of"),
])
def test_bad_parameters_are_clear_errors(kwargs, message):
    params = dict(clients_per_round=5, population=10, noise_multiplier=1.0, rounds=3, **{})
    params.update(kwargs)
    with pytest.raises(ValueError, match=message):
        DPFedAvgPrivacy(**params)


def test_zero_noise_is_not_private():
    assert dp_fedavg_epsilon(DPFedAvgPrivacy(5, 10, 0.0, 3), 1e-5).epsilon == float("inf")
    assert dp_fedavg_epsilon(DPFedAvgPrivacy(5, 10, 0.0, 3), 1e-5, "tight").epsilon == float("inf")


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 2.0])
def test_delta_must_be_in_open_unit_interval(delta):
    with pytest.raises(ValueError, match=rf"delta must be in \(0, 1\). Found {delta}"):
        dp_fedavg_epsilon(DPFedAvgPrivacy(5, 10, 1.0, 3), delta)


def test_realistic_scenario_reproduces_table_3():
    simulation = DPFedAvgPrivacy(10, 425, 0.01, 1000)
    scaled = realistic_scenario(simulation, overall_populations=(3400, 2_000_000))
    assert scaled.scale == pytest.approx(100.0)
    assert (scaled.realistic.params.clients_per_round, scaled.realistic.params.population) == (1000, 250_000)
    assert scaled.realistic.guarantee.delta == pytest.approx(4e-8)
    assert scaled.realistic.guarantee.epsilon == pytest.approx(2.38, abs=0.005)
    assert scaled.simulation.guarantee.delta == pytest.approx(1 / 425)
    assert scaled.simulation.guarantee.epsilon == pytest.approx(9.99e6, rel=0.005)


def test_realistic_scenario_scales_population_with_clients_by_default():
    scaled = realistic_scenario(DPFedAvgPrivacy(10, 3400, 0.01, 1000))
    assert (scaled.realistic.params.clients_per_round, scaled.realistic.params.population) == (1000, 340_000)
    assert scaled.realistic.params.sampling_probability == pytest.approx(10 / 3400)
    with pytest.raises(ValueError, match="noise_multiplier must be > 0"):
        realistic_scenario(DPFedAvgPrivacy(10, 3400, 0.0, 1000))


# ---- ledger --------------------------------------------------------------------------------------

def _record(pop="synthetic-images:writers=3400", qn=10, n=3400, z=1.0, t=100, label=""):
    return PrivacyRecord(pop, n, "without-replacement", (DPFedAvgPrivacy(qn, n, z, t).dp_event(),), label)


def test_events_round_trip_through_json():
    event = STACK_OVERFLOW_LM.dp_event()
    assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event


def test_ledger_composes_runs_of_the_same_population(tmp_path):
    a, b, other = _record(t=100, label="low"), _record(t=300, label="high"), _record(pop="synthetic-text", n=500)
    a.write(str(tmp_path / "gan-low"))
    b.write(str(tmp_path / "gan-high"))
    other.write(str(tmp_path / "lm" / "char"))
    totals = {t.population: t for t in PrivacyLedger(str(tmp_path)).totals(delta=1e-5)}
    images = totals["synthetic-images:writers=3400"]
    assert images.runs == ("gan-high", "gan-low")
    expected = epsilon_of_events([a.events[0], b.events[0]], 1e-5).epsilon
    assert images.guarantee.epsilon == pytest.approx(expected)
    assert images.guarantee.epsilon > epsilon_of_events(list(b.events), 1e-5).epsilon
    # The same composition as one run of T = 400 rounds.
    assert images.guarantee.epsilon == pytest.approx(
        dp_fedavg_epsilon(DPFedAvgPrivacy(10, 3400, 1.0, 400), 1e-5).epsilon, rel=1e-9)
    assert totals["synthetic-text"].runs == ("lm/char",)
    assert totals["synthetic-text"].guarantee.delta == 1e-5


def test_ledger_budget_refuses_a_run_that_would_exceed_it(tmp_path):
    _record(qn=300, n=1000, t=100).write(str(tmp_path / "first"))
    one = PrivacyLedger(str(tmp_path)).totals(delta=1e-5)[0].guarantee.epsilon
    (tmp_path / "privacy_budget.json").write_text(json.dumps({"*": {"epsilon": one * 1.2, "delta": 1e-5}}))
    ledger = PrivacyLedger(str(tmp_path))
    assert ledger.check_budget(_record(qn=300, n=1000, t=5)).guarantee.epsilon < one * 1.2
    with pytest.raises(PrivacyBudgetExceeded, match=r"over the budget .*\(1 earlier run\(s\)\). Refusing to start"):
        ledger.check_budget(_record(qn=300, n=1000, t=300))
    assert ledger.totals()[0].guarantee.delta == 1e-5  # the budget's δ is the default


def test_ledger_rejects_bad_budget_and_missing_dir(tmp_path):
    (tmp_path / "privacy_budget.json").write_text('{"*": {"epsilon": -1, "delta": 1e-5}}')
    with pytest.raises(ValueError, match="invalid privacy budget"):
        PrivacyLedger(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="not a directory of runs"):
        PrivacyLedger(str(tmp_path / "nope"))


def test_ledger_refuses_to_mix_neighbouring_relations(tmp_path):
    _record().write(str(tmp_path / "a"))
    poisson = DPFedAvgPrivacy(10, 3400, 1.0, 5, "poisson")
    PrivacyRecord("synthetic-images:writers=3400", 3400, "poisson", (poisson.dp_event(),)).write(str(tmp_path / "b"))
    with pytest.raises(ValueError, match="mixes samplings"):
        PrivacyLedger(str(tmp_path)).totals()


# ---- CLI -----------------------------------------------------------------------------------------

def test_privacy_cli_json_and_realistic(tmp_path):
    result = run_cli("privacy", "--clients-per-round", "5000", "--population", "342477", "--noise-multiplier",
                     "1.0", "--rounds", "2000", "--delta", "2.92e-6", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert round(out["epsilon"], 2) == 9.22 and out["delta"] == 2.92e-6 and out["conversion"] == "paper"

    result = run_cli("privacy", "--clients-per-round", "10", "--population", "425", "--noise-multiplier", "0.01",
                     "--rounds", "1000", "--delta", "2.35e-3", "--realistic", "--overall-populations", "3400",
                     "2000000")
    assert result.returncode == 0, result.stderr
    assert "realistic scenario (×100): ε = 2.38 at δ = 4e-08" in result.stdout

    _record(t=50).write(str(tmp_path / "run1"))
    result = run_cli("privacy", "--ledger", str(tmp_path), "--json")
    assert json.loads(result.stdout)["populations"][0]["runs"] == ["run1"]

    result = run_cli("privacy", "--clients-per-round", "20", "--population", "10", "--noise-multiplier", "1",
                     "--rounds", "5", "--delta", "1e-5")
    assert result.returncode == 2 and "q <= 1" in result.stderr and "Traceback" not in result.stderr
