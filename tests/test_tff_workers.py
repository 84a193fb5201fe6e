"""TFF workers (tff_workers.py, `fedgen-debug worker`, `--workers`): a SIGKILLed run leaves no worker
behind; DP-FedAvg and DP-FedAvg-GAN rounds split across two workers by TFF's mergeable context give
the one-worker result."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import portpicker
import pytest

from conftest import fedgen_cli
from fedgen_debug import runtime, tff_workers
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.training import dp_fedavg
from fedgen_debug.training.sampling import sample_clients

import test_gan_core as gan_fixtures
import test_tf_backend as tf_backend_tests
import toy_training


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_worker_addresses_are_checked():
    assert tff_workers.parse_workers(" 127.0.0.1:8000, [::1]:9000 ") == ("127.0.0.1:8000", "[::1]:9000")
    assert tff_workers.parse_workers("") == () and tff_workers.parse_workers(None) == ()
    for bad in ("localhost", "host:0", "host:70000", ":80", "a:1,a:1"):
        with pytest.raises(ValueError, match="--workers"):
            tff_workers.parse_workers(bad)


_HOLD = textwrap.dedent("""
    import os, time
    from fedgen_debug import runtime
    from fedgen_debug.cli.doctor_cmd import federated_mean_check
    federated_mean_check()
    print("WORKERS", *runtime.worker_processes(os.getpid()), flush=True)
    time.sleep(600)
""")


def test_a_sigkilled_run_leaves_no_worker_behind():
    """No exit hook runs on SIGKILL: the kernel's parent-death signal must stop the worker."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        line = proc.stdout.readline().split()
        assert line[:1] == ["WORKERS"] and len(line) == 2, line
        worker = int(line[1])
        assert _alive(worker)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(2.0)
        assert not _alive(worker), f"worker {worker} outlived its SIGKILLed parent"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """Two `fedgen-debug worker` processes on 127.0.0.1 (stopped with SIGTERM, which stops their worker)."""
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    logs = [tmp_path_factory.mktemp("worker") / "stderr.txt" for _ in ports]
    procs = [subprocess.Popen([fedgen_cli(), "worker", "--port", str(p)], stdout=subprocess.PIPE,
                              stderr=open(log, "w"), text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
             for p, log in zip(ports, logs)]
    try:
        for proc, port in zip(procs, ports):
            assert f"ready on port {port}" in proc.stdout.readline()
        workers = [runtime.worker_processes(proc.pid) for proc in procs]
        assert all(len(w) == 1 for w in workers), workers
        yield [f"127.0.0.1:{p}" for p in ports], logs, [w[0] for w in workers]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(") ")[-1].split()
    return int(fields[11]) + int(fields[12])   # utime + stime


def _toy_rounds(rounds=3):
    config, data, secret = toy_training.train_config(), toy_training.client_data(n_clients=5), RunSecret(77)
    process = dp_fedavg.build_process(toy_training.SPEC, config, secret.tf_seed("dp-noise"), backend="tff")
    state, weights = process.initialize(), []
    for r in range(rounds):
        sampled = sample_clients(sorted(data), config.dp.clients_per_round, secret.rng("sampling", r))
        state = process.next(state, [dp_fedavg.client_dataset(data[c], config) for c in sampled]).state
        weights.append([np.asarray(w) for w in process.get_model_weights(state).trainable])
    return weights


def test_rounds_on_two_workers_equal_rounds_on_one(two_workers):
    addresses, logs, workers = two_workers
    assert all("listens on all interfaces" in log.read_text() for log in logs)   # the risk, said at start
    local = _toy_rounds()
    gan_config = gan_fixtures.tiny_config(1.0, 0.5, rounds=2)
    local_gan = tf_backend_tests.gan_rounds("tff", gan_config, 2)
    before = [_cpu_ticks(w) for w in workers]
    try:
        tff_workers.use_context(tuple(addresses))
        merged = _toy_rounds()
        # DP-FedAvg-GAN's rounds (discriminator and generator phases, secret step seeds) as well.
        tf_backend_tests.assert_same_state(local_gan[-1], tf_backend_tests.gan_rounds("tff", gan_config, 2)[-1])
        # Both workers computed (each round's two clients are split across them).
        assert all(_cpu_ticks(w) > b for w, b in zip(workers, before)), (before, [_cpu_ticks(w) for w in workers])
    finally:
        runtime.shutdown(restore_context=True)   # back to a local worker for the other tests
    for a, b in zip(local, merged):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
    assert not np.allclose(local[0][0], local[-1][0])   # the rounds moved the weights


def test_the_cli_runs_tff_computations_on_the_workers_it_is_given(two_workers):
    addresses, _, _ = two_workers
    done = subprocess.run([fedgen_cli(), "--workers", ",".join(addresses), "doctor", "--json"], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["backend"] == "tff" and report["tff_workers"] == ",".join(addresses)
    refused = subprocess.run([fedgen_cli(), "--backend", "tf", "--workers", addresses[0], "doctor"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "cannot go with --backend tf" in refused.stderr
    # A worker that is not there is named, not waited for forever.
    port = portpicker.pick_unused_port()
    with pytest.raises(RuntimeError, match=f"no TFF worker answered at 127.0.0.1:{port}"):
        tff_workers.wait_ready(f"127.0.0.1:{port}", timeout_s=1.0)
