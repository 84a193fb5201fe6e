"""The power curve's rates over seeds (`evaluation/power_rates.py`, drawn by `power_figures.draw_rates`) and
its one-page summary (`power_summary.py`), on hand-built rows files."""

import importlib.util
import json
import math
import os

import pytest

_EVALUATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation")


def _evaluation_module(monkeypatch, name: str):
    monkeypatch.syspath_prepend(_EVALUATION)   # the scripts import their neighbours (power_figures, power_rates)
    spec = importlib.util.spec_from_file_location(name, os.path.join(_EVALUATION, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def power_rates(monkeypatch):
    return _evaluation_module(monkeypatch, "power_rates")


def _row(epsilon, fraction, seed, z, **extra):
    return {"epsilon": epsilon, "fraction": fraction, "seed": seed, "z": z, "detected": z > 3.0, **extra}


def test_rates_merge_seeds_across_files_and_leave_other_settings_out(power_rates, tmp_path):
    docs = {"word": [_row(math.inf, 0.1, 0, 7.8), _row(1.0, 0.1, 0, 2.0), _row(1.0, 0.0, 0, 1.9),
                     _row(1.0, 0.1, 0, 40.0, data="play:private.txt")]}        # another data source: left out
    summary = {"story": "concat", "data": "synthetic-text:users=300,seed=0",
               "rows": [_row(1.0, 0.1, 1, 8.9), _row(1.0, 0.1, 2, 4.7), _row(1.0, 0.0, 1, -1.0),
                        _row(1.0, 0.1, 0, 2.0), _row(1.0, 0.1, 3, 9.0, init="public:synthetic-text:users=9")]}
    play = {"story": "concat", "data": "play:private.txt", "vocab": "file:vocab.txt", "rows": [_row(1.0, 0.5, 1, 30.0)]}
    gan = {"story": "invert", "data": "synthetic-images:writers=100", "rows": [_row(1.0, 0.5, 1, 0.0)]}
    table = power_rates.rates(power_rates.merge([docs, summary, play, gan], "word"))
    cells = {(c["epsilon"], c["fraction"]): (c["detected"], c["seeds"], c["z"]) for c in table}
    assert cells == {(1.0, 0.1): (2, 3, [2.0, 8.9, 4.7]), (math.inf, 0.1): (1, 1, [7.8]), (1.0, 0.0): (0, 2, [1.9, -1.0])}
    text = power_rates.markdown(table)
    assert text.splitlines()[0] == "| fraction of devices | ∞ | 1 |"
    assert "| 0.1 | 1 of 1 (7.8) | 2 of 3 (2.0, 8.9, 4.7) |" in text
    assert "| 0 (clean vs clean: false alarms) |  | 0 of 2 (1.9, -1.0) |" in text
    power_rates.draw_rates(table, str(tmp_path / "rate.png"), "test")
    assert os.path.getsize(tmp_path / "rate.png") > 1000


def test_gan_rates_read_synthetic_rows_beside_other_datas_and_print_no_capped_z(power_rates):
    docs = {"gan_synthetic": [_row(4.0, 0.5, 1, 100.0)], "gan_femnist": [_row(4.0, 0.5, 2, 100.0)],
            "gan": [_row(4.0, 0.5, 0, 0.0)]}
    table = power_rates.rates(power_rates.merge([docs], "gan"))
    assert [(c["detected"], c["seeds"]) for c in table] == [(1, 2)]
    assert "| 0.5 | 1 of 2 |" in power_rates.markdown(table, with_z=False)


def test_two_files_disagreeing_on_one_seeds_cell_is_an_error(power_rates):
    with pytest.raises(ValueError, match="disagree"):
        power_rates.merge([{"word": [_row(1.0, 0.1, 0, 5.0)]}, {"word": [_row(1.0, 0.1, 0, 1.0)]}], "word")


@pytest.fixture
def check_noise(monkeypatch):
    return _evaluation_module(monkeypatch, "power_check_noise")


def _analysis(out, name, current, baseline=None):
    """A word-LM run's analysis.json with `current` = (OOV at position 1, OOV at positions 2-8)."""
    import json

    def body(counts):
        first, rest = counts
        return {"oov_by_position": [{"position": 1, "oov": first, "tokens": 5000}, {"position": 2, "oov": rest, "tokens": 5000}]}

    os.makedirs(os.path.join(out, name, "released"))
    report = {"current": body(current), **({"baseline": body(baseline)} if baseline else {})}
    with open(os.path.join(out, name, "released", "analysis.json"), "w") as f:
        json.dump(report, f)


def test_check_noise_golden_difference_and_training_variance(check_noise):
    d, se = check_noise.difference((10, 100), (30, 100))
    assert d == pytest.approx(0.2) and se == pytest.approx(math.sqrt(0.09 / 100 + 0.21 / 100))
    group = [(10, 100), (30, 100), (20, 100)]
    pairs = [check_noise.difference(a, b) for a, b in [(group[0], group[1]), (group[0], group[2]), (group[1], group[2])]]
    excess = sum(d * d - se * se for d, se in pairs) / 3
    from scipy import stats
    assert check_noise.training_variance([group]) == pytest.approx(excess * 2 / stats.chi2.ppf(0.05, 2))
    # two groups: their pairs apart (no pair across groups), degrees of freedom added
    other = [(50, 100), (50, 100)]
    pooled = (3 * excess + (0.0 - 2 * 0.25 / 100)) / 4
    assert check_noise.training_variance([group, other]) == pytest.approx(max(pooled, 0) * 3 / stats.chi2.ppf(0.05, 3))
    assert check_noise.training_variance([[(5, 100), (5, 100), (5, 100)]]) == 0.0   # samples' noise explains them


def test_check_noise_calibrates_against_clean_runs_without_the_pairs_own(check_noise, tmp_path):
    """Clean trainings whose position-1 shares spread 4-12%: a 10% run at 16% passes the check's z but not
    the training noise; a 50% run at 60% passes both; each clean pair is tested without its own runs."""
    out = str(tmp_path / "a")
    shares = {0: 40, 1: 120, 2: 80, 3: 60, 4: 100, 5: 50}          # of 1,000 OOV tokens, clean seeds 0-5
    for seed in (1, 3, 5):
        _analysis(out, f"word-epsinf-concat0-seed{seed}", (shares[seed], 1000 - shares[seed]),
                  (shares[seed - 1], 1000 - shares[seed - 1]))
    _analysis(out, "word-epsinf-concat0.1-seed1", (160, 840), (shares[0], 1000 - shares[0]))
    _analysis(out, "word-epsinf-concat0.5-seed3", (600, 400), (shares[2], 1000 - shares[2]))
    rows = check_noise.calibrate(check_noise.load_runs([out]))
    fault = {r["fraction"]: r for r in rows if r["fraction"] > 0}
    assert fault[0.1]["z_samples"] > 3 and not fault[0.1]["found_calibrated"]
    assert fault[0.5]["found_calibrated"] and fault[0.5]["calibrated_z"] < fault[0.5]["z_samples"]
    assert fault[0.1]["clean_runs"] == 5 and fault[0.5]["clean_runs"] == 5     # run A left out
    clean = [r for r in rows if r["fraction"] == 0.0]
    assert len(clean) == 15 and all(r["clean_runs"] == 4 for r in clean)   # every pair of 6, both runs left out
    assert any(abs(r["z_samples"]) > 3 for r in clean) and not any(r["found_calibrated"] for r in clean)


def test_check_noise_reads_only_the_epsilons_asked_for(check_noise, tmp_path):
    """An ε whose clean runs disagree far more (few OOV samples) would set the noise of every ε pooled."""
    out = str(tmp_path / "a")
    for epsilon, shares in (("inf", (50, 60)), ("0.5", (10, 400))):
        _analysis(out, f"word-eps{epsilon}-concat0-seed1", (shares[1], 1000 - shares[1]), (shares[0], 1000 - shares[0]))
    runs = check_noise.load_runs([out])
    kept = check_noise.at_epsilons(runs, "inf")
    assert {k[0] for k in runs} == {"inf", "0.5"} and {k[0] for k in kept} == {"inf"} and len(kept) == 2


# The power curve on one page (`evaluation/power_summary.py`).
@pytest.fixture
def power_summary(monkeypatch):
    return _evaluation_module(monkeypatch, "power_summary")


def _cell(epsilon, fraction, detected, seeds):
    return {"epsilon": epsilon, "fraction": fraction, "detected": detected, "seeds": seeds, "from": "test"}


def test_summary_table_has_a_row_per_story_and_fraction_and_blank_cells_not_run(power_summary, tmp_path):
    panels = [{"title": "word, A", "reading": "z", "cells": [_cell("inf", 0.5, 3, 3), _cell("1", 0.5, 2, 3),
                                                              _cell("1", 0.0, 0, 9)]},
              {"title": "gan, B", "reading": "verdict", "cells": [_cell("inf", 0.05, 0, 3)]}]
    assert power_summary.markdown(panels).splitlines() == [
        "| story, source | fraction | ∞ | 1 |", "| --- | --- | --- | --- |",
        "| word, A | 50% | 3 of 3 | 2 of 3 |", "| word, A | clean pairs (false alarms) |  | 0 of 9 |",
        "| gan, B | 5% | 0 of 3 |  |"]
    power_summary.draw(panels, str(tmp_path / "summary.png"), "N=10000,qN=1000")
    assert (tmp_path / "summary.png").stat().st_size > 10_000


def test_the_shipped_summary_counts_no_more_found_than_seeds(power_summary):
    with open(os.path.join(os.path.dirname(_EVALUATION), "docs", "power_summary_2026-12-06.json"), encoding="utf-8") as f:
        panels = json.load(f)["panels"]
    cells = [c for p in panels for c in p["cells"]]
    assert len(panels) == 4 and all(0 <= c["detected"] <= c["seeds"] and c["from"] for c in cells)
    assert all(c["seeds"] >= 3 or c["fraction"] == 0 or (p["title"].startswith("word-LM") and c["seeds"] == 2)
               for p in panels for c in p["cells"])
