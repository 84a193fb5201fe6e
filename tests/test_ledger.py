"""The privacy ledger: composition, budgets, and every bypass the issue found, as attacks that must fail
(non-canonical population names, per-directory ledgers, refunds by deletion, unchecked resumes, no
budget file meaning no check, a quantile spending before the check, δ ≥ 1/N, edited history).
The second review's (a hash of the data as the key, budget resets by editing or converting the data,
re-chained and truncated ledgers) are in test_attacks.py."""

import json
import math
import os
import shutil

import pytest

from conftest import run_cli
from fedgen_debug.privacy.accounting import DPFedAvgPrivacy, epsilon_of_events
from fedgen_debug.privacy.ledger import (DEFAULT_BUDGET_EPSILON, LedgerCorrupted, PrivacyBudgetExceeded,
                                         PrivacyRecord, event_from_json, event_to_json, population_key)
from fedgen_debug.training import gan_run


def _record(release_id, pop="synthetic-images:seed=0", qn=10, n=3400, z=1.0, t=100):
    return PrivacyRecord(pop, n, "replace-one", (DPFedAvgPrivacy(qn, n, z, t).dp_event(),), f"run {release_id}",
                         release_id)


def test_events_round_trip_through_json():
    event = DPFedAvgPrivacy(5000, 342_477, 1.0, 2000).dp_event()
    assert event_from_json(json.loads(json.dumps(event_to_json(event)))) == event


def test_spend_composes_a_population_and_is_idempotent_by_release(fresh_ledger):
    fresh_ledger.set_budget("*", 1e6)
    a, b, other = _record("a", t=100), _record("b", t=300), _record("c", pop="synthetic-text:seed=0", n=500)
    fresh_ledger.spend([a, b])
    fresh_ledger.spend(other)
    totals = {t.population: t for t in fresh_ledger.totals()}
    images = totals["synthetic-images:seed=0"]
    delta = 0.01 / 3400
    assert images.guarantee.delta == pytest.approx(delta)
    assert images.guarantee.epsilon == pytest.approx(epsilon_of_events([a.events[0], b.events[0]], delta).epsilon)
    # The same composition as one run of T = 400 rounds.
    assert images.guarantee.epsilon == pytest.approx(
        epsilon_of_events([DPFedAvgPrivacy(10, 3400, 1.0, 400).dp_event()], delta).epsilon, rel=1e-9)
    # Charging a release again (a resumed run) charges nothing; the same id with other events is refused.
    fresh_ledger.spend(a)
    assert len(fresh_ledger.records()) == 3
    with pytest.raises(ValueError, match="in the ledger with other events"):
        fresh_ledger.spend(_record("a", t=5))


def test_attack_no_budget_file_no_longer_means_no_check(fresh_ledger):
    """Without any budget entry, a population has the default budget ε = 10 at δ = 0.01/N."""
    cheap, costly = _record("cheap", z=5.0, t=10), _record("costly", qn=300, n=1000, z=0.5, t=500)
    assert cheap.guarantee().epsilon < DEFAULT_BUDGET_EPSILON < costly.guarantee().epsilon
    fresh_ledger.spend(cheap)
    with pytest.raises(PrivacyBudgetExceeded, match=r"over the default budget \(ε = 10\)"):
        fresh_ledger.spend(costly)
    assert [r.release_id for r in fresh_ledger.records()] == ["cheap"]
    # A run charges its DP counts with its training at once: the refusal names them all, not the first alone.
    with pytest.raises(PrivacyBudgetExceeded, match=r": run count, run costly, run cheap2 \(charged together\) "
                                                    r"would bring the total to"):
        fresh_ledger.spend([_record("count", z=5.0, t=1), costly, _record("cheap2", z=5.0, t=10)])


def test_a_release_that_reaches_the_budget_exactly_is_charged_and_one_a_hair_over_is_not(fresh_ledger):
    """The budget is "ε ≤ budget": a release whose total equals it fits; the next float below refuses it."""
    record = _record("exact", z=2.0, t=50)
    epsilon = fresh_ledger.total(record.population, record).guarantee.epsilon
    fresh_ledger.set_budget("*", math.nextafter(epsilon, 0.0))
    with pytest.raises(PrivacyBudgetExceeded):
        fresh_ledger.spend(record)
    assert fresh_ledger.records() == []
    fresh_ledger.set_budget("*", epsilon)
    fresh_ledger.spend(record)
    assert [r.release_id for r in fresh_ledger.records()] == ["exact"]


def test_all_or_nothing_and_mixed_relations_are_refused(fresh_ledger):
    fresh_ledger.set_budget("*", 5.0)
    with pytest.raises(PrivacyBudgetExceeded):
        fresh_ledger.spend([_record("small", z=5.0, t=10), _record("big", qn=300, n=1000, z=0.5, t=500)])
    assert fresh_ledger.records() == []  # the small one was not charged alone
    fresh_ledger.set_budget("*", 1e6)
    fresh_ledger.spend(_record("a"))
    poisson = DPFedAvgPrivacy(10, 3400, 1.0, 5, "poisson")
    with pytest.raises(ValueError, match="mixes add/remove and replace-one"):
        fresh_ledger.spend(PrivacyRecord("synthetic-images:seed=0", 3400, "add-remove", (poisson.dp_event(),), "p", "p"))


def test_attack_non_canonical_population_names_are_one_population(tmp_path, fresh_ledger):
    key = population_key("synthetic-text:users=1000")
    assert key == population_key("synthetic-text:seed=0,users=1000") and key.startswith("users-")
    # users=300 are the first 300 of users=1000: another population, but the same people (they compose).
    assert population_key("synthetic-text:users=300") != key
    assert fresh_ledger.registry.members(population_key("synthetic-text:users=300")) < fresh_ledger.registry.members(key)
    assert population_key("synthetic-text:users=300,seed=1") != population_key("synthetic-text:users=300")
    assert population_key("synthetic-images:writers=5") != population_key("synthetic-text:users=5")
    # A file: relative or absolute path, a copy, another filter option: the same users.
    data = tmp_path / "users.jsonl"
    data.write_text('{"client_id": "a", "text": "hello there"}\n{"client_id": "b", "text": "bye"}\n')
    shutil.copy(data, tmp_path / "copy.jsonl")
    os.chdir(tmp_path)
    keys = {population_key(f"jsonl:{p}") for p in ("users.jsonl", str(data), "copy.jsonl", "./users.jsonl")}
    assert len(keys) == 1
    # TFF's datasets are the data owner's users, named by their ids, like any file.
    assert population_key("tff-emnist:/a", ["f0000_14"]) == population_key("jsonl:/b", ["f0000_14"])


def test_overlapping_populations_compose_per_user(fresh_ledger):
    """A release on users 0-299 and one on users 0-999 compose for users 0-299 (the worst off), and a
    budget on either population counts both."""
    small, large = population_key("synthetic-text:users=300"), population_key("synthetic-text:users=1000")
    other = population_key("synthetic-text:users=1000,seed=1")
    a, b = _record("a", pop=small, n=300, qn=10), _record("b", pop=large, n=1000, qn=10)
    c = _record("c", pop=other, n=1000, qn=10)
    fresh_ledger.set_budget("*", 1e6)
    fresh_ledger.spend([a, b, c])
    totals = {t.population: t for t in fresh_ledger.totals()}
    delta_small, delta_large = 0.01 / 300, 0.01 / 1000
    assert totals[small].overlaps == (large,) and totals[large].overlaps == (small,)
    assert totals[small].guarantee.epsilon == pytest.approx(
        epsilon_of_events([a.events[0], b.events[0]], delta_small).epsilon)
    assert totals[large].guarantee.epsilon == pytest.approx(
        epsilon_of_events([a.events[0], b.events[0]], delta_large).epsilon)
    assert totals[other].overlaps == () and totals[other].guarantee.epsilon == pytest.approx(
        epsilon_of_events([c.events[0]], delta_large).epsilon)
    # A budget set on the superset covers its subset's users: a release on the subset is refused.
    fresh_ledger.set_budget(large, totals[large].guarantee.epsilon * 1.01)
    with pytest.raises(PrivacyBudgetExceeded, match=large):
        fresh_ledger.spend(_record("d", pop=small, n=300, qn=10))
    fresh_ledger.spend(_record("e", pop=other, n=1000, qn=10))  # other people: not touched


def test_attack_runs_in_other_directories_and_deleted_runs_still_count(tmp_path, fresh_ledger):
    """The ledger is one file in one place: a run under another parent directory, or a deleted one,
    still counts (the old ledger read only the parent of --out, and deleting a run refunded it)."""
    from toy_training import run, train_config

    fresh_ledger.set_budget("toy-population", 1e6)
    first = run(tmp_path / "team-a" / "run", train_config(rounds=2))
    shutil.rmtree(tmp_path / "team-a")
    one = first.run_record.guarantee(fresh_ledger.total("toy-population").guarantee.delta).epsilon
    fresh_ledger.set_budget("toy-population", one * 1.5)
    with pytest.raises(PrivacyBudgetExceeded, match="Refusing it"):
        run(tmp_path / "team-b" / "run", train_config(rounds=2))
    assert not (tmp_path / "team-b" / "run").exists()


def test_attack_a_resumed_run_is_revalidated(tmp_path, fresh_ledger, monkeypatch):
    from toy_training import run, train_config

    fresh_ledger.set_budget("toy-population", 1e6)
    result = run(tmp_path / "r", train_config(rounds=2))
    # Under a budget that no longer covers it, a resumed (or re-run) training refuses to go on.
    fresh_ledger.set_budget("toy-population", result.privacy.guarantee.epsilon / 2)
    with pytest.raises(PrivacyBudgetExceeded, match="the budget no longer covers"):
        run(tmp_path / "r", train_config(rounds=2))
    # Against another (empty) ledger, the run's record is charged there before it goes on.
    other = tmp_path / "other-ledger"
    monkeypatch.setenv("FEDGEN_DEBUG_LEDGER", str(other))
    from fedgen_debug.privacy.ledger import Ledger

    Ledger(str(other)).set_budget("*", 1e6)
    run(tmp_path / "r", train_config(rounds=2))
    assert [r.release_id for r in Ledger(str(other)).records()] == [result.run_record.release_id]


def test_attack_the_quantile_is_checked_before_it_is_computed(tmp_path, fresh_ledger, monkeypatch):
    """A T4 threshold's DP quantile is charged with the run's other releases, before any is computed:
    a budget that does not cover them leaves nothing computed and nothing released."""
    from fedgen_debug.experiments import gan

    computed = []
    monkeypatch.setattr(gan, "dp_quantile", lambda *a, **k: computed.append(1))
    fresh_ledger.set_budget("*", 1.0)
    with pytest.raises(PrivacyBudgetExceeded):
        gan.train_gan(gan_run.GANRun("synthetic-images:writers=12,seed=3", "by-user-accuracy:low", 0.5, "test", rounds=1),
                      str(tmp_path / "g"))
    assert computed == [] and not (tmp_path / "g").exists() and fresh_ledger.records() == []


def test_delta_must_be_below_one_over_n(fresh_ledger):
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        fresh_ledger.set_budget("*", 5.0, delta=0.99 + 0.02)
    fresh_ledger.set_budget("*", 5.0, delta=0.5)
    with pytest.raises(ValueError, match=r"delta must be < 1/N = 0.000294 \(N = 3400\)"):
        fresh_ledger.spend(_record("a"))


def test_attack_editing_the_ledger_is_detected(fresh_ledger):
    fresh_ledger.set_budget("*", 1e6)
    for name in ("a", "b", "c"):
        fresh_ledger.spend(_record(name))
    lines = open(fresh_ledger.path).read().splitlines()
    with open(fresh_ledger.path, "w") as f:  # drop the middle release: a refund attempt
        f.write("\n".join(lines[:2] + lines[3:]) + "\n")
    with pytest.raises(LedgerCorrupted, match="removed or reordered"):
        fresh_ledger.totals()
    with open(fresh_ledger.path, "w") as f:  # or lower one's cost in place
        f.write("\n".join(lines).replace('"count": 100', '"count": 1', 1) + "\n")
    with pytest.raises(LedgerCorrupted, match="does not verify"):
        fresh_ledger.spend(_record("d"))


def test_a_crash_between_the_line_and_the_head_is_not_corruption(fresh_ledger):
    fresh_ledger.set_budget("*", 1e6)
    fresh_ledger.spend(_record("a"))
    head = fresh_ledger.keys.read_head()
    fresh_ledger.spend(_record("b"))
    fresh_ledger.keys.write_head(*head)  # the head write of b never happened
    assert [r.release_id for r in fresh_ledger.records()] == ["a", "b"]
    fresh_ledger.spend(_record("c"))
    assert fresh_ledger.keys.read_head()[0] == 4


def test_ledger_cli_shows_totals_and_sets_canonical_budgets(fresh_ledger):
    for without in ((), ("--reason", "  ")):   # the data owner's decision is recorded with its reason
        refused = run_cli("ledger", "budget", "synthetic-text:users=300", "--epsilon", "50", *without)
        assert refused.returncode == 2 and "reason" in refused.stderr and "Traceback" not in refused.stderr
    result = run_cli("ledger", "budget", "synthetic-text:users=300", "--epsilon", "50", "--reason", "test")
    assert result.returncode == 0, result.stderr
    key = population_key("synthetic-text:users=300,seed=0")
    assert f"budget of {key}: ε = 50 at δ = 0.01/N" in result.stdout
    assert fresh_ledger.budget(key, 300).epsilon == 50
    fresh_ledger.spend(_record("x", pop=key, n=300, z=3.0, t=20, qn=10))
    result = run_cli("ledger", "--json")
    assert result.returncode == 0, result.stderr
    (population,) = json.loads(result.stdout)["populations"]
    assert population["population"] == key and population["budget"]["epsilon"] == 50
    assert math.isfinite(population["epsilon"]) and population["releases"][0]["label"] == "run x"
    assert f"{key} (N=300)" in run_cli("ledger").stdout


# The RDP orders of `privacy.accounting`, spelled out: the goldens below are dp_accounting's own accountant.
RDP_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512]


def _accountant(relation, *events):
    from dp_accounting import rdp

    accountant = rdp.RdpAccountant(RDP_ORDERS, relation)
    for event in events:
        accountant.compose(event)
    return accountant


def test_a_population_charged_at_two_sizes_is_accounted_at_the_larger_and_its_delta(fresh_ledger):
    """A monitor charges each period for the devices present. The total takes the largest N (δ = 0.01/100), never
    the smaller N's looser δ = 0.01/50, which would lower the ε a data owner reads."""
    import dp_accounting

    fresh_ledger.set_budget("*", 1e6)
    gaussian = dp_accounting.GaussianDpEvent(1.0)
    fresh_ledger.spend([PrivacyRecord("p", 100, "replace-one", (gaussian,), "period 1", "r1"),
                        PrivacyRecord("p", 50, "replace-one", (gaussian,), "period 2", "r2")])
    total = fresh_ledger.total("p")
    expected = _accountant(dp_accounting.NeighboringRelation.REPLACE_ONE, gaussian, gaussian).get_epsilon(1e-4)
    assert (total.population_size, total.budget.delta) == (100, 1e-4)
    assert total.guarantee.epsilon == pytest.approx(expected, rel=1e-9) and expected == pytest.approx(6.30724, abs=1e-5)


def test_a_poisson_sampled_run_is_composed_under_add_remove_neighbours(fresh_ledger):
    import dp_accounting
    from fedgen_debug.privacy.ledger import composed_guarantee

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 100)
    record = PrivacyRecord("p", 1000, "add-remove", (event,), "training", "t")
    accountant = _accountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, event)
    assert composed_guarantee([record], 1e-5).epsilon == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-9)
    fresh_ledger.set_budget("*", 1e6)
    charged = fresh_ledger.spend(record)["p"].guarantee.epsilon
    assert charged == pytest.approx(accountant.get_epsilon(0.01 / 1000), rel=1e-9)


def test_a_release_whose_extra_delta_takes_all_of_delta_is_infinite_epsilon_and_refused_as_over_budget(fresh_ledger):
    import dp_accounting
    from fedgen_debug.privacy.ledger import composed_guarantee

    record = PrivacyRecord("p", 100, "replace-one", (dp_accounting.GaussianDpEvent(1.0),), "heavy hitters", "hh",
                           extra_delta=1e-4)
    guarantee = composed_guarantee([record], 1e-4)
    assert math.isinf(guarantee.epsilon) and guarantee.delta == 1e-4
    with pytest.raises(PrivacyBudgetExceeded, match="ε = ∞"):   # what the CLI and the monitor catch
        fresh_ledger.spend(record)
    assert fresh_ledger.records() == []


def test_records_of_a_population_are_its_own_and_delta_at_one_over_n_is_refused(fresh_ledger):
    import dp_accounting
    from fedgen_debug.privacy.accounting import check_delta

    fresh_ledger.set_budget("*", 1e6)
    gaussian = dp_accounting.GaussianDpEvent(5.0)
    fresh_ledger.spend(PrivacyRecord("p", 100, "replace-one", (gaussian,), "a", "ra"))
    fresh_ledger.spend(PrivacyRecord("q", 100, "replace-one", (gaussian,), "b", "rb"))
    assert [r.release_id for r in fresh_ledger.records("p")] == ["ra"]
    assert [r.release_id for r in fresh_ledger.records("q")] == ["rb"]
    # δ = 1/N exactly is what publishing one random user's data meets: refused, at the function and in the ledger.
    check_delta(math.nextafter(1 / 3400, 0.0), 3400)
    with pytest.raises(ValueError, match="delta must be < 1/N"):
        check_delta(1 / 3400, 3400)
    fresh_ledger.set_budget("r", 1e6, delta=1 / 100)
    with pytest.raises(ValueError, match="delta must be < 1/N"):
        fresh_ledger.spend(PrivacyRecord("r", 100, "replace-one", (gaussian,), "c", "rc"))
    assert [r.release_id for r in fresh_ledger.records()] == ["ra", "rb"]
