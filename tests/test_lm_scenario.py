"""The LM scenario end to end at test size: DP-FedAvg char-LMs before/after the tokenization bug, the
analysis tables and the automatic verdict (CLI included)."""

import json
import os

import numpy as np

import pytest

from conftest import provision_secret, run_cli, run_main
from fedgen_debug.runs import store
from fedgen_debug.training.lm_run import LMRun
from fedgen_debug.experiments.lm import train_lm
from fedgen_debug.analysis.lm_analysis import analyze_lm


@pytest.fixture(scope="module")
def char_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    runs = {}
    # "clean": a second 0% run (another seed and secret): the pair a modeler compares when nothing changed.
    for name, fraction, seed in ((0.0, 0.0, 0), (0.3, 0.3, 0), ("clean", 0.0, 1)):
        run = LMRun(kind="char", data="synthetic-text:users=50,seed=2", bug_fraction=fraction, preset="test",
                    rounds=8, vocab_size=1000, seed=seed)
        runs[name] = str(root / f"char-{name}")
        provision_secret(runs[name], f"test_lm_scenario/char-{name}")
        train_lm(run, runs[name])
    return runs


def test_the_released_oov_rate_is_the_dp_mean_of_the_devices_rates(char_runs):
    from fedgen_debug.device.tokenization import TokenizationBug
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device import lm_data

    data = data_spec.load_client_data("synthetic-text:users=50,seed=2")
    vocab = lm_data.load_vocabulary(char_runs[0.0])
    for fraction, run_dir in ((f, char_runs[f]) for f in (0.0, 0.3)):
        released = json.load(open(store.released(run_dir, store.DEVICE_METRICS)))["oov_rate"]
        assert released["dp"] and released["stddev"] == pytest.approx(2.0 / 50)  # σ/N: ±2/N for N = 50
        bug = TokenizationBug(fraction, seed=0) if fraction else None
        exact = np.mean([lm_data.device_oov_rate(lm_data.device_tokens(data, c, bug), vocab) for c in data.client_ids])
        assert abs(released["mean"] - exact) < 4 * released["stddev"]
        if fraction:  # ground truth of the simulation: the bug raises the devices' OOV rate
            clean = np.mean([lm_data.device_oov_rate(lm_data.device_tokens(data, c, None), vocab)
                             for c in data.client_ids])
            assert exact > clean + 0.02


def test_verdict_flags_the_bug_against_the_baseline_and_not_without_it(char_runs):
    buggy = analyze_lm(char_runs[0.3], char_runs[0.0], samples=1000)
    assert buggy["tokenization_bug_suspected"] is True
    assert buggy["current"]["space_mass"] > buggy["baseline"]["space_mass"]
    # Correctly tokenized OOV words never hold a space: the baseline model only makes rare slips.
    assert buggy["baseline"]["space_mass"] < 0.01
    assert len(buggy["current"]["top_k"]) == 20 and all(r["word"].strip() for r in buggy["current"]["top_k"])
    clean = analyze_lm(char_runs[0.0], samples=1000)
    assert clean["tokenization_bug_suspected"] is False
    # Clean against clean (two trainings, different secrets and seeds): no bug.
    pair = analyze_lm(char_runs["clean"], char_runs[0.0], samples=1000)
    assert pair["tokenization_bug_suspected"] is False and pair["evidence"]["test"] == "space mass vs baseline"
    clean = analyze_lm(char_runs[0.0], samples=1000)
    assert os.path.exists(store.released(char_runs[0.3], store.TOP_OOV_WORDS))
    # The comparison plot: every listed word's bar under each model is that word's probability under
    # that model (before: the baseline's own top-k bars were drawn under the current run's word labels).
    from fedgen_debug.models.char_lm import joint_log_prob
    from fedgen_debug.training.lm_run import load_lm
    from fedgen_debug.analysis.lm_analysis import char_bars

    words, bars = char_bars(buggy)
    assert words == [t["word"] for t in buggy["current"]["top_k"]] and set(bars) == {"current", "baseline"}
    for name, run_dir in (("current", char_runs[0.3]), ("baseline", char_runs[0.0])):
        expected = np.exp(joint_log_prob(load_lm(run_dir)[0], words))
        np.testing.assert_allclose(bars[name], expected, rtol=1e-4)
    assert bars["baseline"] != [t["probability"] for t in buggy["baseline"]["top_k"]]
    assert char_bars(clean)[1].keys() == {"current"}


def test_analyze_lm_cli_prints_the_verdict(char_runs):
    result = run_cli("analyze-lm", char_runs[0.3], "--baseline", char_runs[0.0], "--samples", "500", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tokenization_bug_suspected"] is True
    # The refusals through the CLI's main() in this process (`run_main`): an exception other than the one-line
    # refusal (the former ZeroDivisionError) propagates here and fails the test.
    done = run_main("train-lm", "--kind", "char", "--data", "synthetic-text:users=5", "--bug", "invert:0.1",
                    "--out", os.path.join(char_runs[0.0], "x"))
    assert done.returncode == 2 and "--bug: invert is a bug of image data; for text use concat" in done.stderr
    for flag, value in (("--samples", "0"), ("--samples", "-3"), ("--top-k", "-1")):   # was a ZeroDivisionError
        done = run_main("analyze-lm", char_runs[0.3], flag, value)
        assert done.returncode == 2 and "must be >= 1" in done.stderr and "Traceback" not in done.stderr


def test_word_lm_position_one_oov_rate_rises_with_the_bug(tmp_path):
    runs = {}
    for name, fraction, seed in ((0.0, 0.0, 0), (0.5, 0.5, 0), ("clean", 0.0, 1)):
        runs[name] = str(tmp_path / f"word-{name}")
        provision_secret(runs[name], f"test_lm_scenario/word-{name}")
        train_lm(LMRun(kind="word", data="synthetic-text:users=40,seed=1", bug_fraction=fraction, preset="test",
                       rounds=8, vocab_size=400, seed=seed), runs[name])
    report = analyze_lm(runs[0.5], runs[0.0], samples=2500)
    position_one = {name: report[name]["oov_by_position"][0] for name in ("current", "baseline")}
    rate = {k: v["oov"] / v["tokens"] for k, v in position_one.items()}
    assert rate["current"] > rate["baseline"]
    assert report["tokenization_bug_suspected"] is True
    assert report["evidence"]["test"] == "position 1's share of sampled OOV tokens vs baseline"
    assert os.path.getsize(store.released(runs[0.5], store.ANALYSIS_PNG)) > 1000
    assert analyze_lm(runs[0.0], samples=2500)["tokenization_bug_suspected"] is False
    # Clean against clean (another seed and secret): quiet, by the same position-1 share test.
    pair = analyze_lm(runs["clean"], runs[0.0], samples=2500)
    assert pair["tokenization_bug_suspected"] is False and pair["evidence"]["statistic"] == "position_1_share_of_oov"


def test_a_capped_round_trains_each_device_on_its_subset_drawn_from_the_run_secret(tmp_path, monkeypatch):
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.runs import secret as secret_lib
    from fedgen_debug.training import dp_fedavg
    from fedgen_debug.privacy.sampling import sample_clients

    drawn = []
    real = dp_fedavg.round_examples

    def spy(examples, cap, rng):
        drawn.append((len(examples[0]), cap, rng.bit_generator.state["state"]["state"]))
        kept = real(examples, cap, rng)
        assert len(kept[0]) == min(len(examples[0]), cap)
        return kept

    monkeypatch.setattr(dp_fedavg, "round_examples", spy)
    run = LMRun(kind="char", data="synthetic-text:users=30,seed=3", preset="test", rounds=2, vocab_size=1000)
    run_dir = str(tmp_path / "capped")
    provision_secret(run_dir, "test_lm_scenario/capped")
    train_lm(run, run_dir)
    config = run.training_config(30)
    cap = config.client.max_examples
    assert cap is not None and {c for _, c, _ in drawn} == {cap}  # the preset caps a round's examples
    assert any(n > cap for n, _, _ in drawn)                      # and some device holds more than the cap
    # Each sampled device of round r drew from secret.rng("client-examples", r, device): nothing public,
    # another stream every round, and the same on a resume.
    secret = secret_lib.load(run_dir)
    population = sorted(data_spec.load_client_data(run.data).client_ids)
    expected = [secret.rng("client-examples", r, cid).bit_generator.state["state"]["state"] for r in range(2)
                for cid in sample_clients(population, config.dp.clients_per_round, secret.rng("sampling", r))]
    assert sorted(s for _, _, s in drawn) == sorted(expected)
