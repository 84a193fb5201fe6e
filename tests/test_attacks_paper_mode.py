"""Attacks on selection 'paper' (issue 53, item 4): how many users a selector picked (M) must reach the
modeler only as a DP count. Each attack runs the smallest paper-mode training through the CLI, where
exactly 1, or 7 of 12, users qualify, and looks for M in every released file, the ledger (the app
shows it) and what the command printed; before the fix privacy.json and the ledger said
`population_size` M, and the CLI crashed printing ε's realistic line ("delta must be in (0, 1)") or
refused with "exceeds the population (1 clients)". Then the accounting of training over the DP lower
bound of M (`privacy.subpopulation`), with golden numbers computed by hand."""

import json
import math
import os
import re

import dp_accounting
import numpy as np
import pytest

from conftest import provision_secret, run_cli
from fedgen_debug.privacy.accounting import RDP_ORDERS, epsilon_of_events, rdp_of_event
from fedgen_debug.privacy.ledger import Ledger, PrivacyRecord, composed_guarantee
from fedgen_debug.privacy.subpopulation import PaperSelectionRefused, SubpopulationBound, pad_population
from fedgen_debug.runs import store
from fedgen_debug.privacy.sampling import sample_clients

USERS = 12
# Words near which a printed M would say how many qualified.
SIZE_WORDS = re.compile(r"select|qualif|user|population|client|subpopulation|writer", re.IGNORECASE)
SIZE_KEYS = re.compile(r"population|users|select|qualif")


@pytest.fixture
def ledger(tmp_path, monkeypatch) -> Ledger:
    """A ledger of this test's own (the CLI inherits it), without limit: the runs have ε in the hundreds."""
    home = str(tmp_path / "ledger")
    monkeypatch.setenv("FEDGEN_DEBUG_LEDGER", home)
    Ledger(home).set_budget("*", math.inf, reason="paper-mode attack")
    return Ledger(home)


def _text(tmp_path, qualified: int) -> tuple[str, str]:
    """(data spec, vocabulary source): 12 users with the same three sentences; the first `qualified` of
    them also write a word outside the vocabulary, the char-LM's only training data (T3)."""
    data, vocab = tmp_path / f"text-{qualified}.jsonl", tmp_path / "vocab.txt"
    with open(data, "w") as f:
        for user in range(USERS):
            for _ in range(3):
                words = "the cat sat on the mat" + (" zorbliq" if user < qualified else "")
                f.write(json.dumps({"client_id": f"u{user:02d}", "text": words}) + "\n")
    vocab.write_text("the\ncat\nsat\non\nmat\n")
    return f"jsonl:{data}", f"file:{vocab}"


def _train_lm(tmp_path, qualified: int, secret_name: str, clients_per_round: int = 2):
    data, vocab = _text(tmp_path, qualified)
    out = str(tmp_path / secret_name)
    provision_secret(out, f"test_attacks_paper_mode/{secret_name}")
    result = run_cli("train-lm", "--kind", "char", "--data", data, "--vocab", vocab, "--preset", "test",
                     "--rounds", "2", "--clients-per-round", str(clients_per_round), "--selection", "paper",
                     "--out", out)
    return out, result


def _json_sizes(value, key: str = ""):
    """Every number of `value` under a key that names a size of users (population_size, users, ...)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_sizes(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _json_sizes(v, key)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and SIZE_KEYS.search(key):
        yield key, value


def _printed_sizes(text: str, count: int) -> list[str]:
    """Lines that print `count` as a whole number (not inside 0.125, 1e-05, 1,000 or an id, and not a privacy
    parameter: "T = 1): ε ≤ 1 from N = ... users (qN = 200, z = 1" names rounds, a target ε and a noise
    multiplier) within 40 characters of a word about users, selection or the population."""
    hits = []
    for line in text.splitlines():
        for number in re.finditer(rf"(?<![\w.])(?<!ε ≤ )(?<!ε = )(?<!z = )(?<!T = )(?<!\d,){count}(?![\w.]|\.\d|,\d{{3}})", line):
            window = line[max(0, number.start() - 40):number.end() + 40]
            if SIZE_WORDS.search(window):
                hits.append(line)
    return hits


def _assert_exact_count_not_released(count: int, run_dir: str, ledger: Ledger, result, tmp_path) -> None:
    released = os.path.join(run_dir, store.RELEASED)
    for root, _, files in os.walk(released):
        for name in files:
            if name.endswith(".json"):
                sizes = list(_json_sizes(json.load(open(os.path.join(root, name)))))
                assert count not in [v for _, v in sizes], f"{name} holds the exact selected count {count}: {sizes}"
    records = [r.to_json() for r in ledger.records()]
    assert records and count not in [v for _, v in _json_sizes(records)], records
    shown = [total.as_dict() for total in ledger.totals()]   # what `ledger show` and the app's privacy page list
    assert count not in [v for _, v in _json_sizes(shown)], shown
    # The run directory's own path holds digits: only what the command says is checked.
    printed = (result.stdout + result.stderr).replace(str(tmp_path), "<tmp>")
    assert not _printed_sizes(printed, count), _printed_sizes(printed, count)


def _assert_trained_or_refused(result) -> bool:
    """True if the run trained; otherwise it refused with one clear error naming the DP count."""
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 0:
        return True
    errors = [line for line in result.stderr.splitlines() if line.startswith("fedgen-debug: error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert "the DP count of qualifying users is" in errors[0] and "refusing" in errors[0], errors[0]
    return False


def _released_users(run_dir: str) -> float:
    counts = store.read_json(store.released(run_dir, store.POPULATION))
    assert counts["dp"] is True and counts["users_stddev"] > 0
    return counts["users"]


def test_attack_one_qualified_user_is_never_released_and_the_count_is_noised(tmp_path, ledger):
    # Two secrets, pinned: one DP count is above qN = 1 (the run trains; before the fix it crashed
    # printing ε's realistic-scale line, its δ = 1/N computed at N = M = 1), the other below qN = 2 (refused,
    # saying so; before, "exceeds the population (1 clients)"). Neither says 1.
    runs = [_train_lm(tmp_path, 1, "lm-1-b", clients_per_round=1), _train_lm(tmp_path, 1, "lm-1-a")]
    for run_dir, result in runs:
        _assert_exact_count_not_released(1, run_dir, ledger, result, tmp_path)
    assert [_assert_trained_or_refused(result) for _, result in runs] == [True, False]
    first, second = (_released_users(run_dir) for run_dir, _ in runs)
    assert first != second  # noised
    # Ground truth, on the server's side: exactly one user qualified.
    assert store.read_json(store.server(runs[0][0], store.SELECTION))["client_ids"] == ["u00"]
    privacy = json.load(open(store.released(runs[0][0], store.PRIVACY)))
    (training,) = [r for k, r in privacy["releases"].items() if k.endswith("/training")]
    assert training["population_size"] == USERS and math.isfinite(training["epsilon"])
    assert "deployment-equivalent (noise on the mean update σ/S = " in runs[0][1].stdout  # printed, at N = M = 1


def test_attack_seven_of_twelve_qualified_users_are_never_released(tmp_path, ledger):
    run_dir, result = _train_lm(tmp_path, 7, "lm-7-a")
    _assert_exact_count_not_released(7, run_dir, ledger, result, tmp_path)
    assert _assert_trained_or_refused(result), result.stderr
    assert len(store.read_json(store.server(run_dir, store.SELECTION))["client_ids"]) == 7  # ground truth
    assert "DP aggregate qualified" in result.stdout  # the count is a release of its own, with its ε


def test_attack_one_qualified_writer_of_a_paper_mode_gan_is_never_released(tmp_path, ledger):
    # The pixel-inversion bug on 1 of 12 writers: the public primary CNN classifies that writer's
    # inverted images at 0.15, every other writer at 0.24 or more, so T4 below 0.2 picks exactly one.
    out = str(tmp_path / "gan-1-a")
    provision_secret(out, "test_attacks_paper_mode/gan-1-a")
    result = run_cli("train-gan", "--data", "synthetic-images:writers=12,seed=0", "--bug", "invert:0.0834",
                     "--select", "by-user-accuracy:low,threshold=0.2", "--preset", "test", "--primary-classes", "10",
                     "--rounds", "1", "--clients-per-round", "2", "--selection", "paper", "--out", out)
    _assert_exact_count_not_released(1, out, ledger, result, tmp_path)
    assert _assert_trained_or_refused(result), result.stderr
    assert len(store.read_json(store.server(out, store.SELECTION))["client_ids"]) == 1  # ground truth


# ---- the accounting over the DP lower bound, by hand ----

def test_lower_bound_and_its_failure_probability_by_hand():
    # N = 100: β = 0.1 × 0.01/100 = 1e-5; t = Φ⁻¹(1 − 1e-5) = 4.26489 (normal table).
    bound = SubpopulationBound(count=40.3, stddev=2.0, population_size=100, clients_per_round=5)
    assert bound.failure_probability == pytest.approx(1e-5)
    assert bound.z_score == pytest.approx(4.26489, abs=1e-5)
    assert bound.lower_bound == 31                       # ⌊40.3 − 8.5298⌋ = ⌊31.77⌋
    assert bound.sampling_probability() == pytest.approx(5 / 31)
    # The failure event {⌊M̃ − tσ⌋ > M} is {M + σZ ≥ M + 1 + tσ}:
    # P = Φ̄(t + 1/σ) = Φ̄(4.76489) ≈ 9.45e-7 ≤ β.
    from statistics import NormalDist
    assert 1 - NormalDist().cdf(bound.z_score + 1 / bound.stddev) == pytest.approx(9.45e-7, rel=0.01)
    # A weak count: the bound falls back to qN (q = 1); a count below qN refuses, naming only the DP count.
    assert SubpopulationBound(5.0, 2.0, 100, 5).lower_bound == 5
    with pytest.raises(PaperSelectionRefused, match=r"4\.9 ± 2\.0.*\(qN = 5\)"):
        SubpopulationBound(4.9, 2.0, 100, 5)


def test_training_over_the_lower_bound_adds_its_failure_probability_to_delta():
    bound = SubpopulationBound(count=40.3, stddev=2.0, population_size=100, clients_per_round=5)
    gaussian = dp_accounting.GaussianDpEvent(0.5)   # z = 1 under replace-one (sensitivity 2S)
    event, extra = bound.training_event(1.0, 10, "without-replacement", "replace-one", gaussian)
    assert event == dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(31, 5, gaussian), 10)
    assert extra == pytest.approx(1e-5)
    # The ledger converts RDP at δ − β: at the default δ = 0.01/100 = 1e-4, at 9e-5.
    record = PrivacyRecord("p", 100, "replace-one", (event,), "training", "r", extra_delta=extra)
    guarantee = composed_guarantee([record], 1e-4)
    assert guarantee.delta == 1e-4
    assert guarantee.epsilon == pytest.approx(epsilon_of_events([event], 9e-5).epsilon)
    assert guarantee.epsilon > epsilon_of_events([event], 1e-4).epsilon
    # Near qN, sampling without replacement is bounded more loosely than no sampling: q = 1, no extra δ.
    near = SubpopulationBound(count=16.0, stddev=2.0, population_size=100, clients_per_round=5)
    assert near.lower_bound == 7
    assert near.training_event(1.0, 10, "without-replacement", "replace-one", gaussian) == (
        dp_accounting.SelfComposedDpEvent(gaussian, 10), 0.0)
    # Poisson rounds sample with the probability qN/M_low itself: exact, no extra δ.
    add_remove = dp_accounting.GaussianDpEvent(1.0)
    assert bound.training_event(1.0, 10, "poisson", "add-remove", add_remove) == (
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(5 / 31, add_remove), 10), 0.0)


def test_the_sampled_bound_does_not_grow_with_the_population_above_qn():
    """What makes M_low ≤ M an upper bound: dp_accounting's bound for qN of N without replacement, at
    every RDP order, does not increase with N > qN."""
    for z in (0.1, 1.0):
        gaussian = dp_accounting.GaussianDpEvent(z / 2)
        for qn in (1, 4):
            sizes = list(range(qn + 1, qn + 6)) + [30, 300]
            rdps = [np.asarray(rdp_of_event(dp_accounting.SampledWithoutReplacementDpEvent(n, qn, gaussian)))
                    for n in sizes]
            for smaller, larger in zip(rdps, rdps[1:]):
                assert np.all(larger <= smaller * (1 + 1e-9) + 1e-12)
    assert len(RDP_ORDERS) == len(rdps[0])


def test_the_papers_simulation_delta_of_one_user_is_refused_by_name():
    from fedgen_debug.privacy.accounting import DPFedAvgPrivacy
    from fedgen_debug.privacy.realistic import realistic_scenario

    one = DPFedAvgPrivacy(1, 1, 0.1, 2)
    with pytest.raises(ValueError, match="give simulation_delta"):
        realistic_scenario(one)   # δ = 1/N = 1 (before: "delta must be in (0, 1). Found 1.0.")
    assert realistic_scenario(one, simulation_delta=0.001).realistic.params.population == 10


def test_a_round_over_fewer_than_qn_qualified_users_is_padded_and_poisson_uses_the_bound():
    everyone = [f"u{i:02d}" for i in range(12)]
    assert pad_population(["u07"], everyone, 3) == ("u07", "u00", "u01")
    assert pad_population(["u07", "u03", "u09", "u01"], everyone, 3) == ("u01", "u03", "u07", "u09")
    # Poisson: each of the 12 ids with probability qN/M_low = 3/4, not 3/12.
    taken = [len(sample_clients(everyone, 3, np.random.default_rng(r), "poisson", accounted_size=4))
             for r in range(400)]
    assert abs(np.mean(taken) - 9.0) < 0.5
