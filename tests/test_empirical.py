"""Empirical ε from update canaries: the two-Gaussian ε against the Gaussian mechanism's closed form,
the Jeffreys lower bound, the canary directions and the DP sum that adds them."""

import math

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
from tensorflow_privacy.privacy.dp_query import test_utils

from fedgen_debug.privacy.empirical import (empirical_epsilon, epsilon_lower_bound, epsilon_two_gaussians,
                                            jeffreys_upper)
from fedgen_debug.training import update_canaries
from fedgen_debug.training.config import DPConfig
from fedgen_debug.training.dp_query import dp_query


def gaussian_mechanism_delta(epsilon, mu):
    """Balle & Wang 2018, Thm 8: δ(ε) of N(0,1) vs N(mu,1)."""
    return (scipy.stats.norm.cdf(-epsilon / mu + mu / 2)
            - math.exp(epsilon) * scipy.stats.norm.cdf(-epsilon / mu - mu / 2))


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0, 8.0])
def test_equal_stds_give_the_gaussian_mechanisms_epsilon(mu):
    delta = 1e-5
    eps = epsilon_two_gaussians(0.0, 2.0, 2.0 * mu, 2.0, delta)  # scale-free: only mu/sd matters
    assert gaussian_mechanism_delta(eps, mu) == pytest.approx(delta, rel=1e-5)


def test_two_gaussians_edge_cases():
    assert epsilon_two_gaussians(0.0, 1.0, 0.0, 1.0, 1e-5) == 0.0  # the same distribution
    narrow = epsilon_two_gaussians(0.0, 1.0, 0.0, 0.5, 1e-5)       # same mean, different spread: ε > 0
    wider = epsilon_two_gaussians(0.0, 1.0, 0.0, 0.1, 1e-5)
    assert 0 < narrow < wider
    # Symmetric in which one is the null.
    assert epsilon_two_gaussians(0.3, 1.0, 2.0, 0.4, 1e-6) == pytest.approx(epsilon_two_gaussians(2.0, 0.4, 0.3, 1.0, 1e-6))
    # Monotone in the shift.
    shifts = [epsilon_two_gaussians(0.0, 1.0, m, 1.2, 1e-5) for m in (0.5, 1.0, 2.0, 4.0)]
    assert shifts == sorted(shifts)
    with pytest.raises(ValueError, match="standard deviations"):
        epsilon_two_gaussians(0.0, 0.0, 1.0, 1.0, 1e-5)


def test_jeffreys_upper_limit():
    # 0 of 100: the Jeffreys upper 95% limit is the Beta(0.5, 100.5) quantile, ≈ 0.019.
    assert jeffreys_upper(0, 100, 0.05) == pytest.approx(scipy.stats.beta.ppf(0.95, 0.5, 100.5))
    assert jeffreys_upper(100, 100, 0.05) == 1.0
    assert 0.5 < jeffreys_upper(50, 100, 0.05) < 0.6


def test_lower_bound_is_below_the_true_epsilon_of_a_gaussian_mechanism():
    """Seen cosines drawn from N(mu/√d, 1/d) are a Gaussian mechanism with ε(mu): the 95% lower
    bound stays below it on (almost) every draw, and grows with mu."""
    d, delta = 10_000, 1e-5
    rng = np.random.default_rng(0)
    for mu in (1.0, 4.0):
        true_eps = epsilon_two_gaussians(0.0, 1.0, mu, 1.0, delta)
        bounds = [epsilon_lower_bound(rng.normal(mu, 1.0, 200) / math.sqrt(d), d, delta) for _ in range(40)]
        assert np.mean(np.array(bounds) > true_eps) <= 0.05 + 0.05  # alpha plus sampling slack
        assert np.median(bounds) > 0.3 * true_eps
    # No signal: the bound is 0 (or tiny) and the estimate is small.
    null = rng.normal(0, 1, 200) / math.sqrt(d)
    assert epsilon_lower_bound(null, d, delta) < 0.5
    # The estimate carries the fit's sampling error: n = 200 draws pin the mean to 1/√n and the std to
    # 1/√(2n) of a null std; both off by two standard errors are worth this much ε at small δ.
    n = null.size
    tolerance = epsilon_two_gaussians(0.0, 1.0, 2 / math.sqrt(n), 1.0 - 2 / math.sqrt(2 * n), delta)
    assert empirical_epsilon(null, d, delta).estimate < tolerance


def test_empirical_epsilon_fits_the_seen_cosines():
    d = 4_000
    seen = np.random.default_rng(1).normal(0.2, 0.01, 50)
    result = empirical_epsilon(seen, d, 1e-5)
    assert result.seen_mean == pytest.approx(seen.mean()) and result.seen_std == pytest.approx(seen.std(ddof=1))
    assert result.null_std == pytest.approx(d ** -0.5)
    assert result.estimate > 20 and result.lower_bound > 20  # 12.6 null stds away: nearly certain
    with pytest.raises(ValueError, match="parameters"):
        empirical_epsilon(seen, 500, 1e-5)
    with pytest.raises(ValueError, match="at least 2"):
        empirical_epsilon(seen[:1], d, 1e-5)


# ---- the canaries' directions and the DP sum ------------------------------------------------------

def test_directions_are_unit_seeded_and_nearly_orthogonal():
    shapes = [(40, 30), (30,), (1000,)]
    a = update_canaries.direction(shapes, seed=3, index=0)
    assert tf.linalg.global_norm(a).numpy() == pytest.approx(1.0, rel=1e-5)
    again = update_canaries.direction(shapes, seed=3, index=0)
    for x, y in zip(a, again):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    d = 40 * 30 + 30 + 1000
    cos = np.array([update_canaries.cosines([x.numpy() for x in a], 3, [i])[0] for i in range(1, 200)])
    assert cos.std() == pytest.approx(d ** -0.5, rel=0.15)  # the null: N(0, 1/d)
    assert abs(cos.mean()) < 4 * d ** -0.5 / math.sqrt(cos.size)
    assert update_canaries.cosines([x.numpy() for x in a], 3, [0])[0] == pytest.approx(1.0, rel=1e-5)
    other_seed = update_canaries.cosines([x.numpy() for x in a], 4, [0])[0]
    assert abs(other_seed) < 5 * d ** -0.5


def test_the_dp_sum_adds_exactly_s_times_each_sampled_canarys_direction():
    records = [tf.constant([3.0, 4.0]), tf.constant([0.1, -0.2])]  # norms 5 (clipped to 1) and 0.22
    clip, qn = 1.0, 4
    schedule = np.array([[True, False, True], [False, False, False], [False, True, False]])
    plan = update_canaries.UpdateCanaryPlan(schedule, seed=5, clip=clip)
    query = dp_query(DPConfig(qn, 0.0, clip), (0, 0), plan)
    clipped = np.array([0.6, 0.8]) + np.array([0.1, -0.2])
    state = None
    for t in range(3):
        result, state = test_utils.run_query(query, records, global_state=state)
        canaries = sum((clip * update_canaries.direction([(2,)], 5, i)[0].numpy() for i in np.flatnonzero(schedule[t])),
                       np.zeros(2))
        np.testing.assert_allclose(result.numpy(), (clipped + canaries) / qn, rtol=1e-6, atol=1e-7)
    # Without a plan, or with no canaries, the query is the plain one.
    plain, _ = test_utils.run_query(dp_query(DPConfig(qn, 0.0, clip), (0, 0)), records)
    np.testing.assert_allclose(plain.numpy(), clipped / qn, rtol=1e-6)


def test_plan_replays_the_loops_sampling():
    from fedgen_debug.runs.secret import RunSecret
    from fedgen_debug.training.config import TrainingConfig
    from fedgen_debug.privacy.sampling import sample_clients

    secret = RunSecret.fresh()
    ids = tuple(f"u{i}" for i in range(30)) + update_canaries.canary_ids(10)
    config = TrainingConfig(rounds=20, dp=DPConfig(8, 1.0, 0.5))
    plan = update_canaries.plan(ids, 10, config, secret)
    for t in range(20):
        sampled = sample_clients(ids, 8, secret.rng("sampling", t))
        expected = [f"update-canary-{i:05d}" in sampled for i in range(10)]
        assert plan.schedule[t].tolist() == expected
    # Each canary is sampled at the users' rate qN / N.
    assert plan.schedule.mean() == pytest.approx(8 / 40, abs=0.1)
    with pytest.raises(ValueError, match="clip"):
        update_canaries.plan(ids, 10, TrainingConfig(rounds=2, dp=DPConfig(8, 0.0, None)), secret)
    with pytest.raises(ValueError, match="not in the population"):
        update_canaries.plan(ids[:35], 10, config, secret)


# ---- end to end: a word-LM with update canaries, without and with noise --------------------------

def _train_with_update_canaries(tmp_path, z: str) -> str:
    """`train-lm --update-canaries 30` as the CLI trains it (`experiments.sweep.train_run`), in this process."""
    from conftest import provision_secret
    from fedgen_debug.experiments.sweep import train_run
    from fedgen_debug.training.lm_run import LMRun

    run_dir = str(tmp_path / f"z{z}")
    provision_secret(run_dir, f"test_empirical/z{z}")
    train_run(LMRun("word", "synthetic-text:users=20,seed=6", preset="test", vocab_size=200, rounds=12,
                    clients_per_round=10, noise_multiplier=float(z), update_canaries=30), run_dir)
    return run_dir


def test_empirical_epsilon_is_large_without_noise_and_below_the_accountants_with_it(tmp_path):
    """12 rounds, qN = 10 of N = 20 users + 30 canaries. Without noise every inserted direction stands
    out of the null (a manual run on seed=5 data measured ε̂ ≈ 84, lower bound ≈ 37); with z = 1 both
    fall below the accountant's ε (27.3 under replace-one; measured ε̂ ≈ 1.3)."""
    import json

    from conftest import run_cli
    from fedgen_debug.cli.memorization_cmd import format_report
    from fedgen_debug.memorization.empirical_check import empirical_privacy
    from fedgen_debug.runs import store
    from fedgen_debug.training.lm_run import load_lm, model_spec

    reports = {}
    for z in ("0", "1"):
        run_dir = _train_with_update_canaries(tmp_path, z)
        result = run_cli("check-memorization", run_dir, "--json", timeout=600)
        assert result.returncode == 0, result.stderr
        reports[z] = json.loads(result.stdout)["empirical_privacy"]
        releases = store.read_json(store.released(run_dir, store.PRIVACY))["releases"]
        (training,) = [r for k, r in releases.items() if k.endswith("/training")]
        assert training["population_size"] == 50  # the canaries count in N
    no_dp, dp = reports["0"], reports["1"]
    assert no_dp["accountant_epsilon"] == math.inf
    assert no_dp["estimate"] > 20 and no_dp["lower_bound"] > 10
    assert no_dp["seen_mean"] > 4 * no_dp["null_std"]
    assert dp["estimate"] < dp["accountant_epsilon"] and dp["lower_bound"] < dp["accountant_epsilon"]
    assert dp["estimate"] < no_dp["estimate"] / 10
    for report in reports.values():  # the never-inserted directions follow the null
        assert abs(report["unseen_mean"]) < 4 * report["null_std"] / math.sqrt(30)
        assert report["unseen_std"] == pytest.approx(report["null_std"], rel=0.4)
        assert report["seen"] == 30 and report["dimension"] > 1000

    # A broken accountant (claiming ε = 1 for the noiseless run) is caught by the lower bound.
    run_dir = str(tmp_path / "z0")
    model, vocab, run = load_lm(run_dir)
    initial = model_spec(run, vocab.num_ids).keras_model_fn()
    initial.build((None, run.max_length))
    privacy = store.read_json(store.released(run_dir, store.PRIVACY))
    lying = {**privacy, "releases": {k: {**r, "epsilon": 1.0} if k.endswith("/training") else r
                                     for k, r in privacy["releases"].items()}}
    caught = empirical_privacy([w.numpy() for w in initial.trainable_variables],
                               [w.numpy() for w in model.trainable_variables], 30, run.seed, lying)
    assert caught["lower_bound"] > caught["accountant_epsilon"] == 1.0
    report = {"run_dir": run_dir, "kind": "word", "canaries": [], "thakkar": [], "ramaswamy": [],
              "privacy": lying, "empirical_privacy": caught,
              "verdict": {"passed": False, "over_threshold": [], "max_exposure_bits": 12.0,
                          "empirical_bound_exceeds_accountant": True}}
    text = "\n".join(format_report(report))
    assert "the accounting does not hold" in text and "FAIL: the empirical ε lower bound is above" in text


def test_the_initial_weights_the_checker_rebuilds_are_the_processes(tmp_path):
    """The cosines use `initial − final`; the initial weights must be what training started from."""
    from fedgen_debug.training.lm_run import LMRun, model_spec
    from fedgen_debug.training import dp_fedavg

    run = LMRun("word", "synthetic-text:users=5", preset="test", seed=7)
    config = run.training_config(5)
    spec = model_spec(run, 50)
    process = dp_fedavg.build_process(spec, config, (1, 2))
    started = process.get_model_weights(process.initialize()).trainable
    rebuilt = spec.keras_model_fn()
    rebuilt.build((None, run.max_length))
    assert len(started) == len(rebuilt.trainable_variables)
    for a, b in zip(started, rebuilt.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())
