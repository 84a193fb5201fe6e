"""A plan's privacy over time (monitor/budget.py): each period charges what the scenarios charge for the
devices present then; the check says how many periods a budget affords, counting the ledger's past."""

import dataclasses
import math

import pytest

from fedgen_debug.data import spec as data_spec
from fedgen_debug.monitor.budget import check_budget, period_records, present_devices
from fedgen_debug.monitor.plan import plan_from_dict
from fedgen_debug.privacy.ledger import Ledger, composed_guarantee, population_key
from fedgen_debug.training import gan_run

DATA = "synthetic-images:writers=20,seed=6"


def _plan(periods=6, z=1.0, budget=1e9, select="random"):
    return plan_from_dict({"data": DATA, "periods": periods, "rounds_per_period": 4, "seed": 6,
                           "fleet": {"initial": 0.7, "join_rate": 0.3, "leave_rate": 0.2},
                           "privacy": {"noise_multiplier": z, "clients_per_round": 5, "clip": 0.1},
                           "budget": {"epsilon": budget}, "alerts": {"calibration_periods": 2},
                           "auxiliaries": [{"kind": "gan", "select": select, "preset": "test"}]})


@pytest.fixture(scope="module")
def client_ids():
    return tuple(data_spec.load_client_data(DATA).client_ids)


def test_each_period_charges_the_scenarios_records_for_the_devices_present(client_ids):
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.experiments import gan
    from fedgen_debug.training.loop import Population

    plan = _plan(select="by-user-accuracy:low")
    sizes = [len(present_devices(plan, client_ids, p)) for p in range(1, 7)]
    assert len(set(sizes)) > 1  # the fleet changes
    records = period_records(plan, client_ids, 3)
    # T4 low: the DP quantile, the DP count of labels present (the model's fit check), the DP selection
    # counts, training: each for the period's devices.
    assert [r.label for r in records] == ["T4 threshold: DP quantile 0.25", "DP aggregate labels-present",
                                          "DP aggregate selected", "GAN by-user-accuracy:low"]
    present = Population(population_key(DATA, client_ids), present_devices(plan, client_ids, 3))
    run = gan_run.GANRun(DATA, "by-user-accuracy:low", preset="test", seed=6, rounds=4, clients_per_round=5,
                     noise_multiplier=1.0, clip=0.1)
    expected = gan.release_records(run, present, RunSecret.fresh(), "")
    assert [r.events for r in records] == [r.events for r in expected]
    assert all(r.population_size == present.size for r in records)


def test_the_budget_affords_exactly_the_periods_whose_composition_fits(client_ids, tmp_path):
    plan = _plan(periods=6)
    ledger = Ledger(str(tmp_path / "ledger"))
    assert check_budget(plan, client_ids, ledger).budget_epsilon == 10.0  # a fresh ledger's default caps the plan
    ledger.set_budget("*", math.inf)
    unlimited = check_budget(plan, client_ids, ledger)
    assert unlimited.affordable_periods == 6 and unlimited.spent_before == 0.0
    eps = unlimited.epsilon_by_period
    assert list(eps) == sorted(eps) and eps[0] > 0
    # A budget between the 3rd and 4th period's composed ε affords 3, and says so.
    tight = check_budget(dataclasses.replace(plan, budget_epsilon=(eps[2] + eps[3]) / 2), client_ids, ledger)
    assert tight.affordable_periods == 3 and "affords 3 period(s)" in tight.message
    # More noise: more periods for the same budget.
    noisier = check_budget(dataclasses.replace(_plan(periods=6, z=2.0), budget_epsilon=(eps[2] + eps[3]) / 2),
                           client_ids, ledger)
    assert noisier.affordable_periods > 3
    # What the population already spent counts: the same budget affords fewer periods.
    ledger.spend(period_records(plan, client_ids, 1, ledger) + period_records(plan, client_ids, 2, ledger))
    after = check_budget(dataclasses.replace(plan, budget_epsilon=(eps[2] + eps[3]) / 2), client_ids, ledger)
    assert after.spent_before == pytest.approx(eps[1], rel=1e-6) and after.affordable_periods == 1
    # The ledger's own budget caps the plan's.
    key = population_key(DATA, client_ids, ledger)
    ledger.set_budget(key, eps[0] / 2)
    assert check_budget(plan, client_ids, ledger).affordable_periods == 0
    assert composed_guarantee(ledger.records(key), tight.delta).epsilon == pytest.approx(
        eps[1], rel=1e-6)


def test_the_composed_epsilon_after_each_period_is_the_hand_built_composition(client_ids, tmp_path):
    """The expected ε comes from a dp_accounting accountant built here, not from the budget module: each
    period releases the DP counts of the selected devices (two centred sums, users and images, with noise
    z = 4 × their √2/2 clip per coordinate: replace-one moves them by at most √2, so z/2 = 2 in sensitivity
    units) and trains 4 rounds of 5 of its present devices (fixed-size rounds: replace-one, z/2 = 0.5);
    a user present in every period is in all of them."""
    import dp_accounting
    from dp_accounting import rdp

    from fedgen_debug.experiments.gan import selection_counts

    plan = _plan(periods=4)
    ledger = Ledger(str(tmp_path / "ledger"))
    ledger.set_budget("*", math.inf)
    check = check_budget(plan, client_ids, ledger)
    assert check.delta == pytest.approx(0.01 / len(client_ids))   # the ledger's default: 0.01/N of all devices
    orders = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512]
    accountant = rdp.RdpAccountant(orders, dp_accounting.NeighboringRelation.REPLACE_ONE)
    for period in range(1, 5):
        present = len(present_devices(plan, client_ids, period))
        assert selection_counts(len(client_ids)).noise_multiplier == 4.0   # ≤ 100 devices: the reference z
        accountant.compose(dp_accounting.GaussianDpEvent(2.0))
        accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(
            present, min(5, present), dp_accounting.GaussianDpEvent(0.5)), 4))
        assert check.epsilon_by_period[period - 1] == pytest.approx(accountant.get_epsilon(check.delta), rel=1e-9)
