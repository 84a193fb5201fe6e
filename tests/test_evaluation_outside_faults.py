"""Text faults outside the catalog (`evaluation/jsonl_outside_faults.py`): which users, which lines, what."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation", "jsonl_outside_faults.py")


@pytest.fixture
def outside():
    spec = importlib.util.spec_from_file_location("jsonl_outside_faults", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_line_of_the_chosen_users_changes_and_no_other(outside):
    rows = [{"client_id": u, "text": t} for u in ("a", "b", 3, "d") for t in ("one idea.", "more coffee")]
    changed, hit = outside.corrupt(rows, "leet", 0.5, seed=1)
    assert len(hit) == 2 and hit <= {"a", "b", "3", "d"}
    for before, after in zip(rows, changed):
        expected = before["text"].translate(str.maketrans("eoai", "3041")) if str(before["client_id"]) in hit else before["text"]
        assert after == {**before, "text": expected}
    assert changed[0]["text"] in ("one idea.", "0n3 1d34.")
    signed, _ = outside.corrupt(rows, "signature", 1.0, seed=1)
    assert all(r["text"].endswith(" -- Sent from my phone") for r in signed)
    assert outside.corrupt(rows, "leet", 0.0, seed=1)[0] == rows


def test_unknown_faults_and_fractions_are_refused(outside):
    with pytest.raises(ValueError, match="fault must be one of"):
        outside.corrupt([], "rot13", 0.5, seed=0)
    with pytest.raises(ValueError, match="fraction"):
        outside.corrupt([], "leet", 1.5, seed=0)
