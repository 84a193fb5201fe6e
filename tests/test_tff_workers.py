"""TFF workers (tff_workers.py, `fedgen-debug worker`, `--workers`): a SIGKILLed run leaves no worker
(nor its network bridge) behind; the local worker cannot be reached from the network (or, where it can,
says so); DP-FedAvg and DP-FedAvg-GAN rounds split across two workers by TFF's mergeable context give
the one-worker result."""

import contextlib
import ipaddress
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import portpicker
import pytest

from conftest import eventually, fedgen_cli
from fedgen_debug import runtime, tff_workers
from fedgen_debug.cli.doctor_cmd import federated_mean_check
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.training import dp_fedavg
from fedgen_debug.privacy.sampling import sample_clients

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
    children = [p for p in os.listdir("/proc") if p.isdigit() and runtime._read_stat_ppid(int(p)) == os.getpid()]
    print("CHILDREN", *children, flush=True)
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
        children = [int(p) for p in proc.stdout.readline().split()[1:]]   # the worker and its network bridge
        assert _alive(worker) and worker in children
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert eventually(lambda: not _alive(worker)), f"worker {worker} outlived its SIGKILLed parent"
        # The bridge gets SIGTERM, not KILL (it removes its socket first): on a loaded machine that takes a moment.
        assert eventually(lambda: not [p for p in children if _alive(p)]), \
            f"a child outlived its SIGKILLed parent: {[p for p in children if _alive(p)]}"
    finally:
        if proc.poll() is None:
            proc.kill()


def _own_addresses() -> list[str]:
    """This machine's addresses other than loopback (`hostname -I`, else the one a UDP socket would use)."""
    try:
        found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        found = []
    if not found:
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))   # no packet is sent: this only picks the outgoing address
            found = [s.getsockname()[0]]
    return [a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback]


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its sockets, as its own network namespace lists them)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for row in f.read().splitlines()[1:]:
                fields = row.split()
                if fields[3] == "0A" and fields[9] in inodes:   # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_the_local_worker_cannot_be_reached_from_the_network():
    """worker_binary listens on [::]:PORT, unauthenticated: from another machine, or another network
    namespace of this one, its port must not answer."""
    addresses = _own_addresses()
    if not addresses:
        pytest.skip("this machine has no address other than loopback")
    tff_workers.use_context(())
    assert federated_mean_check() == 3.0
    (worker,) = runtime.worker_processes(os.getpid())
    ports = _listening_ports(worker)
    assert ports, "the worker listens on no TCP port"
    for address in addresses:
        for port in ports:
            with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
                probe.settimeout(5.0)
                reached = probe.connect_ex((address, port)) == 0
            assert not reached, f"the local TFF worker {worker} answers on {address}:{port}"


def test_where_no_namespace_can_be_made_the_worker_says_it_listens_on_all_interfaces(monkeypatch, caplog):
    monkeypatch.setattr(tff_workers, "namespace_unavailable", lambda: "no user namespaces (test)")
    monkeypatch.setattr(tff_workers, "_warned_local_exposure", False)
    local = tff_workers._LocalWorker()
    try:
        with caplog.at_level(logging.WARNING, logger=tff_workers.__name__):
            assert local.get_stub().is_ready
            tff_workers._warn_local_exposure(1234, "again")
        (warning,) = [r.getMessage() for r in caplog.records]   # once a process
        port = int(local.worker.args[-1].split("=")[1])
        assert f"listens on all interfaces ([::]:{port})" in warning and "without TLS or authentication" in warning
        assert "no user namespaces (test)" in warning and "--backend tf" in warning
    finally:   # SIGINT stops it (runtime's own exit path); a loaded machine may take longer, then SIGKILL
        local.worker.send_signal(signal.SIGINT)
        try:
            local.worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            local.worker.kill()
            local.worker.wait(timeout=30)


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
