"""No TFF worker_binary survives the CLI, an in-process run, SIGINT or SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import eventually, fedgen_cli
from fedgen_debug import runtime
from fedgen_debug.cli.doctor_cmd import federated_mean_check


def _tagged() -> tuple[dict, str]:
    """An environment for a child process with a tag its TFF worker inherits, and the tag. The suite runs
    on two xdist workers: the other one's TFF workers are alive too, so a machine-wide "no new
    worker_binary" check would see them; the tag singles out this test's."""
    tag = uuid.uuid4().hex
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", FEDGEN_DEBUG_TEST_TAG=tag), tag


def _workers_tagged(tag: str) -> set[int]:
    tagged = set()
    for pid in runtime.worker_processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"FEDGEN_DEBUG_TEST_TAG={tag}".encode() in f.read().split(b"\0"):
                    tagged.add(pid)
        except OSError:  # exited meanwhile
            pass
    return tagged


def test_in_process_computation_then_shutdown_leaves_no_worker():
    assert federated_mean_check((1.0, 2.0, 6.0)) == pytest.approx(3.0)
    assert runtime.worker_processes(os.getpid()), "the computation should have started a worker"
    runtime.shutdown(restore_context=True)
    assert runtime.worker_processes(os.getpid()) == []
    # The restored context works again (and starts a new worker, stopped at session end).
    assert federated_mean_check((2.0, 4.0)) == pytest.approx(3.0)


def test_cli_through_a_pipe_finishes_and_leaves_no_worker():
    env, tag = _tagged()
    # stdout is a pipe read to EOF: a surviving worker holding it open would hang this call.
    result = subprocess.run([fedgen_cli(), "--backend", "tff", "doctor", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["backend"] == "tff" and "CPU:0" in report["devices"]
    assert eventually(lambda: _workers_tagged(tag) == set()), _workers_tagged(tag)


# A shell without job control starts background commands (`make test &`) with SIGINT ignored; the
# child would inherit that and sleep through the signal, so it installs Python's usual Ctrl-C handler.
_HOLD_SCRIPT = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from fedgen_debug import runtime
    from fedgen_debug.cli.doctor_cmd import federated_mean_check
    runtime.install_shutdown_hooks()
    federated_mean_check()
    print("READY", runtime.worker_processes(__import__("os").getpid()), flush=True)
    time.sleep(120)
""")


# An uncaught KeyboardInterrupt ends Python by re-raising SIGINT (exit -2) after the exit hooks ran.
@pytest.mark.parametrize("sig, exit_codes", [(signal.SIGINT, {-signal.SIGINT}), (signal.SIGTERM, {128 + 15})])
def test_signals_stop_the_worker(sig, exit_codes):
    env, tag = _tagged()
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY"), line
        started = _workers_tagged(tag)
        assert started, "the child should have a live worker before the signal"
        proc.send_signal(sig)
        assert proc.wait(timeout=180) in exit_codes
        proc.stdout.read()  # EOF arrives only once no process holds the pipe
        assert eventually(lambda: _workers_tagged(tag) == set()), _workers_tagged(tag)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_worker_that_ignores_sigint_is_killed_instead_of_hanging_the_exit():
    # A stand-in worker: argv[0] is worker_binary and SIGINT is ignored (SIG_IGN survives exec).
    fake = subprocess.Popen(["bash", "-c", "trap '' INT; exec -a worker_binary sleep 600"])
    deadline = time.monotonic() + 10
    while fake.pid not in runtime.worker_processes(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.pid in runtime.worker_processes(os.getpid())
    started = time.monotonic()
    with runtime.killing_workers_after(1.0):
        fake.send_signal(signal.SIGINT)  # what TFF's ServiceManager.__del__ does, then waits forever
        fake.wait()
    assert fake.returncode == -signal.SIGKILL and time.monotonic() - started < 8
