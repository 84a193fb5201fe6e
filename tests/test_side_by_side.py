"""Runs side by side: calls on spawned worker processes that run at the same time and take the next
call when free (keeping their state and progress row), results in call order, errors raised, and no
worker outlives a killed parent."""

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


_CALLS_HERE = []  # what a worker process ran before: its in-process state between calls


def counted(tag):
    _CALLS_HERE.append(tag)
    return (*where(tag), list(_CALLS_HERE))


def meet(tag, directory, parties):
    """Returns once `parties` calls have entered: proof that they run at the same time."""
    open(os.path.join(directory, f"{tag}-{os.getpid()}"), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(directory)) < parties:
        if time.time() > deadline:
            raise TimeoutError(f"{tag}: the other calls did not start beside it")
        time.sleep(0.05)
    return counted(tag)


def test_calls_run_side_by_side_in_spawned_processes_and_results_come_in_call_order(tmp_path):
    results = run_side_by_side([(meet, "a", str(tmp_path), 2), (meet, "b", str(tmp_path), 2)], processes=2)
    assert [tag for tag, *_ in results] == ["a", "b"]
    pids = {pid for _, pid, _, _ in results}
    assert len(pids) == 2 and os.getpid() not in pids
    assert sorted(row for _, _, row, _ in results) == ["1", "2"]  # each draws its bars on its own row (0: the parent's)


def test_workers_take_the_next_call_and_keep_their_state_and_row(tmp_path):
    from fedgen_debug.runs.side_by_side import SideBySide

    with SideBySide(2) as workers:
        assert not workers.in_process
        first = [workers.submit(meet, tag, str(tmp_path), 2) for tag in ("a", "b")]
        later = [workers.submit(counted, tag) for tag in ("c", "d")]
        results = [f.result() for f in first + later]
    assert [tag for tag, *_ in results] == ["a", "b", "c", "d"]
    assert len({pid for _, pid, _, _ in results}) == 2  # no worker spawned for the later calls
    row_of = {pid: row for _, pid, row, _ in results[:2]}
    first_of = {pid: tag for tag, pid, _, _ in results[:2]}
    for tag, pid, row, history in results[2:]:
        assert row == row_of[pid]  # a worker keeps its row
        assert history[0] == first_of[pid] and history[-1] == tag  # and what it ran before (imports, caches)
    assert _CALLS_HERE == []  # nothing ran in this process


def intra_op_setting(tag):
    return tag, os.environ.get("TF_NUM_INTRAOP_THREADS")


def test_workers_share_the_cores_between_their_tensorflow_thread_pools(tmp_path, monkeypatch):
    from fedgen_debug.runs.side_by_side import intra_op_threads

    cores = len(os.sched_getaffinity(0))
    assert [intra_op_threads(p) for p in (1, cores, 2 * cores)] == [cores, 1, 1]
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    results = run_side_by_side([(intra_op_setting, "a"), (intra_op_setting, "b")], processes=2)
    assert results == [("a", str(max(1, cores // 2))), ("b", str(max(1, cores // 2)))]
    assert "TF_NUM_INTRAOP_THREADS" not in os.environ  # this process's own pools are left as they are
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "7")  # the user's own setting wins
    assert run_side_by_side([(intra_op_setting, "a"), (intra_op_setting, "b")], processes=2) == [("a", "7"), ("b", "7")]


def test_one_process_runs_the_calls_here_one_after_another():
    from fedgen_debug.runs.side_by_side import SideBySide

    with SideBySide(1) as here:
        assert here.in_process
        assert here.submit(where, "a").result() == ("a", os.getpid(), os.environ.get(PROGRESS_ROW_ENV))
        with pytest.raises(ValueError, match="at once"):
            here.submit(fail, "raised at once")
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
        deadline = time.monotonic() + 30   # polled, not a fixed sleep: a loaded machine reaps later
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in children), children
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
