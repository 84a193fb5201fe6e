"""check-memorization: the papers' tables and the verdict on hand-built rows (exact), and end to end on
a tiny word-LM trained with canaries: without DP the repeated canary is memorized (rank 1, found by beam
search, exposure far above the controls'), and nothing private reaches the released report."""

import json
import math
import os

import pytest

from conftest import provision_secret, run_cli, run_main
from fedgen_debug.cli.memorization_cmd import format_report
from fedgen_debug.memorization.check import CheckConfig, ramaswamy_table, thakkar_table, verdict
from fedgen_debug.runs import store
from release_boundary import check_released


def _row(cid, design=None, rank=5, found=False, exposure=1.0, **config):
    return {"id": cid, "inserted": design is not None, "config": {"design": design, **config} if design else None,
            "rs_rank": rank, "bs_found": found, "exposure": exposure}


ROWS = [
    _row("t#0", "thakkar", rank=1, found=True, exposure=20.0, p_u=0.1, p_e=1.0),
    _row("t#1", "thakkar", rank=1, found=False, exposure=19.0, p_u=0.1, p_e=1.0),
    _row("t#2", "thakkar", rank=40, exposure=5.0, p_u=0.1, p_e=1.0),
    _row("t#3", "thakkar", rank=900, exposure=0.5, p_u=0.01, p_e=0.1),
    _row("r#0", "ramaswamy", rank=1, found=True, exposure=21.0, n_u=16, n_e=200),
    _row("r#1", "ramaswamy", rank=3, found=True, exposure=18.0, n_u=16, n_e=200),
    _row("r#2", "ramaswamy", rank=70_000, exposure=4.8, n_u=1, n_e=1),
    _row("c#0", exposure=0.5), _row("c#1", exposure=2.5),
]


def test_thakkar_table_counts_rank_one_and_beam_finds_per_config():
    assert thakkar_table(ROWS) == [
        {"p_u": 0.01, "p_e": 0.1, "canaries": 1, "max_exposure": 0.5, "rs_memorized": 0, "bs_found": 0},
        {"p_u": 0.1, "p_e": 1.0, "canaries": 3, "max_exposure": 20.0, "rs_memorized": 2, "bs_found": 1},
    ]


def test_ramaswamy_table_lists_ranks_and_beam_finds_per_config():
    assert ramaswamy_table(ROWS) == [
        {"n_u": 1, "n_e": 1, "canaries": 1, "max_exposure": 4.8, "rs_ranks": [70_000], "bs_found": 0},
        {"n_u": 16, "n_e": 200, "canaries": 2, "max_exposure": 21.0, "rs_ranks": [1, 3], "bs_found": 2},
    ]


def test_verdict_fails_on_inserted_canaries_above_the_threshold_only():
    v = verdict(ROWS, 12.0)
    assert (v["passed"], v["over_threshold"]) == (False, ["t#0", "t#1", "r#0", "r#1"])
    assert (v["control_exposure_mean"], v["control_exposure_max"]) == (1.5, 2.5)
    # A control above the threshold is chance, not memorization: it never fails the check.
    assert verdict([_row("c", exposure=30.0), _row("r", "ramaswamy", exposure=3.0, n_u=1, n_e=1)], 12.0)["passed"]


@pytest.mark.parametrize("field, value, message", [
    ("references", 2, "references must be >= 3"), ("beam_width", 0, "beam_width must be >= 1"),
    ("max_exposure_bits", -1.0, "max_exposure_bits must be > 0"),
])
def test_check_config_validates(field, value, message):
    with pytest.raises(ValueError, match=message):
        CheckConfig(**{field: value})


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    """A tiny word-LM without DP noise on 20 users plus 2 synthetic devices holding 200 copies of one
    canary each, and a Thakkar canary nobody is likely to share (p_u = 0.01)."""
    run_dir = str(tmp_path_factory.mktemp("mem") / "word")
    provision_secret(run_dir, "test_memorization_check/word")
    from fedgen_debug.experiments.sweep import train_run
    from fedgen_debug.training.lm_run import LMRun

    # `train-lm ... --canaries SPEC` as the CLI trains it, in this process (check-memorization below is the CLI)
    train_run(LMRun("word", "synthetic-text:users=20,seed=5", preset="test", vocab_size=200, rounds=40,
                    clients_per_round=10, noise_multiplier=0.0,
                    canaries="ramaswamy:n_u=2,n_e=200,count=1+thakkar:p_u=0.01,p_e=0.1,count=1"), run_dir)
    return run_dir


def test_check_memorization_exposes_the_repeated_canary_of_a_model_without_dp(canary_run):
    # 40 rounds of a test-size model: the repeated canary ranks in the top ~0.2% (rank 35 of 20,000
    # with the provisioned secret), far above any control; 100 rounds reach rank 1 (slow suite below).
    result = run_cli("check-memorization", canary_run, "--references", "20000", "--max-exposure", "6", "--json",
                     timeout=600)
    assert result.returncode == 1, result.stderr  # above the 6-bit threshold: FAIL, exit status 1
    report = json.loads(result.stdout)
    rows = {r["id"]: r for r in report["canaries"]}
    repeated = rows["ramaswamy:n_u=2,n_e=200#0"]
    controls = [r for r in report["canaries"] if not r["inserted"]]
    assert len(controls) == 10 and len(rows) == 12
    assert repeated["rs_rank"] <= 100 and repeated["exposure"] > max(c["exposure"] for c in controls) + 3
    assert repeated["exposure"] == pytest.approx(math.log2(20001) - math.log2(repeated["rs_rank"]))
    assert report["verdict"]["over_threshold"] == ["ramaswamy:n_u=2,n_e=200#0"]
    assert {"exposure", "rs_rank", "bs_found", "config", "exposure_extrapolated"} <= set(repeated)
    assert repeated["exposure_extrapolated"] <= report["log2_space"]
    assert os.path.exists(store.released(canary_run, store.MEMORIZATION_PNG))
    # The same report under the default 12-bit threshold passes (exit status 0).
    assert run_main("check-memorization", canary_run, "--references", "20000", timeout=600).returncode == 0


def test_report_text_has_both_tables_and_the_verdict(canary_run):
    from fedgen_debug.memorization.check import check_lm_run

    report = check_lm_run(canary_run, CheckConfig(references=2000))
    assert store.read_json(store.released(canary_run, store.MEMORIZATION))["references"] == 2000
    text = "\n".join(format_report(report))
    assert "Thakkar et al. (Tables 1/2)" in text and "Ramaswamy et al. (Table 4)" in text
    assert "PASS: no inserted canary" in text and "model ε = ∞" in text


def test_the_canary_run_releases_canaries_but_not_who_shared_them(canary_run):
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device import lm_data

    client_data = data_spec.load_client_data("synthetic-text:users=20,seed=5")
    sentences = [s for cid in client_data.client_ids for s in lm_data.device_sentences(client_data, cid)]
    check_released(canary_run, client_ids=client_data.client_ids, sentences=[s for s in sentences if len(s) > 20])
    recorded = store.read_json(store.released(canary_run, store.CANARIES))
    assert set(recorded) == {"spec", "kind", "alphabet_size", "space_size", "canaries"}
    assert all(set(c) == {"id", "kind", "prefix", "suffix", "text", "config"} for c in recorded["canaries"])
    # The synthetic devices are sampled like users: N = 20 + 2 in the training release.
    releases = store.read_json(store.released(canary_run, store.PRIVACY))["releases"]
    (training,) = [r for k, r in releases.items() if k.endswith("/training")]
    assert training["population_size"] == 22


def test_cross_client_ratios_are_a_charged_dp_release_with_no_per_client_value(canary_run):
    args = ("check-memorization", canary_run, "--references", "2000", "--cross-client", "--prefixes-per-client", "5")
    result = run_main(*args, "--json", timeout=600)
    report = json.loads(result.stdout)
    cross = report["cross_client"]
    assert cross["users"] == 20 and cross["dp"] and 0 < cross["epsilon"] < 10
    assert cross["stddev"] == pytest.approx(2 * math.sqrt(5) / 20)
    assert -1 < cross["mr_intra"] < 2 and -1 < cross["mr_inter"] < 2
    releases = store.read_json(store.released(canary_run, store.PRIVACY))["releases"]
    (key,) = [k for k in releases if "cross-client-mr" in k]
    assert releases[key]["population_size"] == 20
    # The same check again is the same release (same noise, nothing charged twice); other settings are another.
    from fedgen_debug.memorization.check import check_lm_run
    from fedgen_debug.memorization.cross_client_lm import CrossClientConfig

    again = check_lm_run(canary_run, CheckConfig(references=500), CrossClientConfig(prefixes_per_client=5))
    assert again["cross_client"]["mr_intra"] == cross["mr_intra"]
    other = check_lm_run(canary_run, CheckConfig(references=500), CrossClientConfig(ngram=3, prefixes_per_client=5))
    releases = store.read_json(store.released(canary_run, store.PRIVACY))["releases"]
    assert len([k for k in releases if "cross-client-mr" in k]) == 2
    text = "\n".join(format_report(other))
    assert "MR_intra" in text and "MR_total is not released" in text


def test_check_memorization_refuses_a_run_without_canaries(tmp_path):
    run_dir = tmp_path / "plain"
    (run_dir / "released").mkdir(parents=True)
    result = run_cli("check-memorization", str(run_dir), timeout=120)
    assert result.returncode == 2 and "not a run directory" in result.stderr   # no released config: no run at all
    (run_dir / "released" / "config.json").write_text(json.dumps({"lm": {"kind": "char"}}))
    result = run_main("check-memorization", str(run_dir), timeout=120)
    assert result.returncode == 2 and "train it with --canaries" in result.stderr


def test_at_default_size_dp_noise_stops_the_memorization_training_without_it_shows(tmp_path):
    """The default suite's version of the slow test below (120 rounds, 2,000 references, in process,
    pinned secrets): without noise the canary two users repeat ranks first among the references, bits above
    its controls; with z = 5 its exposure is among theirs and its rank drops by an order of magnitude.
    Why z = 5, not the slow test's 1: at N = 20 (qN = 10) no z that lets a model learn is a meaningful ε,
    and the noise on the mean, zS/qN, is what decides. Why 120 rounds with margins of bits: the outcome of
    one pinned secret depends on the CPU's floating point (at 60 rounds and z = 3 the same secret gave 8.2
    bits on an AMD EPYC and 5.7 on an Intel Xeon with oneDNN, against controls of 4.4, and failed there),
    so the settings were chosen over secrets, not for one. Measured 2026-12-05 (Intel Xeon, oneDNN) on 10
    other secrets each: without noise 10.97 bits (rank 1, the most 2,000 references can show) in 10 of 10,
    controls ≤ 3.8; with z = 5 0.05-5.0 bits (rank 63-1,934), each below its largest control + 2. The pinned
    secrets: 10.97 bits (controls ≤ 3.8; ≤ 2.5 with oneDNN off) and 0.13 bits at z = 5 (rank 1,830)."""
    from fedgen_debug.experiments.lm import train_lm
    from fedgen_debug.memorization.check import check_lm_run
    from fedgen_debug.training.lm_run import LMRun

    found = {}
    for z in (0.0, 5.0):
        run_dir = str(tmp_path / f"z{z:g}")
        provision_secret(run_dir, f"test_memorization_check/default-z{z:g}")
        train_lm(LMRun("word", "synthetic-text:users=20,seed=5", preset="test", vocab_size=200, rounds=120,
                       clients_per_round=10, noise_multiplier=z, canaries="ramaswamy:n_u=2,n_e=200,count=1"), run_dir)
        report = check_lm_run(run_dir, CheckConfig(references=2000))
        rows = {r["id"]: r for r in report["canaries"]}
        found[z] = rows["ramaswamy:n_u=2,n_e=200#0"], max(r["exposure"] for r in report["canaries"] if not r["inserted"])
    (no_dp, no_dp_controls), (dp, dp_controls) = found[0.0], found[5.0]
    assert no_dp["exposure"] > no_dp_controls + 2.0, found
    assert dp["exposure"] < no_dp["exposure"] - 2.0 and dp["rs_rank"] > 5 * no_dp["rs_rank"], found
    assert dp["exposure"] < dp_controls + 2.0, found


@pytest.mark.slow
def test_dp_noise_stops_the_memorization_that_training_without_it_shows(tmp_path):
    """100 rounds of the same configuration: without noise the repeated canary ranks first among 20,000
    references; with z = 1 (the papers' noise multiplier) its exposure stays in the controls' range."""
    exposures = {}
    for z in ("0", "1"):
        run_dir = str(tmp_path / f"z{z}")
        provision_secret(run_dir, f"test_memorization_check/slow-z{z}")
        result = run_cli("train-lm", "--kind", "word", "--data", "synthetic-text:users=20,seed=5", "--preset", "test",
                         "--vocab-size", "200", "--rounds", "100", "--clients-per-round", "10", "--noise-multiplier", z,
                         "--canaries", "ramaswamy:n_u=2,n_e=200,count=1", "--out", run_dir, timeout=1800)
        assert result.returncode == 0, result.stderr
        check = run_cli("check-memorization", run_dir, "--references", "20000", "--json", timeout=600)
        report = json.loads(check.stdout)
        rows = {r["id"]: r for r in report["canaries"]}
        exposures[z] = (rows["ramaswamy:n_u=2,n_e=200#0"], max(r["exposure"] for r in report["canaries"]
                                                               if not r["inserted"]))
    (no_dp, _), (dp, dp_controls) = exposures["0"], exposures["1"]
    assert no_dp["rs_rank"] == 1
    assert dp["rs_rank"] > 1 and dp["exposure"] < max(dp_controls, 6.0), exposures
