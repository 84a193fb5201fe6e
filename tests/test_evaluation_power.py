"""The power curve's rates over seeds (`evaluation/power_rates.py`, drawn by `power_figures.draw_rates`),
on hand-built rows files."""

import importlib.util
import math
import os

import pytest

_EVALUATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation")


@pytest.fixture
def power_rates(monkeypatch):
    monkeypatch.syspath_prepend(_EVALUATION)   # it imports power_figures beside it
    spec = importlib.util.spec_from_file_location("power_rates", os.path.join(_EVALUATION, "power_rates.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_two_files_disagreeing_on_one_seeds_cell_is_an_error(power_rates):
    with pytest.raises(ValueError, match="disagree"):
        power_rates.merge([{"word": [_row(1.0, 0.1, 0, 5.0)]}, {"word": [_row(1.0, 0.1, 0, 1.0)]}], "word")
