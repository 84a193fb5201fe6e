"""Shared fixtures, and the suite-wide check that no TFF worker_binary outlives the tests."""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys

import math
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import pytest

import fedgen_debug
from fedgen_debug import runtime
from fedgen_debug import disk_cache
from fedgen_debug.privacy.ledger import LEDGER_ENV, Ledger
from fedgen_debug.runs import secret as secret_lib

# The suite never touches the real privacy ledger: one of its own (inherited by CLI subprocesses),
# with an explicit unlimited budget so that tests may train with z = 0. Tests about budgets and
# bypasses use a fresh ledger each (`fresh_ledger`).
SUITE_LEDGER = tempfile.mkdtemp(prefix="fedgen-test-ledger-")
atexit.register(shutil.rmtree, SUITE_LEDGER, ignore_errors=True)   # each process's own, when it exits
os.environ[LEDGER_ENV] = SUITE_LEDGER
Ledger(SUITE_LEDGER).set_budget("*", math.inf, reason="test suite")

# Values kept on disk (`disk_cache`, `FEDGEN_DEBUG_CACHE`): one directory for the whole run, made by
# the first process (pytest, or xdist's controller before it starts its workers) and inherited by the
# workers and every CLI subprocess; never the user's ~/.cache, never a previous run's.
_inherited = os.environ.get("FEDGEN_DEBUG_TEST_CACHE")
if not _inherited or _inherited != os.environ.get(disk_cache.CACHE_ENV):
    os.environ[disk_cache.CACHE_ENV] = os.environ["FEDGEN_DEBUG_TEST_CACHE"] = tempfile.mkdtemp(prefix="fedgen-test-cache-")
    atexit.register(shutil.rmtree, os.environ[disk_cache.CACHE_ENV], ignore_errors=True)

# The suite runs TFF computations in-process too: the same exit hooks as the CLI.
runtime.install_shutdown_hooks()
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if os.path.dirname(os.path.abspath(fedgen_debug.__file__)) == os.path.join(REPO_ROOT, "fedgen_debug"):
    raise pytest.UsageError(
        "fedgen_debug was imported from the source tree, not the installed package (models/ and "
        "selectors/ only exist as fedgen_debug.models/.selectors once installed). Run `make test`, "
        "or `.venv/bin/pytest` rather than `python -m pytest`."
    )


def eventually(condition, timeout: float = 30.0, interval: float = 0.05) -> bool:
    """Polls `condition()` until it holds or `timeout` seconds pass; returns its last value. For "this
    process is gone": a fixed sleep fails on a loaded machine and waits too long on an idle one."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(interval)
    return True


def fedgen_cli() -> str:
    path = os.path.join(os.path.dirname(sys.executable), "fedgen-debug")
    assert os.path.exists(path), f"console script not installed at {path}"
    return path


def run_cli(*args, timeout=300, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([fedgen_cli(), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, **kwargs)


class CallTimedOut(BaseException):
    """A `run_main` call past its timeout: a BaseException, so that no `except Exception` in the CLI turns a
    hang into an ordinary refusal."""


def run_main(*args, timeout: int = 300) -> subprocess.CompletedProcess:
    """`fedgen-debug ARGS` in this process: `cli.main.main`, which the console script calls, with its exit
    code and output, stopped after `timeout` seconds as `run_cli` is. For CLI calls beyond the console-script
    calls the suite keeps (`run_cli`): each CLI process spends its first seconds importing TensorFlow, which
    this process has done once. Log records go to pytest's handlers, not to the returned stderr."""
    import contextlib
    import io
    import logging
    import signal

    from fedgen_debug.cli.main import main

    def timed_out(signum, frame):
        raise CallTimedOut(f"fedgen-debug {' '.join(map(str, args))} still running after {timeout} s")

    out, err, root = io.StringIO(), io.StringIO(), logging.getLogger()
    levels = root.level, logging.getLogger("tensorflow").level   # main() configures logging
    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:   # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        root.setLevel(levels[0])
        logging.getLogger("tensorflow").setLevel(levels[1])
    return subprocess.CompletedProcess(["fedgen-debug", *args], code, out.getvalue(), err.getvalue())


def hand_built_images() -> dict:
    """Three writers with exactly known pixels (multiples of 1/255, so uint8 round trips are exact)."""
    rng = np.random.default_rng(7)

    def client(n, label0):
        pixels = rng.integers(0, 256, size=(n, 28, 28)).astype(np.float32) / 255.0
        labels = (np.arange(n) + label0) % 62
        return collections.OrderedDict(label=labels.astype(np.int32), pixels=pixels)

    return {"alice": client(3, 0), "bob": client(1, 10), "carol": client(2, 61)}


def hand_built_text() -> dict:
    sentences = {
        "u1": ["I have a problem.", "Good day to you.", "Hello"],
        "u2": ["Is there a way to use regex in Python?"],
        "u3": ["You can't do that, jsfiddle says.", "Über café – naïve 😀 text"],
    }
    return {cid: collections.OrderedDict(text=np.array([s.encode() for s in ss], dtype=object))
            for cid, ss in sentences.items()}


@pytest.fixture
def image_client_data():
    from fedgen_debug.data.client_data import ArrayClientData

    return ArrayClientData(hand_built_images())


@pytest.fixture
def text_client_data():
    from fedgen_debug.data.client_data import ArrayClientData

    return ArrayClientData(hand_built_text())


def provision_secret(run_dir: str, name: str) -> None:
    """Fix the run secret of `run_dir` before it starts, as a server may provision one (`privacy.run_ledger.open_run`).

    For tests that assert what DP training learned: under a fresh secret they would pass or fail with the
    draw (the image-T6 test selected 2 or fewer of 4 devices for 6 of 40 secrets), so they pin one and a
    failure replays. `name` must be unique in the suite: the suite's ledger keys releases by the secret's
    run id, and two runs with one secret would collide there."""
    entropy = int.from_bytes(hashlib.sha256(f"fedgen-debug test secret: {name}".encode()).digest(), "little")
    secret_lib.save(run_dir, secret_lib.RunSecret(entropy))


# The demo at test size, all stages: a run store made by tiny real runs (four GANs and their shared
# primary CNN, char/word-LMs before and after the bug, analyses). Built once per session: the demo's
# CLI tests read its output and the app's tests read its store.
DEMO_TEST_ARGS = ("--users", "40", "--writers", "12", "--preset", "test", "--concat-fraction", "0.5",
                  "--vocab-size", "300")


@pytest.fixture(scope="session")
def demo_test_store(tmp_path_factory):
    """(out directory, the CompletedProcess of `fedgen-debug demo` at test size into it)."""
    out = tmp_path_factory.mktemp("demo-test-store") / "demo"
    for kind in ("char", "word"):  # the LM verdicts asserted in test_cli depend on what DP training learned
        for name in ("before", "after"):
            provision_secret(str(out / "lm" / f"{kind}-lm-{name}"), f"demo_test_store/{kind}-{name}")
    result = run_cli("demo", "--out", str(out), *DEMO_TEST_ARGS, timeout=1500)
    assert result.returncode == 0, result.stderr
    return out, result


@pytest.fixture
def fresh_ledger(tmp_path, monkeypatch) -> Ledger:
    """An empty ledger (default budgets) for this test, also for the CLI subprocesses it starts."""
    home = str(tmp_path / "ledger")
    monkeypatch.setenv(LEDGER_ENV, home)
    return Ledger(home)


# `make test` runs the suite on two xdist workers (`-n 2 --dist loadgroup`). A test file is one unit of
# work, so its module fixtures are built once; the files that read the session-built stores (the demo and
# the monitor, minutes each) form one unit together, so that each store is built once, not on both workers.
SESSION_STORES = {"demo_test_store", "monitor_store"}


@pytest.hookimpl(tryfirst=True)   # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    store_files = {item.path for item in items if SESSION_STORES & set(getattr(item, "fixturenames", ()))}
    for item in items:
        group = "session-stores" if item.path in store_files else item.path.name
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session", autouse=True)
def no_worker_outlives_the_session():
    """Set up first, torn down last: after the session's last test (on each xdist worker, its last
    test; a worker's session exit status does not reach the controller, a teardown error does), stop
    this process's TFF workers and fail if one would not stop."""
    yield
    runtime.shutdown()
    alive = runtime.worker_processes(os.getpid())
    assert not alive, f"TFF worker_binary children still alive after the tests: {alive}"


# ---- a monitor store (fedgen-debug monitor on a tiny real plan), shared by the monitor and app tests ----

# A char-LM on 24 synthetic users; the tokenizer bug glues every sentence's words from period 3 and is
# fixed in period 5. 12 rounds a period: a checkpoint at round 10 (what a kill -9 resumes from).
MONITOR_PLAN = {"data": "synthetic-text:users=24,seed=61", "periods": 5, "rounds_per_period": 12, "seed": 61,
                "rollout": "concat:3=1.0,5=0", "samples": 300,
                "fleet": {"initial": 0.9, "join_rate": 0.5, "leave_rate": 0.1, "window": 0.5},
                "privacy": {"noise_multiplier": 0.1, "clients_per_round": 8, "clip": 1.0},
                "budget": {"epsilon": 1e12}, "alerts": {"calibration_periods": 2, "persistence": 1, "window": 2},
                "auxiliaries": [{"kind": "char-lm", "preset": "test"}]}
# A GAN on 16 synthetic writers, 2 rounds a period (the warm start and budget tests).
GAN_MONITOR_PLAN = {**MONITOR_PLAN, "data": "synthetic-images:writers=16,seed=61", "rollout": "invert:3=0.5",
                    "samples": 64, "periods": 4, "rounds_per_period": 2,
                    "privacy": {"noise_multiplier": 0.1, "clients_per_round": 4, "clip": 0.1},
                    "auxiliaries": [{"kind": "gan", "select": "random", "preset": "test"}]}
MONITOR_AUXILIARY = "char-lm"


def ledger_with_unlimited_budget(path) -> str:
    Ledger(str(path)).set_budget("*", math.inf, reason="monitor test")
    return str(path)


def monitor(tmp, name, plan=MONITOR_PLAN, ledger=None, extra=(), wait=True, verbose=False, in_process=False):
    """Starts `fedgen-debug monitor` on `plan` with the monitor secret pinned by `name`; `in_process`: through
    `run_main` (no TensorFlow start-up of its own), the ledger set for the call only."""
    plan_path = tmp / f"{name}.plan.json"
    plan_path.write_text(json.dumps(plan))
    out = tmp / name
    provision_secret(str(out), "monitor")   # one monitor secret: the same noise for every copy of the plan
    env = {**os.environ, LEDGER_ENV: ledger or ledger_with_unlimited_budget(tmp / f"{name}-ledger")}
    args = [*(["-v"] if verbose else []), "monitor", "--plan", str(plan_path), "--out", str(out), *extra]
    if in_process:
        from unittest import mock

        with mock.patch.dict(os.environ, {LEDGER_ENV: env[LEDGER_ENV]}):
            return out, env, run_main(*args, timeout=900)
    command = [fedgen_cli(), *args]
    if not wait:
        return out, env, subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    return out, env, done


@pytest.fixture(scope="session")
def monitor_store(tmp_path_factory):
    """A store holding one finished monitor, uninterrupted, with its alerts file and its --on-alert log."""
    tmp = tmp_path_factory.mktemp("monitor-store")
    sink = tmp / "sink.jsonl"
    out, env, done = monitor(tmp, "monitor", extra=("--on-alert", f"cat >> {sink}; echo >> {sink}"))
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, out, env[LEDGER_ENV], done.stdout, sink
