"""Runs side by side: each call in a spawned process of its own, results in call order, errors raised,
progress rows of their own, and no child outlives a killed parent."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedgen_debug.progress import PROGRESS_ROW_ENV
from fedgen_debug.runs.side_by_side import run_side_by_side


def where(tag):
    return tag, os.getpid(), os.environ.get(PROGRESS_ROW_ENV)


def fail(message):
    raise ValueError(message)


def test_each_call_runs_in_a_process_of_its_own_and_results_come_in_call_order():
    results = run_side_by_side([(where, "a"), (where, "b")], processes=2)
    assert [tag for tag, _, _ in results] == ["a", "b"]
    pids = {pid for _, pid, _ in results}
    assert len(pids) == 2 and os.getpid() not in pids
    assert sorted(row for _, _, row in results) == ["0", "1"]  # each draws its bars on its own row


def test_one_process_runs_the_calls_here_one_after_another():
    assert run_side_by_side([(where, "a"), (where, "b")], processes=1) == [
        ("a", os.getpid(), os.environ.get(PROGRESS_ROW_ENV)), ("b", os.getpid(), os.environ.get(PROGRESS_ROW_ENV))]
    with pytest.raises(ValueError, match="processes must be >= 1"):
        run_side_by_side([(where, "a")], processes=0)


def test_an_error_in_a_run_is_raised_after_the_other_run_ends(tmp_path):
    with pytest.raises(ValueError, match="the before-run failed"):
        run_side_by_side([(fail, "the before-run failed"), (where, "b")], processes=2)


def test_a_killed_parent_leaves_no_run_training_on(tmp_path):
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from fedgen_debug.runs.side_by_side import run_side_by_side
        import test_side_by_side
        run_side_by_side([(test_side_by_side.sleep_forever, {str(pids)!r})] * 2, processes=2)
    """)], cwd=tmp_path)  # not the checkout: the installed package
    try:
        deadline = time.time() + 60
        while (not pids.exists() or len(pids.read_text().split()) < 2) and time.time() < deadline:
            time.sleep(0.2)
        children = [int(p) for p in pids.read_text().split()]
        assert len(children) == 2 and all(_alive(p) for p in children)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        time.sleep(2)
        assert not any(_alive(p) for p in children)
    finally:
        parent.kill()
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def sleep_forever(path):
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(600)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
